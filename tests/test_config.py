import re
import tempfile

import pytest

from tracelake.config import load_config
from tracelake.errors import TracelakeError


def test_layers_base_profile_env_and_flags(tmp_path):
    cfg = load_config(profile="spark", environ={"TRACELAKE_LAKE_ROOT": str(tmp_path / "env-lake")},
                      conf_pairs=["spark_conf.spark.sql.shuffle.partitions=3"])
    assert cfg.profile == "spark"
    assert cfg.master is None  # conf/spark.yaml leaves it to spark-submit (local[*] when run directly)
    assert cfg.spark_conf["spark.sql.session.timeZone"] == "UTC"  # from base
    assert cfg.spark_conf["spark.sql.shuffle.partitions"] == "3"  # flag beats profile
    assert cfg.lake_root == str(tmp_path / "env-lake")
    assert cfg.staging_dir == str(tmp_path / "env-lake" / "_staging")
    flag = load_config(profile="local", overrides={"lake_root": str(tmp_path / "flag")},
                       environ={"TRACELAKE_LAKE_ROOT": str(tmp_path / "env")})
    assert flag.lake_root == str(tmp_path / "flag")


def test_profile_from_environment():
    assert load_config(environ={"TRACELAKE_PROFILE": "spark"}).profile == "spark"
    assert load_config(environ={}).profile == "local"


def test_table_names_and_paths(tmp_path):
    cfg = load_config(overrides={"lake_root": str(tmp_path)}, environ={})
    assert cfg.table_name("bronze", "itp_jobs") == "bronze.itp_jobs"
    assert cfg.table_path("bronze", "itp_jobs") == f"{tmp_path}/bronze/itp_jobs"
    cat = load_config(conf_pairs=["tables.catalog=main"], environ={})
    assert cat.table_name("gold", "x") == "main.gold.x"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"conf_pairs": ["lake_rot=/x"]}, "unknown config key 'lake_rot'"),
        ({"conf_pairs": ["tables.catalgo=x"]}, "unknown config key 'catalgo'"),
        ({"profile": "cloud"}, "unknown profile 'cloud'"),
        ({"profile": "connect"}, "needs a Spark Connect URL"),
        ({"conf_pairs": ["delta_required=maybe"]}, "config delta_required: takes true or false, got 'maybe'"),
        ({"conf_pairs": ["spark_conf.spark.sql.shuffle.partitions=abc"]},
         "config spark_conf.spark.sql.shuffle.partitions: takes a whole number of at least 1, got 'abc'"),
        ({"conf_pairs": ["spark_conf.spark.sql.shuffle.partitions=0"]},
         "config spark_conf.spark.sql.shuffle.partitions: takes a whole number of at least 1, got '0'"),
        ({"conf_pairs": ["tables.catalog=my-catalog"]}, "config tables.catalog: takes a catalog name of letters"),
        ({"conf_pairs": ["lake_root=[1, 2]"]}, r"config lake_root: takes a text value, got \[1, 2\]"),
        ({"conf_pairs": ["profile=bogus"]}, "unknown profile 'bogus'"),
        ({"conf_pairs": ["novalue"]}, "--conf expects KEY=VALUE"),
    ],
)
def test_bad_config_is_a_clear_error(kwargs, message):
    with pytest.raises(TracelakeError, match=message):
        load_config(environ={}, **kwargs)


def test_profile_from_conf_is_honoured_between_the_environment_and_the_flag(tmp_path):
    """--conf profile= is a layer like the others: over TRACELAKE_PROFILE, under --profile."""
    lake = {"lake_root": str(tmp_path)}
    assert load_config(conf_pairs=["profile=spark"], overrides=lake, environ={}).profile == "spark"
    assert load_config(conf_pairs=["profile=spark"], overrides=lake, environ={"TRACELAKE_PROFILE": "local"}).profile == "spark"
    assert load_config(profile="local", conf_pairs=["profile=spark"], overrides=lake, environ={}).profile == "local"


def test_connect_url_from_flag():
    cfg = load_config(profile="connect", overrides={"connect_url": "sc://127.0.0.1:15002"}, environ={})
    assert cfg.connect_url == "sc://127.0.0.1:15002"


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "America/Los_Angeles", "Europe/London", "GMT+8", "+08:00", "utc ", ""])
def test_a_session_time_zone_other_than_utc_is_refused(zone):
    """The jobs convert times to UTC themselves; naive times are read in the session's zone."""
    with pytest.raises(TracelakeError, match=re.escape(f"spark_conf.spark.sql.session.timeZone must be UTC, got '{zone}'")):
        load_config(environ={}, conf_pairs=[f"spark_conf.spark.sql.session.timeZone={zone}"])


@pytest.mark.parametrize("zone", ["UTC", "Etc/UTC", "Z", "+00:00"])
def test_spellings_of_utc_are_accepted_as_utc(zone):
    cfg = load_config(environ={}, conf_pairs=[f"spark_conf.spark.sql.session.timeZone={zone}"])
    assert cfg.spark_conf["spark.sql.session.timeZone"] == "UTC"  # the one spelling every engine parses


@pytest.mark.portable
def test_the_engine_sets_utc_on_a_session_whose_zone_differs(spark):
    """A platform's session (Databricks, an attached or Connect session) may default to another zone."""
    from tracelake.engine import _use_utc

    spark.conf.set("spark.sql.session.timeZone", "Asia/Shanghai")
    try:
        _use_utc(spark)
        assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def test_a_lake_at_a_url_stages_on_this_machine_whatever_the_engine(tmp_path):
    """A folder in the temp dir, one per lake, on every profile: a remote server's tasks get what
    they read under <lake>/_staging/<run id> instead (run.pipeline.store_staging)."""
    lake = "s3://bucket/lake"
    local = load_config(profile="local", overrides={"lake_root": lake})
    assert local.staging_dir == load_config(profile="spark", overrides={"lake_root": lake}).staging_dir
    assert local.staging_dir.startswith(tempfile.gettempdir()) and "://" not in local.staging_dir
    assert local.staging_dir != load_config(overrides={"lake_root": "s3://bucket/other"}).staging_dir
    on_loopback = load_config(profile="connect", overrides={"lake_root": lake, "connect_url": "sc://127.0.0.1:15002"})
    assert on_loopback.staging_dir == local.staging_dir
    remote = load_config(profile="connect", overrides={"lake_root": lake, "connect_url": "sc://spark.example:15002"})
    assert remote.staging_dir == local.staging_dir
    chosen = load_config(overrides={"lake_root": lake}, conf_pairs=[f"staging_dir={tmp_path}"])
    assert chosen.staging_dir == str(tmp_path)
    assert load_config(overrides={"lake_root": "s3://bucket/lake/"}).lake_root == lake
