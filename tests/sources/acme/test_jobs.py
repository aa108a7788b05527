"""AcmeTrace job CSVs → bronze.acme_jobs: the README rows, time zones, strict headers,
quarantine with reasons, warnings with rates, and the generator's calibration."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.errors import TracelakeError
from tracelake.io.parse import PARSE_ERRORS
from tracelake.run.pipeline import run_ingest
from tracelake.schema import load_schema
from tracelake.sources.acme.jobs import SEREN_HEADER, parse_acme_jobs, plan
from tracelake.sources.acme.synth import jobs as generate_jobs

README = Path(__file__).resolve().parent / "fixtures" / "readme"
KALOS_HEADER = generate_jobs.KALOS_HEADER
TIMES = ("submit_time", "start_time", "end_time", "fail_time", "stop_time")
SCHEMA = load_schema("bronze.acme_jobs")


def _epoch(text: str | None) -> int | None:
    """Plain-Python reference: the instant an ISO time with offset denotes, in Unix seconds."""
    return int(datetime.fromisoformat(text).timestamp()) if text else None


def _parse(spark, folder: Path):
    [item] = plan(folder, folder / "_staging")
    return parse_acme_jobs(spark, item.files, SCHEMA)


def _write(folder: Path, seren: list[str] | None, kalos: list[str] | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if seren is not None:
        (folder / "trace_seren.csv").write_text("\n".join([",".join(SEREN_HEADER), *seren]) + "\n")
    if kalos is not None:
        (folder / "trace_kalos.csv").write_text("\n".join([KALOS_HEADER, *kalos]) + "\n")
    return folder


@pytest.mark.portable
def test_readme_example_rows_parse_to_the_documented_values(spark):
    parsed = _parse(spark, README)
    assert [r[PARSE_ERRORS] for r in parsed.collect()] == [[], []]
    got = parsed.select(
        "cluster", "job_id", "user", "node_num", "gpu_num", "cpu_num", "mem_per_pod_gb",
        "shared_mem_per_pod", "type", "state", *[F.col(c).cast("bigint").alias(c) for c in TIMES],
        "duration", "queue", "gpu_time", "source_file",
    )
    e = _epoch
    expected = spark.createDataFrame([
        ("seren", "5778432", "u5907", 1, 8, 128, None, None, "Other", "FAILED",
         e("2023-03-01 00:18:22+08:00"), e("2023-03-01 00:18:54+08:00"), e("2023-03-01 00:20:51+08:00"),
         None, None, 117, 32.0, 936.0, "trace_seren.csv"),
        ("kalos", "dlctk696s0jbvitv", "uf794", 8, 64, 960, 1000.0, 100.0, "Other", "FAILED",
         e("2023-05-17 11:00:58+00:00"), e("2023-05-17 11:01:08+00:00"), e("2023-05-17 11:01:16+00:00"),
         e("2023-05-17 11:01:16+00:00"), None, 18, 10.0, 1152.0, "trace_kalos.csv"),
    ], got.schema)
    assert_same_rows(got, expected)
    assert e("2023-03-01 00:18:22+08:00") == 1677601102  # 2023-02-28 16:18:22 UTC


@pytest.mark.portable
def test_plus_eight_and_plus_zero_are_the_same_utc_instants_as_python(spark, tmp_path):
    """A generated world's every timestamp, and one instant written in both zones."""
    generate_jobs.generate(tmp_path, 0.002, seed=5)
    one = "2023-06-01 08:00:00+08:00", "2023-06-01 00:00:00+00:00"
    (tmp_path / "same").mkdir()
    _write(tmp_path / "same",
           [f"1,u1,1,1,16,Eval,COMPLETED,{one[0]},{one[0]},{one[0]},0,0,0.0"],
           [f"dlc0000000000001,u1,1,1,15,125,12.5,Eval,COMPLETED,{one[1]},{one[1]},{one[1]},,,0,0.0,0.0"])
    same = _parse(spark, tmp_path / "same").select("cluster", F.col("submit_time").cast("bigint").alias("t"))
    assert sorted(same.collect()) == [("kalos", 1685577600), ("seren", 1685577600)]

    parsed = _parse(spark, tmp_path).select(
        "cluster", "raw_values_json", *[F.col(c).cast("bigint").alias(c) for c in TIMES]).collect()
    rows = {"seren": 0, "kalos": 0}
    for row in parsed:
        raw = json.loads(row.raw_values_json)
        for col in TIMES:
            assert row[col] == _epoch(raw.get(col)), (row.cluster, col, raw.get(col))
        rows[row.cluster] += 1
    truth = json.loads((tmp_path / generate_jobs.GROUND_TRUTH).read_text())["clusters"]
    assert rows == {c: truth[c]["jobs"] for c in rows} == {"seren": 1637, "kalos": 125}


