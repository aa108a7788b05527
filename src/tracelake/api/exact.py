"""Sums of doubles that do not depend on the order rows arrive in.

A float sum's last digits follow the order partitions deliver their rows, which varies from run
to run; an identical re-run then computed a derived table that differed in the 16th digit, its
fingerprint changed, and the table got a new version (gold.jobs_gpu_count_cdf on the real ITP
release, the Zhejiang evidence and gold). Added as decimals instead, a sum is exact and so
associative: the same rows give the same double in any order. 12 decimals keep far more than the
measurements carry; 26 integer digits hold any byte count or GPU-hour total here.
"""

from __future__ import annotations

from pyspark.sql import Column, WindowSpec
from pyspark.sql import functions as F

DECIMAL = "decimal(38,12)"


def exact_sum(value: Column, over: WindowSpec | None = None) -> Column:
    """F.sum(value) (over a window, if given) as a double, independent of row order."""
    total = F.sum(value.cast(DECIMAL))
    return (total if over is None else total.over(over)).cast("double")


def exact_mean(value: Column) -> Column:
    """F.avg(value) without its order-dependent float sum; null over no values."""
    return F.when(F.count(value) > 0, exact_sum(value) / F.count(value).cast("double"))
