"""A pass's own Parquet files (io.sinkfiles): the rows it was given with the run's constants,
read by the engine with the table's types; a file a failed pass discards is gone."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from tracelake.io.sinkfiles import TEXT, SinkFile, sink_spec


@pytest.mark.portable
def test_a_sink_file_holds_its_rows_and_the_run_constants_as_the_engine_reads_them(spark, tmp_path):
    started = datetime(2026, 12, 6, 14, 0, 5, tzinfo=UTC)
    spec = sink_spec(str(tmp_path / "written"), {"ingest_run_id": "run-1", "ingest_ts": started})
    sink = SinkFile(spec, "part-00000.parquet", [("metric", TEXT), ("value", pa.float64()), ("flag", pa.int8())])
    for values in ([1.5, 2.5], [3.5]):
        sink.write(pa.table({"metric": pa.array(["GPU_UTIL"] * len(values)), "value": pa.array(values),
                             "flag": pa.array([0] * len(values), pa.int8()), "ignored": pa.array([7] * len(values))}))
    sink.close()
    frame = spark.read.parquet(str(tmp_path / "written"))
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("metric", "string"), ("value", "double"), ("flag", "tinyint"), ("ingest_run_id", "string"),
        ("ingest_ts", "timestamp")]
    rows = sorted(tuple(r) for r in frame.collect())
    assert [r[:4] for r in rows] == [("GPU_UTIL", v, 0, "run-1") for v in (1.5, 2.5, 3.5)]
    assert {r[4].timestamp() for r in rows} == {started.timestamp()} and sink.rows == 3

    failed = SinkFile(spec, "part-00001.parquet", [("value", pa.float64())])
    failed.write(pa.table({"value": pa.array([9.0])}))
    failed.discard()
    assert sorted(p.name for p in (tmp_path / "written").iterdir()) == ["part-00000.parquet"]
