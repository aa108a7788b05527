"""`tracelake sql`: the read-only prompt, driven through a pipe as a script would."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import itp_csv, job_id, tracelake_in_process, write_archive


def _sql(lake, script: str, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tracelake", "sql", "--lake", str(lake), *options],
                          input=script, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "RUST_LOG": "error"})


def test_sql_answers_tables_schema_and_a_select_and_refuses_a_write(engine, tmp_path):
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},1,600,1", f"{job_id(2)},2,600,2"])})
    assert tracelake_in_process(engine, "ingest", "itp", "--raw", str(raw), "--lake", str(lake)).returncode == 0
    script = "\n".join([
        ".tables",
        "SELECT count(*) AS jobs,",  # a statement over lines, ended by ;
        "       sum(num_gpu) AS gpus",
        "FROM bronze.itp_jobs;",
        "DELETE FROM bronze.itp_jobs;",
        "SELEC 1;",
        ".schema bronze.itp_jobs",
        "SELECT job_id FROM bronze.itp_jobs ORDER BY job_id",  # the input ends inside it: run as it is
    ])
    done = _sql(lake, script)
    assert done.returncode == 2  # a statement failed
    assert done.stderr.splitlines() == [
        "tracelake: error: query is read-only: DELETE statements are refused "
        "(tables change only through `tracelake ingest` and `tracelake maintain`)",
        "tracelake: error: query failed: invalid argument: found SELEC at 0:5 expected something else, ';', "
        "statement, or end of input",
    ]
    out = done.stdout.splitlines()
    tables = ["bronze.itp_jobs", "silver.jobs", "gold.jobs_characterization", "gold.jobs_duration_comparison",
              "gold.jobs_duration_quantiles", "gold.jobs_failures", "gold.jobs_gpu_count_cdf", "quarantine.itp_jobs",
              "ops.quality_results"]
    assert out[:len(tables)] == tables
    rest = out[len(tables):]
    assert rest[:4] == ["jobs | gpus", "-----+-----", "   2 |    3", "(1 row)"]
    assert rest[4].split() == ["column", "|", "type", "|", "nullable", "|", "unit", "|", "description"]
    assert [line.split(" | ")[0].strip() for line in rest[6:14]] == [
        "cluster", "job_id", "submission_time", "duration", "num_gpu", "source_file", "ingest_run_id", "ingest_ts"]
    assert rest[14:] == ["(8 rows)", "job_id", "-" * 36, job_id(1), job_id(2), "(2 rows)"]
    # the write was refused: both rows are there
    again = _sql(lake, "SELECT count(*) AS n FROM bronze.itp_jobs;\n.quit\nSELECT 1;\n", "--format", "csv")
    assert (again.returncode, again.stdout, again.stderr) == (0, "n\n2\n", "")


def test_sql_dot_commands_need_no_engine(tmp_path):
    done = _sql(tmp_path / "lake", ".help\n.nope\n.quit\n")
    assert done.returncode == 2
    assert done.stdout.splitlines()[1] == ".tables            the lake's tables (layer.table)"
    assert done.stderr == ("tracelake: error: unknown command .nope (.tables, .schema TABLE, .mode table|csv|json, "
                           ".maxrows N, .timer on|off, .help, .quit)\n")


def test_a_piped_line_of_several_statements_runs_each_in_order(tmp_path):
    script = "SELECT 1 AS a, 2 AS a; SELECT 'x;y' AS s; -- a comment; not a statement\n"
    done = _sql(tmp_path / "lake", script)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == ["a | a", "--+--", "1 | 2", "(1 row)", "s", "---", "x;y", "(1 row)"]


def test_mode_maxrows_and_timer_change_how_results_print(tmp_path):
    script = "\n".join([
        "SELECT id FROM range(5);",
        ".maxrows 2",
        "SELECT id FROM range(5);",
        ".mode csv",
        ".timer on",
        "SELECT id FROM range(3);",
    ])
    done = _sql(tmp_path / "lake", script, "--limit", "4")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "id", "--", " 0", " 1", " 2", " 3", "(5 rows, 4 shown (--limit / .maxrows for more))",
        "id", "--", " 0", " 1", "(5 rows, 2 shown (--limit / .maxrows for more))",
        "id", "0", "1", "2"]  # CSV is never capped by .maxrows
    [timed] = done.stderr.splitlines()
    assert timed.startswith("Run Time: ") and timed.endswith(" s")
