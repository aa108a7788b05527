"""The `tracelake` command as a user runs it: separate processes, CSV on stdout, one-line errors."""

from __future__ import annotations

import os
import signal
import sys

import pytest
from helpers import itp_csv, job_id, rows, tracelake, write_archive

from tracelake.app.cli import main
from tracelake.quality.gate import load_suite
from tracelake.sources.itp.synth import RELEASE_ROWS, TESTBED_ROWS


def test_generate_ingest_query_tables(tmp_path):
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    gen = tracelake("generate", "itp", "--out", str(raw), "--scale", "0.01", "--seed", "3")
    assert gen.returncode == 0, gen.stderr
    assert sorted(p.split("/")[-1] for p in gen.stdout.split()) == ["elasticflow-traces.tar.gz", "raw-traces.tar.gz"]
    ingest = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(lake))
    assert ingest.returncode == 0, ingest.stderr
    assert "ingest summary" in ingest.stdout

    n = sum(round(v * 0.01) for v in RELEASE_ROWS.values())
    testbed = min(TESTBED_ROWS, round(RELEASE_ROWS[2] * 0.01) - round(RELEASE_ROWS[2] * 0.01) // 2)
    q = tracelake("query", "SELECT variant, count(*) AS n FROM bronze.elasticflow_jobs GROUP BY variant ORDER BY variant",
                  "--lake", str(lake))
    assert q.returncode == 0, q.stderr
    assert rows(q.stdout) == [["variant", "n"], ["elasticflow", str(n)], ["testbed", str(testbed)]]

    t = tracelake("tables", "--lake", str(lake))
    assert t.returncode == 0, t.stderr
    table = {r[0]: r[1:] for r in rows(t.stdout)[1:]}
    assert table["bronze.itp_jobs"] == [str(n), "1", "WRITE"]  # a first load appends
    assert table["quarantine.itp_jobs"] == ["0", "0", "CREATE TABLE"]
    q = tracelake("query", "SELECT table_name, count(*) AS n FROM ops.quality_results GROUP BY table_name", "--lake", str(lake))
    recorded = {r[0]: int(r[1]) for r in rows(q.stdout)[1:]}
    for bronze in ("bronze.itp_jobs", "bronze.elasticflow_jobs"):  # the parse row + each rule of the suite
        assert recorded[bronze] == 1 + len(load_suite(bronze)["expectations"])
    for derived, n in recorded.items():  # derived tables record each rule of their suite
        if not derived.startswith("bronze."):
            assert n == len(load_suite(derived)["expectations"]), derived


def test_query_arrays_print_as_json(tmp_path):
    raw = tmp_path / "raw"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},1,600,1", f"{job_id(2)},2,600,5"])})
    assert tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(tmp_path / "lake")).returncode == 0
    q = tracelake("query", "SELECT raw_line, reasons FROM quarantine.itp_jobs", "--lake", str(tmp_path / "lake"))
    assert rows(q.stdout) == [["raw_line", "reasons"], [f"{job_id(2)},2,600,5", '["column_values_to_be_in_set(num_gpu)"]']]


def test_errors_are_one_line_with_an_exit_code(tmp_path):
    missing = tracelake("ingest", "itp", "--raw", str(tmp_path / "nowhere"), "--lake", str(tmp_path / "lake"))
    assert (missing.returncode, missing.stderr.strip()) == (2, f"tracelake: error: raw folder {tmp_path / 'nowhere'} does not exist")
    bad_sql = tracelake("query", "SELECT * FROM bronze.nope", "--lake", str(tmp_path / "lake"))
    assert bad_sql.returncode == 2  # the user's statement, not an internal error
    assert len(bad_sql.stderr.strip().splitlines()) == 1 and bad_sql.stderr.startswith("tracelake: error: query failed: ")
    assert "Traceback" not in bad_sql.stderr


class PanicException(BaseException):
    """Stands in for pyo3's: a Rust panic in deltalake or pysail is a BaseException of this name."""


def test_a_rust_panic_is_one_line_exit_1(monkeypatch, capsys):
    def panic(args):
        raise PanicException("TimeDelta::hours out of bounds")
    monkeypatch.setitem(sys.modules["tracelake.app.cli"].COMMANDS, "tables", panic)
    assert main(["tables"]) == 1
    assert capsys.readouterr().err == "tracelake: error: PanicException: TimeDelta::hours out of bounds\n"


