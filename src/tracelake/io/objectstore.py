"""Lakes and raw folders on object storage (s3://, gs://, abfss://), seen from this process
through pyarrow.fs: listing, existence, downloads, and errors a user can act on.

The engine (Sail, Spark) reads and writes the lake itself; this process lists the lake's tables,
checks that a store answers before an engine is started, and copies to the run's local staging
folder the raw files it must open itself (archives and compressed files are unpacked there
anyway); files a source's tasks read in place are opened where the tasks run (`open_input`, the
same settings from the same variables; io/storetree.py). Endpoint, region and credentials come only from the
environment or an instance role (the standard `AWS_*` / `AZURE_STORAGE_*` variables); nothing
here prints them. A store that does not answer fails in seconds (short timeouts, two attempts),
not after the engine's minutes of retries.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.fs as pafs

from tracelake.config import check_store_url
from tracelake.errors import TracelakeError

CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 15.0
ATTEMPTS = 2
SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_KEY",
                    "AZURE_STORAGE_SAS_TOKEN", "AZURE_CLIENT_SECRET")

# what pyarrow's S3 and Azure errors say, and what it means to the user
_REASONS = (
    (re.compile(r"NO_SUCH_BUCKET|NoSuchBucket|ContainerNotFound|bucket does not exist", re.I), "no such bucket"),
    (re.compile(r"ACCESS_DENIED|AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|AuthorizationFailure|"
                r"AuthenticationFailed|\b403\b|INVALID_ACCESS_KEY|credentials", re.I),
     "access denied: check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, an instance role, "
     "or AZURE_STORAGE_*)"),
    (re.compile(r"BadScheme"), "its endpoint is plain http, which needs AWS_ALLOW_HTTP=true"),
    (re.compile(r"NETWORK_CONNECTION|curlCode|Could not resolve|Couldn't connect|Connection refused|timed out|"
                r"error sending request|dns error|tcp connect error|UNKNOWN \(HTTP status 0\)", re.I),
     "the endpoint does not answer (AWS_ENDPOINT_URL or the store's address)"),
)


def is_url(text: str | os.PathLike | None) -> bool:
    return text is not None and "://" in str(text)


def _scrub(text: str) -> str:
    """`text` with the value of any secret in the environment blanked (an SDK's message could
    carry one; it must never reach a terminal or a log)."""
    for name in SECRET_VARIABLES:
        value = os.environ.get(name)
        if value and len(value) >= 4:
            text = text.replace(value, "***")
    return text


def store_error(url: str, exc: BaseException) -> TracelakeError:
    """One line naming the URL and what is wrong, never a secret."""
    text = str(exc).strip() or type(exc).__name__
    for pattern, reason in _REASONS:
        if pattern.search(text):
            return TracelakeError(f"cannot use {url}: {reason}")
    return TracelakeError(f"cannot use {url}: {_scrub(text.splitlines()[0])}")


def s3_endpoint() -> tuple[str | None, str]:
    """(host[:port] of a custom S3 endpoint or None, its scheme), from AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL, the variables the AWS SDKs and Sail read."""
    url = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        return None, "https"
    scheme, _, rest = url.partition("://")
    return (rest.rstrip("/"), scheme) if rest else (url.rstrip("/"), "https")


def _allow_http() -> bool:
    """AWS_ALLOW_HTTP, as object_store (Sail, deltalake, obstore) reads it."""
    return os.environ.get("AWS_ALLOW_HTTP", "").strip().lower() in ("1", "true", "yes", "on")


def _proxy(scheme: str, host: str) -> str | None:
    """The HTTP(S)_PROXY the object_store clients (Sail, deltalake) would use for `host`, unless
    NO_PROXY names it; pyarrow's S3 client is given it, as it reads none of them. The local
    profile's private engine reaches a store only so (private_engine.py), its tasks included."""
    names = ("HTTPS_PROXY", "https_proxy") if scheme == "https" else ("HTTP_PROXY", "http_proxy")
    proxy = next((os.environ[n] for n in names if os.environ.get(n)), None)
    bare = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    for entry in (os.environ.get("NO_PROXY") or os.environ.get("no_proxy") or "").split(","):
        entry = entry.strip().lstrip(".")
        if entry and (entry == "*" or bare == entry or bare.endswith("." + entry) or host == entry):
            return None
    return proxy


def _credentials_key() -> str:
    """A digest of the credentials in the environment: a cached file system is not reused for others."""
    names = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE")
    return hashlib.sha256("\0".join(os.environ.get(n, "") for n in names).encode()).hexdigest()


