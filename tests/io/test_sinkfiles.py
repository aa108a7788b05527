"""A pass's own Parquet files (io.sinkfiles): the rows it was given with the run's constants,
read by the engine with the table's types; a file a failed pass discards is gone."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from tracelake.io.sinkfiles import TEXT, SinkFile, sink_spec
from tracelake.io.staging import Scratch, move_files


@pytest.mark.portable
def test_a_sink_file_holds_its_rows_and_the_run_constants_as_the_engine_reads_them(spark, tmp_path):
    started = datetime(2026, 12, 6, 14, 0, 5, tzinfo=UTC)
    spec = sink_spec(str(tmp_path / "written"), {"ingest_run_id": "run-1", "ingest_ts": started, "_tl_q0": False})
    sink = SinkFile(spec, "part-00000.parquet", [("metric", TEXT), ("value", pa.float64()), ("flag", pa.int8())])
    for values in ([1.5, 2.5], [3.5]):
        sink.write(pa.table({"metric": pa.array(["GPU_UTIL"] * len(values)), "value": pa.array(values),
                             "flag": pa.array([0] * len(values), pa.int8()), "ignored": pa.array([7] * len(values))}))
    sink.close()
    frame = spark.read.parquet(str(tmp_path / "written"))
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        ("metric", "string"), ("value", "double"), ("flag", "tinyint"), ("ingest_run_id", "string"),
        ("ingest_ts", "timestamp"), ("_tl_q0", "boolean")]
    rows = sorted(tuple(r) for r in frame.collect())
    assert [r[:4] + r[5:] for r in rows] == [("GPU_UTIL", v, 0, "run-1", False) for v in (1.5, 2.5, 3.5)]
    assert {r[4].timestamp() for r in rows} == {started.timestamp()} and sink.rows == 3

    failed = SinkFile(spec, "part-00001.parquet", [("value", pa.float64())])
    failed.write(pa.table({"value": pa.array([9.0])}))
    failed.discard()
    assert sorted(p.name for p in (tmp_path / "written").iterdir()) == ["part-00000.parquet"]


def test_written_files_move_in_among_staged_ones_only_with_the_staged_columns(tmp_path):
    """run.parsing moves a pass's written files in among the staged files not set apart: a file
    whose columns are not the staged ones would read back as nulls there, so none moves."""
    spec = sink_spec(str(tmp_path / "written"), {"ingest_run_id": "run-1"})
    for name, columns in (("part-a.parquet", [("value", pa.float64())]), ("part-b.parquet", [("value", pa.float64())])):
        sink = SinkFile(spec, name, columns)
        sink.write(pa.table({"value": pa.array([1.0, 2.0])}))
        sink.close()
    target = Scratch(str(tmp_path / "staged" / "_tl_apart=false"))
    with pytest.raises(ValueError, match=r"part-a.parquet: a written file's columns are not the staged ones: \['flag'\]"):
        move_files(Scratch(str(tmp_path / "written")), target, ["value", "ingest_run_id", "flag"])
    assert not target.exists() and len(list((tmp_path / "written").iterdir())) == 2
    assert move_files(Scratch(str(tmp_path / "written")), target, ["ingest_run_id", "value"])
    assert sorted(p.name for p in target.local().iterdir()) == ["part-a.parquet", "part-b.parquet"]
    assert not list((tmp_path / "written").iterdir())
    assert not move_files(Scratch(str(tmp_path / "written")), target, ["value"])  # nothing left: nothing moved


def test_required_columns_and_constants_are_written_required_and_a_null_there_fails_the_write(tmp_path):
    """A pass names the columns it never leaves null (io.sinkfiles.SinkFile `required`): those and
    the constants are required Parquet columns; a null in one fails the write, naming the column,
    and the discarded file is gone."""
    import pyarrow.parquet as pq

    spec = sink_spec(str(tmp_path / "written"), {"ingest_run_id": "run-1", "_tl_q0": False})
    sink = SinkFile(spec, "part-a.parquet", [("key", TEXT), ("value", pa.float64())], required={"key"})
    sink.write(pa.table({"key": pa.array(["a", "b"]), "value": pa.array([1.0, None])}))
    sink.close()
    footer = pq.ParquetFile(tmp_path / "written" / "part-a.parquet").schema
    assert {footer.column(i).name: footer.column(i).max_definition_level for i in range(len(footer))} == {
        "key": 0, "value": 1, "ingest_run_id": 0, "_tl_q0": 0}
    assert pq.read_table(tmp_path / "written" / "part-a.parquet").column("value").to_pylist() == [1.0, None]

    failed = SinkFile(spec, "part-b.parquet", [("key", TEXT)], required={"key"})
    failed.write(pa.table({"key": pa.array(["a"])}))
    with pytest.raises(pa.ArrowInvalid, match="Column 'key' is declared non-nullable but contains nulls"):
        failed.write(pa.table({"key": pa.array(["b", None])}))
    failed.discard()
    assert sorted(p.name for p in (tmp_path / "written").iterdir()) == ["part-a.parquet"]