def test_a_call_the_server_ended_without_sparks_error_names_its_status_and_message(monkeypatch, capsys):
    """Spark Connect's client raises the gRPC error's text when the server's status has no error
    of Spark's own; its first line says nothing. The line printed has the status and the server's
    message; of a message of several lines (a task's Python traceback), its first and last."""
    class SparkConnectGrpcException(Exception):
        pass

    def ended(details):
        def run(args):
            raise SparkConnectGrpcException(
                "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.INTERNAL\n"
                f'\tdetails = "{details}"\n\tdebug_error_string = "UNKNOWN:Error received from peer"\n>')
        return run

    for details, said in (
            ("execution error: file gone", "execution error: file gone"),
            ('Traceback (most recent call last):\n  File "x.py", line 3\nValueError: bad "row"',
             'Traceback (most recent call last): ... ValueError: bad "row"'),
            ("", "no details")):
        monkeypatch.setitem(sys.modules["tracelake.app.cli"].COMMANDS, "tables", ended(details))
        assert main(["tables"]) == 1
        assert capsys.readouterr().err == (
            f"tracelake: error: SparkConnectGrpcException: the engine's call ended with INTERNAL: {said}\n")


def test_a_call_the_engine_ended_but_could_not_resume_says_to_run_again():
    """A CI ingest ended with Sail's 'task context not found for operation': the client resumed
    (ReattachExecute) a call whose task had already ended, and the engine keeps nothing to resume."""
    from tracelake.app.cli import _one_line

    text = ("<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.INTERNAL\n"
            '\tdetails = "internal error: task context not found for operation"\n'
            '\tdebug_error_string = "UNKNOWN:Error received from peer"\n>')
    assert _one_line(RuntimeError(text)) == (
        "the engine's answer to a call was cut off and could not be resumed: the call had already ended on the "
        "engine's side (Sail: 'task context not found for operation'); tables keep their last committed versions: "
        "run the same command again")


def test_the_engine_meeting_a_full_disk_is_exit_2_as_in_python(monkeypatch, capsys):
    class SparkRuntimeException(Exception):
        pass

    def engine_full(args):
        raise SparkRuntimeException("Failed to write file: Generic LocalFileSystem error: Unable to copy data to "
                                    "file: No space left on device (os error 28)\n\nJVM stacktrace: …")

    def python_full(args):
        raise OSError(28, "No space left on device")
    monkeypatch.setitem(sys.modules["tracelake.app.cli"].COMMANDS, "tables", engine_full)
    monkeypatch.setitem(sys.modules["tracelake.app.cli"].COMMANDS, "report", python_full)
    assert main(["tables"]) == 2
    assert capsys.readouterr().err == (
        "tracelake: error: cannot write or read a file: No space left on device (the engine: SparkRuntimeException: "
        "Failed to write file: Generic LocalFileSystem error: Unable to copy data to file: No space left on device "
        "(os error 28))\n")
    assert main(["report", "--out", "x"]) == 2
    assert capsys.readouterr().err == "tracelake: error: cannot write or read a file: No space left on device\n"


def test_a_ctrl_c_that_runs_out_of_grace_still_says_so(monkeypatch, capsys):
    """The grace timer and a second Ctrl-C end the process with os._exit, which flushes nothing:
    the line is printed first (a run ended silently in 2 of 13 tries)."""
    from tracelake.app import signals

    codes = []
    monkeypatch.setattr(signals.os, "_exit", codes.append)
    signals.exit_now(signal.SIGINT)
    signals.exit_now(signal.SIGTERM)
    assert (codes, capsys.readouterr().err) == ([130, 143], "tracelake: interrupted; tables keep their last committed versions\n"
                                                "tracelake: terminated; tables keep their last committed versions\n")


def test_critical_failure_exits_3(tmp_path):
    raw = tmp_path / "raw"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv(["broken"])})
    result = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(tmp_path / "lake"))
    assert result.returncode == 3
    assert "critical expectation(s) failed: table_row_count_to_be_between; nothing was written" in result.stderr


