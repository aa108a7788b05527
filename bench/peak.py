"""The peak RSS of a bench process that ran an engine in process."""

from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    """The larger of this process's peak RSS and its largest child's: the local profile's Sail
    server is a child process, whose peak RUSAGE_CHILDREN holds once its engine is stopped (and
    the child waited for)."""
    return max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024.0
