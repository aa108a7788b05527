"""The delta-spark jars the `spark` profile puts on classic Spark's classpath, fetched once.

Why a cache of our own: a classic session started by tracelake (not by spark-submit or Databricks,
which bring their jars) needs delta-spark's jars of exactly the version of the `delta-spark` pip
package, built for this pyspark's Spark minor version (`io.delta:delta-spark_4.1_2.13:4.4.0`).
`spark.jars.packages` would resolve them at every session start, through Ivy, which fails outright
when ~/.m2 holds a pom without its jar (measured: Maven's own `dependency:get` leaves exactly
that). So `bash dev` runs Maven once (`dependency:copy-dependencies` of a one-dependency pom) and
keeps the jars pyspark does not ship already in `<checkout>/.jars/` (ignored by git); a session
then names them in `spark.jars`. A jar pyspark ships (Hadoop, Parquet, Jackson, Scala) is never
added twice: two versions of one library on a classpath is a fault that shows only at run time.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from tracelake.errors import TracelakeError

SCALA = "2.13"
MANIFEST = "jars.txt"  # written last: a folder without it is an interrupted fetch
_JAR_VERSION = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^-]*(?:-\d+)?)\.jar$")
_DELTA_JAR = re.compile(r"^delta-spark_(?:(?P<spark>\d+\.\d+)_)?2\.1[23]-(?P<version>[^/]+)\.jar$")


def delta_version() -> str:
    """The version of the `delta-spark` pip package: the jars must be the same release."""
    try:
        return metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        raise TracelakeError("profile 'spark' needs the delta-spark package: pip install delta-spark") from None


def spark_minor() -> str:
    return ".".join(metadata.version("pyspark").split(".")[:2])


def delta_artifact() -> str:
    """delta-spark's Maven artifact for this Spark: one per Spark minor version since Delta 4.1."""
    return f"delta-spark_{spark_minor()}_{SCALA}"


def delta_package(version: str | None = None) -> str:
    """`group:artifact:version`, as spark-submit's `--packages` takes it."""
    return f"io.delta:{delta_artifact()}:{version or delta_version()}"


def cache_root() -> Path:
    """TRACELAKE_JARS_DIR, else `.jars/` of the checkout tracelake runs from, else the user's cache."""
    env = os.environ.get("TRACELAKE_JARS_DIR")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".jars"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tracelake" / "jars"


def cache_dir(version: str | None = None) -> Path:
    return cache_root() / f"delta-{version or delta_version()}-spark{spark_minor()}"


def cached_jars(version: str | None = None) -> list[Path] | None:
    """The cached jars of a finished fetch, None when there is none (or it is incomplete)."""
    return _cached_in(cache_dir(version))


def _pyspark_artifacts() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {m.group("artifact") for j in jars.glob("*.jar") if (m := _JAR_VERSION.match(j.name))}


def _pom(package: str) -> str:
    group, artifact, version = package.split(":")
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>local.tracelake</groupId><artifactId>delta-jars</artifactId><version>1</version>"
        "<packaging>pom</packaging><dependencies><dependency>"
        f"<groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>"
        "</dependency></dependencies></project>"
    )


def _cannot_fetch(reason: str) -> TracelakeError:
    return TracelakeError(
        f"cannot fetch {delta_package()} from Maven Central ({reason}), and none is cached in {cache_dir()}; "
        f"fetch it where Maven Central answers (bash dev, or python -m tracelake.deltajars), copy that folder here, "
        f"or name the jars yourself: --conf spark_conf.spark.jars=/path/{delta_artifact()}-{delta_version()}.jar,"
        f"/path/delta-storage-{delta_version()}.jar (spark-submit --jars)")


def hadoop_version() -> str:
    """The Hadoop release pyspark ships (hadoop-client-api-<version>.jar): hadoop-aws must match it."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(m.group("version") for j in jars.glob("hadoop-client-api-*.jar") if (m := _JAR_VERSION.match(j.name)))
    if not found:
        raise TracelakeError(f"pyspark's jars ({jars}) hold no hadoop-client-api jar: cannot choose hadoop-aws")
    return found[-1]


def s3a_package() -> str:
    return f"org.apache.hadoop:hadoop-aws:{hadoop_version()}"


def fetch_s3a(quiet: bool = True) -> list[Path]:
    """hadoop-aws of pyspark's Hadoop and the AWS SDK bundle it names (about 640 MB, fetched
    once, only by a `spark` profile session on an s3:// or s3a:// lake)."""
    folder = cache_root() / f"hadoop-aws-{hadoop_version()}"
    return _cached_in(folder) or _fetch(s3a_package(), folder, quiet, _cannot_fetch_s3a)