def test_describe_and_unknown_table(capsys):
    assert main(["describe", "bronze.itp_jobs"]) == 0
    out = capsys.readouterr().out
    assert "| num_gpu | int | no | GPUs | num_gpu |" in out
    assert main(["describe", "bronze.nope"]) == 2
    assert capsys.readouterr().err.startswith("tracelake: error: no schema for table 'bronze.nope'")


def test_unsafe_archive_is_refused(tmp_path):
    raw = tmp_path / "raw"
    write_archive(raw / "raw-traces.tar.gz", {"../../escape.csv": "x"})
    result = tracelake("ingest", "itp", "--raw", str(raw), "--lake", str(tmp_path / "lake"))
    assert result.returncode == 2
    assert "escapes the archive" in result.stderr
    assert not (tmp_path / "escape.csv").exists()


@pytest.mark.portable
def test_spark_profile_without_maven_or_cached_jars_names_the_cache_and_the_jars_way(tmp_path):
    """No jars cached and no way to Maven Central (no `mvn` on PATH): exit 2 before any JVM
    starts, naming the cache folder the jars go to and the `spark.jars` way around it."""
    from tracelake.deltajars import delta_artifact, spark_minor

    python_only = tmp_path / "bin"
    python_only.mkdir()
    (python_only / "python").symlink_to(sys.executable)
    result = tracelake("query", "SELECT 1", "--profile", "spark", "--lake", str(tmp_path / "lake"),
                       env={"TRACELAKE_JARS_DIR": str(tmp_path / "jars"), "PATH": str(python_only),
                            "PYSPARK_PYTHON": sys.executable})
    assert result.returncode == 2, result.stderr[-2000:]
    [line] = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert f"cannot fetch io.delta:{delta_artifact()}:4.4.0 from Maven Central (no `mvn` on PATH)" in line
    assert f"none is cached in {tmp_path / 'jars'}/delta-4.4.0-spark{spark_minor()}" in line
    assert "--conf spark_conf.spark.jars=" in line and "spark-submit --jars" in line


@pytest.mark.portable
def test_a_delta_jar_of_another_release_names_both_versions(tmp_path):
    old = tmp_path / "delta-spark_4.1_2.13-4.3.1.jar"
    old.write_bytes(b"")
    result = tracelake("query", "SELECT 1", "--profile", "spark", "--lake", str(tmp_path / "lake"),
                       "--conf", f"spark_conf.spark.jars={old}", env={"PYSPARK_PYTHON": sys.executable})
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"the delta-spark jar {old} is version 4.3.1, but the delta-spark pip package is 4.4.0" in result.stderr
    assert "pip install delta-spark==4.3.1" in result.stderr


HEAVY = ("pyspark", "great_expectations", "matplotlib")


