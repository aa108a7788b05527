"""Zeus derived tables."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

JOIN_KEYS = ["dataset", "network", "batch_size", "optimizer"]


def time_energy_to_accuracy(train: DataFrame, power: DataFrame) -> DataFrame:
    """The Zeus simulator's grain: train ⋈ power on the shared columns (an inner join, as in
    zeus/_legacy/simulate.py), TTA = target_epoch × time_per_epoch, ETA = TTA × average_power.
    A run that never reached its target keeps null TTA/ETA rather than being dropped."""
    joined = train.select(
        *JOIN_KEYS, "learning_rate", "run", "target_metric", "target_epoch"
    ).join(
        power.select(*JOIN_KEYS, "gpu", "power_limit", "time_per_epoch", "average_power"),
        JOIN_KEYS,
        "inner",
    )
    tta = F.col("target_epoch") * F.col("time_per_epoch")
    return joined.select(
        "gpu", *JOIN_KEYS, "learning_rate", "run", "target_metric", "power_limit",
        "target_epoch", "time_per_epoch", "average_power",
        tta.alias("time_to_accuracy_s"),
        (tta * F.col("average_power")).alias("energy_to_accuracy_j"),
        (F.col("time_per_epoch") * F.col("average_power")).alias("energy_per_epoch_j"),
    )