@pytest.mark.portable
def test_each_file_must_carry_its_own_exact_header(spark, tmp_path):
    _write(tmp_path / "a", None, None)
    (tmp_path / "a" / "trace_seren.csv").write_text(KALOS_HEADER + "\n")
    kalos_start = "job_id,user,node_num,gpu_num,cpu_num,mem_per_pod_GB"
    with pytest.raises(TracelakeError, match=f"trace_seren.csv: header '{kalos_start}"):
        _parse(spark, tmp_path / "a")
    _write(tmp_path / "b", None, None)
    (tmp_path / "b" / "trace_kalos.csv").write_text(",".join(SEREN_HEADER) + "\n")
    with pytest.raises(TracelakeError, match="trace_kalos.csv: header .* does not match bronze.acme_jobs"):
        _parse(spark, tmp_path / "b")


def test_plan_finds_the_release_layout_and_nothing_else(tmp_path):
    assert plan(tmp_path, tmp_path / "s") == []
    (tmp_path / "job_trace").mkdir()
    (tmp_path / "job_trace" / "trace_kalos.csv").write_text(KALOS_HEADER + "\n")
    [item] = plan(tmp_path, tmp_path / "s")
    assert (item.table, [(f.name, f.constants) for f in item.files]) == (
        "bronze.acme_jobs", [("job_trace/trace_kalos.csv", {"cluster": "kalos"})])
    (tmp_path / "trace_kalos.csv").write_text(KALOS_HEADER + "\n")
    with pytest.raises(TracelakeError, match="keep one"):
        plan(tmp_path, tmp_path / "s")


SEREN_ROW = (README / "trace_seren.csv").read_text().splitlines()[1]  # the README's example rows
KALOS_ROW = (README / "trace_kalos.csv").read_text().splitlines()[1]
T0, T1, T2 = "2023-04-02 10:00:00+08:00", "2023-04-02 10:00:05+08:00", "2023-04-02 10:01:05+08:00"
K0, K1 = "2023-08-31 20:00:00+00:00", "2023-08-31 20:00:02+00:00"
BROKEN_SEREN = {
    "preempted": f"5778433,u1,1,8,128,SFT,PREEMPTED,{T0},{T1},{T2},60,5,480.0",
    "bad_state": f"5778434,u1,1,8,128,SFT,EXPLODED,{T0},{T1},{T2},60,5,480.0",
    "bad_time": f"5778435,u1,1,8,128,SFT,FAILED,2023-13-02 10:00:00+08:00,{T1},{T2},60,5,480.0",
    "short": f"5778436,u1,1,8,128,SFT,FAILED,{T0},{T1},{T2},60,5",
    "dup_a": f"5778437,u1,1,1,16,Eval,COMPLETED,{T0},{T1},{T2},60,5,60.0",
    "dup_b": f"5778437,u2,1,1,16,Eval,COMPLETED,{T0},{T1},{T2},60,5,60.0",
    "letter_id": f"57a8438,u1,1,1,16,Eval,COMPLETED,{T0},{T1},{T2},60,5,60.0",
    "end_first": f"5778439,u1,1,1,16,Eval,COMPLETED,{T0},{T2},{T1},60,60,60.0",
}
BROKEN_KALOS = {
    "running": f"dlcrunning000001,u2,1,0,4,16,8.0,Other,RUNNING,{K0},{K1},,,,,2.0,",
    "no_end": f"dlcnoend00000001,u2,1,1,15,125,12.5,Eval,FAILED,{K0},{K1},,,,18,2.0,18.0",
    "short_id": f"dlcshort0000001,u2,1,1,15,125,12.5,Eval,COMPLETED,{K0},{K1},{K1},,,2,2.0,2.0",
    "neg_gpu": f"dlcneggpu0000001,u2,1,-8,15,125,12.5,Eval,COMPLETED,{K0},{K1},{K1},,,2,2.0,-16.0",
}
QUARANTINED = {
    "bad_state": ["state_known"],
    "bad_time": ["submit_time: '2023-13-02 10:00:00+08:00' is not a valid timestamp"],
    "short": ["expected 13 fields, found 12"],
    "dup_a": ["job_id_unique_per_cluster"], "dup_b": ["job_id_unique_per_cluster"],
    "letter_id": ["seren_job_id_integer"],
    "end_first": ["end_not_before_start"],
    "no_end": ["end_time_unless_running"],
    "short_id": ["kalos_job_id_16_chars"],
    "neg_gpu": ["gpu_num_not_negative", "gpu_time_not_negative"],
}