def _cannot_fetch_s3a(reason: str) -> TracelakeError:
    return TracelakeError(
        f"cannot fetch {s3a_package()} from Maven Central ({reason}), and none is cached in {cache_root()}; "
        f"fetch it where Maven Central answers, or name the jars yourself: --conf spark_conf.spark.jars=... "
        f"(hadoop-aws-{hadoop_version()}.jar and the AWS SDK bundle it names)")


def fetch(quiet: bool = True) -> list[Path]:
    """The jars, from the cache or else from Maven Central (once), into the cache."""
    jars = cached_jars()
    if jars is not None:
        return jars
    jars = _fetch(delta_package(), cache_dir(), quiet, _cannot_fetch)
    check_jar_versions([str(j) for j in jars])
    return jars


def _cached_in(folder: Path) -> list[Path] | None:
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return None
    jars = [folder / name for name in manifest.read_text().split()]
    return jars if jars and all(j.is_file() for j in jars) else None


def _fetch(package: str, folder: Path, quiet: bool, cannot) -> list[Path]:
    """`package` and its runtime dependencies that pyspark does not ship, by Maven, into `folder`."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise cannot("no `mvn` on PATH")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=".fetch-") as work:
        pom, out = Path(work) / "pom.xml", Path(work) / "jars"
        pom.write_text(_pom(package))
        if not quiet:
            print(f"tracelake: fetching {package} with Maven into {folder} ...", file=sys.stderr)
        try:
            done = subprocess.run(
                [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={out}",
                 "-DincludeScope=runtime"], capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            raise cannot("Maven did not finish in 15 minutes") from None
        if done.returncode != 0:
            lines = [ln.strip() for ln in (done.stdout + done.stderr).splitlines() if "ERROR" in ln and ln.strip()]
            raise cannot(lines[0].removeprefix("[ERROR]").strip()[:300] if lines else f"mvn exit {done.returncode}")
        shipped = _pyspark_artifacts()
        keep = sorted(j.name for j in out.glob("*.jar")
                      if (m := _JAR_VERSION.match(j.name)) and m.group("artifact") not in shipped)
        (out / MANIFEST).write_text("\n".join(keep) + "\n")
        for extra in out.glob("*.jar"):
            if extra.name not in keep:
                extra.unlink()
        if folder.exists():
            shutil.rmtree(folder)
        out.rename(folder)
    jars = _cached_in(folder)
    if jars is None:  # pragma: no cover - the manifest was just written
        raise cannot(f"the fetch left no jars in {folder}")
    return jars


def check_jar_versions(jars: list[str]) -> None:
    """A delta-spark jar on the list must be the pip package's release, built for this Spark:
    delta-spark's Python side and its jar speak to each other by class names that change."""
    want, minor = delta_version(), spark_minor()
    for jar in jars:
        match = _DELTA_JAR.match(Path(jar.strip()).name)
        if not match:
            continue
        if match.group("version") != want:
            raise TracelakeError(
                f"the delta-spark jar {jar.strip()} is version {match.group('version')}, but the delta-spark pip package "
                f"is {want}: use {delta_package()} (or pip install delta-spark=={match.group('version')})")
        if match.group("spark") and match.group("spark") != minor:
            raise TracelakeError(
                f"the delta-spark jar {jar.strip()} is built for Spark {match.group('spark')}, but pyspark is "
                f"{metadata.version('pyspark')}: use {delta_package()}")


def main(argv: list[str] | None = None) -> int:
    """`python -m tracelake.deltajars`: fetch (or find) the jars and print their folder."""
    try:
        jars = fetch(quiet=False)
    except TracelakeError as exc:
        print(f"tracelake: error: {exc}", file=sys.stderr)
        return exc.exit_code
    print(jars[0].parent)
    return 0


if __name__ == "__main__":
    sys.exit(main())