@functools.lru_cache(maxsize=8)
def _s3(bucket: str, endpoint: str | None, scheme: str, region: str | None, proxy: str | None,
        credentials: str) -> pafs.S3FileSystem:
    """One S3 file system per set of settings (`credentials`: their digest, the cache's key
    only): a task opening file after file makes one."""
    if region is None and endpoint is None:  # AWS itself: the bucket's region, as from_uri finds it
        region = pafs.resolve_s3_region(bucket)
    return pafs.S3FileSystem(
        endpoint_override=endpoint, scheme=scheme, region=region, proxy_options=proxy,
        connect_timeout=CONNECT_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S,
        retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=ATTEMPTS),
    )


def filesystem(url: str) -> tuple[pafs.FileSystem, str]:
    """(pyarrow file system, path in it) for an object-store URL; an unknown scheme is refused."""
    scheme = check_store_url(url).split("://", 1)[0].lower()
    rest = url.split("://", 1)[1].strip("/")
    if scheme in ("s3", "s3a"):
        endpoint, endpoint_scheme = s3_endpoint()
        if endpoint_scheme == "http" and not _allow_http():
            # the engine and deltalake would refuse it later, with less clear words
            raise TracelakeError(f"cannot use {url}: its endpoint http://{endpoint} is plain http, which needs "
                                 "AWS_ALLOW_HTTP=true")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
        bucket = rest.split("/", 1)[0]
        host = endpoint or f"{bucket}.s3.amazonaws.com"
        try:
            return _s3(bucket, endpoint, endpoint_scheme, region, _proxy(endpoint_scheme, host), _credentials_key()), rest
        except (OSError, ValueError, pa.ArrowException) as exc:
            raise store_error(url, exc) from None
    try:
        return pafs.FileSystem.from_uri(url)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise store_error(url, exc) from None


CHECK_DEADLINE_S = 8.0  # the first look at a store, before any work: its answer or an exit 2


def check_reachable(url: str) -> bool:
    """Whether anything is stored under `url`; a missing bucket, refused credentials or an
    endpoint that does not answer raise a TracelakeError naming the URL, within
    CHECK_DEADLINE_S: an endpoint that takes the connection and never answers otherwise held
    the command for the client's timeouts and retries (31 s measured)."""
    fs, path = filesystem(url)
    bucket = path.split("/", 1)[0]

    def look() -> bool:
        if fs.get_file_info(bucket).type == pafs.FileType.NotFound:
            raise TracelakeError(f"cannot use {url}: no such bucket")
        return bool(fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False)))

    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["found"] = look()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="store-check", daemon=True)
    worker.start()
    worker.join(CHECK_DEADLINE_S)
    if worker.is_alive():  # left to end with the process: a store call cannot be cancelled
        raise TracelakeError(f"cannot use {url}: the endpoint took the connection but did not answer within "
                             f"{CHECK_DEADLINE_S:.0f} s (AWS_ENDPOINT_URL or the store's address)")
    error = outcome.get("error")
    if isinstance(error, TracelakeError):
        raise error
    if isinstance(error, (OSError, pa.ArrowException)):
        raise store_error(url, error) from None
    if error is not None:
        raise error
    return bool(outcome["found"])


def list_dirs(url: str) -> list[str]:
    """Names of the folders (common prefixes) directly under `url`; none when it holds nothing."""
    fs, path = filesystem(url)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=False))
    except (OSError, pa.ArrowException) as exc:
        raise store_error(url, exc) from None
    return sorted(PurePosixPath(i.path).name for i in infos if i.type == pafs.FileType.Directory)


def list_files(url: str) -> list[tuple[str, int]]:
    """(path relative to `url`, size) of every object under it."""
    fs, path = filesystem(url)
    try:
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True, recursive=True))
    except (OSError, pa.ArrowException) as exc:
        raise store_error(url, exc) from None
    prefix = path.rstrip("/") + "/"
    return sorted((i.path[len(prefix):], i.size or 0) for i in infos
                  if i.type == pafs.FileType.File and i.path.startswith(prefix))


def open_input(url: str, buffer_size: int | None = None):
    """A stream of the object's bytes as stored (a task reading a raw file in place); errors
    name the URL, never a secret. Each read is a ranged request of what it asks for, or of
    `buffer_size` bytes at least (a reader of the first lines: a few requests, not the object)."""
    fs, path = filesystem(url)
    try:
        return fs.open_input_stream(path, compression=None, buffer_size=buffer_size)
    except (OSError, pa.ArrowException) as exc:
        raise store_error(url, exc) from None


def open_seekable(url: str):
    """The object as a file that seeks: a read of its end fetches that range, not the object."""
    fs, path = filesystem(url)
    try:
        return fs.open_input_file(path)
    except (OSError, pa.ArrowException) as exc:
        raise store_error(url, exc) from None


def open_raw(path: str):
    """A raw file as a stream where an engine's task runs: a local path, or an object's URL
    (s3://, abfss://, …) opened with the settings the driver uses (the AWS_* variables, a proxy)."""
    if "://" in path:
        return open_input(path)
    return pa.OSFile(path, "rb")


