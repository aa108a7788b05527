import pytest
from helpers import ITP_HEADER, itp_csv, job_id
from pyspark.sql import functions as F
from same_rows import assert_same_rows

from tracelake.errors import TracelakeError
from tracelake.io.parse import PARSE_ERRORS, parse_lines
from tracelake.io.text import RawFile, check_header, read_raw_lines
from tracelake.schema import load_schema

pytestmark = pytest.mark.portable
SCHEMA = load_schema("bronze.itp_jobs")


def _file(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return RawFile(str(path), f"a.tar.gz!{name}", {"cluster": name.split(".")[0]})


def test_good_and_broken_rows_are_typed_or_explained(spark, tmp_path):
    rows = [
        f"{job_id(1)},100,600,1",
        f"{job_id(2)},200,abc,2",        # wrong type
        f"{job_id(3)},300",              # missing fields
        f"{job_id(4)},400,700,",         # empty value in a non-nullable column
        f"{job_id(5)},500,800,4,extra",  # too many fields
        "",                              # blank line
        f"{job_id(6)},600,900,3",        # parses: the GPU-count rule is the gate's job
    ]
    raw = _file(tmp_path, "cluster01.csv", itp_csv(rows) + "\r\n")
    parsed = parse_lines(read_raw_lines(spark, [raw], SCHEMA), SCHEMA)
    got = parsed.select("job_id", "duration", "num_gpu", "cluster", "source_file", PARSE_ERRORS)
    expected = spark.createDataFrame(
        [
            (job_id(1), 600, 1, "cluster01", "a.tar.gz!cluster01.csv", []),
            (job_id(2), None, 2, "cluster01", "a.tar.gz!cluster01.csv", ["duration: 'abc' is not a valid bigint"]),
            (None, None, None, "cluster01", "a.tar.gz!cluster01.csv",
             ["expected 4 fields, found 2"]),
            (job_id(4), 700, None, "cluster01", "a.tar.gz!cluster01.csv", ["num_gpu: missing value"]),
            (None, None, None, "cluster01", "a.tar.gz!cluster01.csv", ["expected 4 fields, found 5"]),
            (None, None, None, "cluster01", "a.tar.gz!cluster01.csv", ["expected 4 fields, found 1"]),
            (job_id(6), 900, 3, "cluster01", "a.tar.gz!cluster01.csv", []),
        ],
        f"job_id string, duration bigint, num_gpu int, cluster string, source_file string, {PARSE_ERRORS} array<string>",
    )
    assert_same_rows(got, expected)
    good = parsed.filter(F.size(PARSE_ERRORS) == 0)
    assert good.count() == 2
    raw_json = parsed.filter(F.col("job_id") == job_id(2)).select("raw_values_json").first()[0]
    assert raw_json == f'{{"job_id":"{job_id(2)}","submission_time":"200","duration":"abc","num_gpu":"2"}}'


def test_header_lines_of_every_file_are_dropped(spark, tmp_path):
    a = _file(tmp_path, "cluster01.csv", itp_csv([f"{job_id(1)},1,600,1"]))
    b = _file(tmp_path, "cluster02.csv", itp_csv([f"{job_id(2)},2,600,1", f"{job_id(3)},3,600,2"]) + "\n")
    lines = read_raw_lines(spark, [a, b], SCHEMA)
    counts = {r["cluster"]: r["count"] for r in lines.groupBy("cluster").count().collect()}
    assert counts == {"cluster01": 1, "cluster02": 2}


def test_a_different_header_is_a_clear_error(tmp_path):
    raw = _file(tmp_path, "cluster01.csv", "job,submit,dur,gpus\nx,1,2,3")
    with pytest.raises(TracelakeError, match="header 'job,submit,dur,gpus' does not match bronze.itp_jobs"):
        check_header(raw, SCHEMA)
    check_header(_file(tmp_path, "cluster02.csv", ITP_HEADER + "\n"), SCHEMA)  # the right one passes


def test_declared_null_spellings_read_as_null(spark, tmp_path):
    schema = load_schema("bronze.zeus_train")
    path = tmp_path / "summary_train.csv"
    path.write_text(",".join(schema.raw_header) + "\n"
                    "cifar100,shufflenetv2,1024,adadelta,1.06e-04,1,0.05,3\n"
                    "cifar100,shufflenetv2,1024,adadelta,1e-1,1,0.9,nan\n"
                    "cifar100,shufflenetv2,1024,adadelta,1e-1,2,0.9,n/a\n")
    parsed = parse_lines(read_raw_lines(spark, [RawFile(str(path), "summary_train.csv")], schema), schema)
    got = parsed.select("learning_rate", "run", "target_epoch", PARSE_ERRORS)
    expected = spark.createDataFrame(
        [(1.06e-4, 1, 3.0, []), (0.1, 1, None, []), (0.1, 2, None, ["target_epoch: 'n/a' is not a valid double"])],
        f"learning_rate double, run int, target_epoch double, {PARSE_ERRORS} array<string>")
    assert_same_rows(got, expected)
