"""The reads of the lake that a source's builds and report pages make. A source imports them
from here, never from `tracelake.delta`, so the kernel may change how it stores and compares
tables without touching a source."""

from tracelake.delta.catalog import partition_predicate, read_tables
from tracelake.delta.fingerprint import changed_groups

__all__ = ["changed_groups", "partition_predicate", "read_tables"]