def test_broken_rows_go_to_quarantine_with_reasons_and_quirks_are_warnings(engine, spark, config, tmp_path):
    raw = _write(tmp_path / "raw", [SEREN_ROW, *BROKEN_SEREN.values()], [KALOS_ROW, *BROKEN_KALOS.values()])
    stats = {s.table: s for s in run_ingest(engine, config, "acme", str(raw))}
    bronze = stats["bronze.acme_jobs"]
    assert (bronze.rows_read, bronze.rows_kept, bronze.rows_quarantined) == (14, 4, 10)
    assert bronze.rows_read == bronze.rows_kept + bronze.rows_quarantined

    table = spark.read.format("delta").load(config.table_path("bronze", "acme_jobs"))
    assert sorted((r.cluster, r.job_id, r.state) for r in table.collect()) == [
        ("kalos", "dlcrunning000001", "RUNNING"), ("kalos", "dlctk696s0jbvitv", "FAILED"),
        ("seren", "5778432", "FAILED"), ("seren", "5778433", "PREEMPTED")]
    running = table.filter(F.col("state") == "RUNNING").first()
    assert (running.end_time, running.duration, running.gpu_time, running.queue) == (None, None, None, 2.0)

    quarantine = spark.read.format("delta").load(config.table_path("quarantine", "acme_jobs"))
    lines = {**BROKEN_SEREN, **BROKEN_KALOS}
    expected = spark.createDataFrame(
        [(lines[k], sorted(v), "trace_kalos.csv" if k in BROKEN_KALOS else "trace_seren.csv")
         for k, v in QUARANTINED.items()],
        "raw_line string, reasons array<string>, source_file string")
    assert_same_rows(quarantine.select("raw_line", "reasons", "source_file"), expected)

    ops = spark.read.format("delta").load(config.table_path("ops", "quality_results"))
    results = {r.expectation_id: r for r in ops.filter(F.col("table_name") == "bronze.acme_jobs").collect()}
    # the gate sees the 12 rows that parsed; warnings are rates over them, never drops
    state = results["state_documented"]
    # PREEMPTED, EXPLODED (also quarantined), RUNNING
    assert (state.severity, state.element_count, state.unexpected_count) == ("warning", 12, 3)
    # Kalos rows with a queue (README row: 18 s = end - submit, 8 s run; short_id, neg_gpu) and
    # end_first; null ends (running, no_end) are not counted
    duration = results["duration_is_end_minus_start"]
    assert (duration.severity, duration.element_count, duration.unexpected_count) == ("warning", 12, 4)
    assert duration.unexpected_percent == pytest.approx(100 * 4 / 12)
    assert results["tracelake_parse"].unexpected_count == 2


def test_generator_allocates_the_published_counts_at_scale_one():
    expected = {"seren": (818_327, 450_590), "kalos": (62_413, 19_907)}
    for spec in generate_jobs.CLUSTERS:
        cells = generate_jobs._cells(spec, 1.0)
        jobs = sum(c[3] for c in cells)
        gpu = sum(c[3] for c in cells if c[0])
        assert (jobs, gpu) == expected[spec.name]
        states = {}
        for _is_gpu, _, state, n in cells:
            states[state] = states.get(state, 0) + n
        if spec.name == "kalos":
            assert states == {"COMPLETED": 47_311, "FAILED": 13_836, "CANCELLED": 1_263, "RUNNING": 3}
        else:
            assert states["PREEMPTED"] == 43_707 and "RUNNING" not in states


def test_generator_is_deterministic_and_writes_the_release_formats(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = generate_jobs.generate(tmp_path / "a", 0.001, seed=9)
    b = generate_jobs.generate(tmp_path / "b", 0.001, seed=9)
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    seren = (tmp_path / "a" / "trace_seren.csv").read_text().splitlines()
    kalos = (tmp_path / "a" / "trace_kalos.csv").read_text().splitlines()
    assert seren[0] == ",".join(SEREN_HEADER) and kalos[0] == KALOS_HEADER
    assert all(len(line.split(",")) == 13 and line.split(",")[7].endswith("+08:00") for line in seren[1:])
    assert all(len(line.split(",")) == 17 and line.split(",")[9].endswith("+00:00") for line in kalos[1:])
    assert all("." in line.split(",")[15] for line in kalos[1:])  # float queue
    running = [line for line in kalos[1:] if ",RUNNING," in line]
    assert len(running) == 1 and running[0].split(",")[11] == "" and running[0].split(",")[14] == ""
