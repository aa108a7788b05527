"""The rules of every table (GX suites), evaluated as Spark columns, and the split of a table's
rows into kept and quarantined with the results that go to ops.quality_results."""