def read_head(url: str, size: int) -> bytes:
    """The object's first `size` bytes, by a ranged read (a header check: not the whole object)."""
    fs, path = filesystem(url)
    try:
        with fs.open_input_file(path) as handle:
            return handle.read(size)
    except (OSError, pa.ArrowException) as exc:
        raise store_error(url, exc) from None


def download(url: str, dest: Path, wanted: Callable[[str], bool] = lambda rel: True,
             listing: list[tuple[str, int]] | None = None) -> list[Path]:
    """Copy the objects under `url` that `wanted` accepts (by relative path) into `dest`, keeping
    their relative paths (a file left out still has its folder made, so a listing of folders
    matches the store's); a name that would leave `dest` is refused. `listing`: list_files(url),
    when the caller has it already."""
    fs, path = filesystem(url)
    copied = []
    for rel, _size in list_files(url) if listing is None else listing:
        parts = PurePosixPath(rel).parts
        if not parts or ".." in parts or rel.startswith("/"):
            raise TracelakeError(f"{url}: object name '{rel}' leaves its folder; refusing it")
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        if not wanted(rel):
            continue
        try:
            # compression=None: the bytes as stored (pyarrow would inflate a .gz by its name)
            with fs.open_input_stream(f"{path.rstrip('/')}/{rel}", compression=None) as src, open(target, "wb") as out:
                while chunk := src.read(1 << 22):
                    out.write(chunk)
        except pa.ArrowException as exc:
            raise store_error(f"{url.rstrip('/')}/{rel}", exc) from None
        except OSError as exc:
            if exc.filename:  # our side: a full disk, a folder not writable
                raise
            raise store_error(f"{url.rstrip('/')}/{rel}", exc) from None
        copied.append(target)
    return copied


def _store(url: str):
    """An obstore store at `url` (the object_store library Sail and deltalake use, so the same
    variables configure it), with short timeouts and few retries."""
    from obstore.store import from_url

    check_store_url(url)
    return from_url(url, client_options={"timeout": f"{REQUEST_TIMEOUT_S:.0f}s", "allow_http": _allow_http(),
                                         "connect_timeout": f"{CONNECT_TIMEOUT_S:.0f}s"},
                    retry_config={"max_retries": ATTEMPTS - 1, "retry_timeout": timedelta(seconds=2 * REQUEST_TIMEOUT_S)})


def _split(url: str) -> tuple[str, str]:
    folder, _, name = url.rstrip("/").rpartition("/")
    return folder, name


def create_exclusive(url: str, data: bytes) -> bool:
    """Write the object `url` only when none is there (a conditional write, If-None-Match);
    False when one is. Stores without conditional writes are refused with a TracelakeError."""
    import obstore
    from obstore.exceptions import AlreadyExistsError, NotSupportedError

    folder, name = _split(url)
    try:
        obstore.put(_store(folder), name, data, mode="create")
    except AlreadyExistsError:
        return False
    except NotSupportedError as exc:
        raise TracelakeError(f"cannot lock {url}: the store has no conditional writes ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - the store's errors, one line
        raise store_error(url, exc) from None
    return True


def read_object(url: str) -> bytes | None:
    """The object's bytes, None when it is not there."""
    found = read_versioned(url)
    return None if found is None else found[0]


def read_versioned(url: str) -> tuple[bytes, str | None] | None:
    """(the object's bytes, its ETag), None when it is not there."""
    import obstore
    from obstore.exceptions import NotFoundError

    folder, name = _split(url)
    try:
        got = obstore.get(_store(folder), name)
        return bytes(got.bytes()), got.meta.get("e_tag")
    except (NotFoundError, FileNotFoundError):
        return None
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None


def replace_if_unchanged(url: str, e_tag: str, data: bytes) -> bool:
    """Overwrite the object only while its ETag is still `e_tag` (a conditional write, If-Match);
    False when another writer changed or removed it first."""
    import obstore
    from obstore.exceptions import NotFoundError, PreconditionError

    folder, name = _split(url)
    try:
        obstore.put(_store(folder), name, data, mode={"e_tag": e_tag})
    except (PreconditionError, NotFoundError, FileNotFoundError):
        return False
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None
    return True


def delete_object(url: str) -> None:
    import obstore

    folder, name = _split(url)
    try:
        obstore.delete(_store(folder), name)
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None


def delete_under(url: str) -> int:
    """Every object under `url`, by their listing (the number deleted). Through obstore, not
    pyarrow.fs, whose delete_dir leaves a folder marker object behind in the parent."""
    import obstore

    names = [rel for rel, _size in list_files(url)]
    if names:
        try:
            obstore.delete(_store(url.rstrip("/")), names)
        except Exception as exc:  # noqa: BLE001
            raise store_error(url, exc) from None
    return len(names)