def _loaded_after(*args: str, tmp_path=None) -> tuple[int, list[str]]:
    """The heavy libraries in sys.modules once `tracelake ARGS` has run in a fresh interpreter."""
    import subprocess

    probe = ("import sys\nfrom tracelake.app.cli import main\n"
             "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code\n"
             f"print('LOADED', code, *[m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    last = done.stderr.strip().splitlines()[-1].split()
    assert last[0] == "LOADED", done.stderr
    return int(last[1]), last[2:]


@pytest.mark.parametrize("args", [
    ("--help",), ("ingest", "--help"), ("query", "--help"), ("generate", "--help"), ("maintain", "--help"),
    ("describe", "bronze.itp_jobs"), ("describe", "quarantine.zj_flow"),
    ("bogus",), ("ingest",), ("maintain", "--retain-hours", "x"), ("query",),
])
def test_help_describe_and_argument_errors_load_no_engine_gx_or_plotting(args):
    code, loaded = _loaded_after(*args)
    assert code in (0, 2)
    assert loaded == []


@pytest.mark.parametrize("source", ["itp", "zeus", "acme"])
def test_generate_loads_no_engine_gx_or_plotting(source, tmp_path):
    assert _loaded_after("generate", source, "--out", str(tmp_path / "raw"), "--scale", "0.01", tmp_path=tmp_path) == (0, [])


def test_generator_names_come_from_the_folders_and_match_the_synth_modules():
    from tracelake.run.registry import generator_names, source_names

    assert generator_names() == source_names() == ["acme", "itp", "zeus", "zhejiang"]


def test_an_ingest_without_raw_names_the_default_folder_it_reads(engine, tmp_path):
    from helpers import tracelake_in_process

    raw = tmp_path / "raw"
    write_archive(raw / "raw-traces.tar.gz", {"cluster01.csv": itp_csv([f"{job_id(1)},1,600,1"])})
    done = tracelake_in_process(engine, "ingest", "itp", "--lake", str(tmp_path / "lake"), "--conf", f"raw_roots.itp={raw}")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == f"tracelake: no --raw given: reading itp from {raw} (conf raw_roots.itp)"


def test_generate_says_what_it_takes_of_the_real_release(tmp_path):
    """A generator that follows the real release (zhejiang: its topology workbook) says so in one
    line naming the file; with no workbook there, or for a generator that takes nothing, nothing."""
    from tracelake.run.registry import generate
    from tracelake.sources.zhejiang.synth import WORKBOOK, follows_reference

    release = tmp_path / "release"
    release.mkdir()
    assert follows_reference(release) is None
    (release / WORKBOOK).write_bytes(b"")
    assert follows_reference(release) == f"the real topology from {release / WORKBOOK}"
    said: list[str] = []
    written = generate("itp", tmp_path / "itp", reference=str(release), say=said.append)
    assert said == [] and sorted(p.name for p in written) == ["elasticflow-traces.tar.gz", "raw-traces.tar.gz"]


def test_generate_keeps_files_it_did_not_write(tmp_path):
    """A real archive (or AcmeTrace utilization) in --out stops generate before it writes
    anything, naming the file; what an earlier generate wrote there is replaced as before."""
    from tracelake.errors import TracelakeError
    from tracelake.run.registry import generate

    itp_dir = tmp_path / "itp"
    itp_dir.mkdir()
    (itp_dir / "raw-traces.tar.gz").write_bytes(b"the real release")
    with pytest.raises(TracelakeError, match=r"holds raw-traces.tar.gz, which no generator wrote: generate itp"):
        generate("itp", itp_dir, scale=0.001)
    assert (itp_dir / "raw-traces.tar.gz").read_bytes() == b"the real release"
    assert sorted(p.name for p in itp_dir.iterdir()) == ["raw-traces.tar.gz"]
    (itp_dir / "raw-traces.tar.gz").unlink()
    first = {p.name: p.read_bytes() for p in generate("itp", itp_dir, scale=0.001, seed=1)}
    again = {p.name: p.read_bytes() for p in generate("itp", itp_dir, scale=0.001, seed=2)}  # its own files
    assert first.keys() == again.keys() and first != again

    acme_dir = tmp_path / "acme"
    (acme_dir / "utilization" / "seren").mkdir(parents=True)
    (acme_dir / "utilization" / "seren" / "GPU_UTIL.csv").write_text("Time\n")
    with pytest.raises(TracelakeError, match=r"holds utilization/seren/GPU_UTIL.csv, which no generator wrote"):
        generate("acme", acme_dir, scale=0.001)
    assert [p.name for p in acme_dir.rglob("*") if p.is_file()] == ["GPU_UTIL.csv"]


@pytest.mark.parametrize("thread", [False, True])
def test_the_command_leaves_with_its_code_after_its_exit_handlers_and_its_output(thread):
    """__main__.leave skips the interpreter's teardown, not the exit handlers or a line still
    buffered for a pipe; a thread still running gets the usual exit, which waits for it."""
    import subprocess
    script = "\n".join([
        "import atexit, threading, time",
        "from tracelake.__main__ import leave",
        "atexit.register(lambda: print('handler'))",
        f"if {thread}: threading.Thread(target=lambda: (time.sleep(0.3), print('thread', end=' '))).start()",
        "print('said', end=' ')",
        "leave(3)",
    ])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert (done.returncode, done.stdout, done.stderr) == (3, "said thread handler\n" if thread else "said handler\n", "")


@pytest.mark.portable
def test_a_standalone_master_that_does_not_answer_is_named_in_seconds(tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on once it is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    master = f"spark://127.0.0.1:{port}"
    result = tracelake("query", "SELECT 1", "--profile", "spark", "--lake", str(tmp_path / "lake"),
                       "--conf", f"master={master}", env={"PYSPARK_PYTHON": sys.executable})
    assert result.returncode == 2, result.stderr[-2000:]
    assert f"tracelake: error: the Spark master {master} does not answer (Connection refused)" in result.stderr
