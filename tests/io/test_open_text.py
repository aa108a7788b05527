"""io.text.open_text: a raw file's first lines as text, read the same from a local path and from
a store's URL, where only the start of the object is fetched (a header check must not download
a file the engine's tasks will read anyway)."""

from __future__ import annotations

import gzip
import io
import random

import pyarrow as pa
import pytest

from tracelake.io import objectstore, text

HEADER = "Time," + ",".join(f"10.140.{i // 250}.{i % 250}-{i % 8}" for i in range(2400))  # ~40 KB, a Kalos GPU file


class Counting(io.RawIOBase):
    """An object's bytes that count what a reader takes from them."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at, self.fetched = data, 0, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self.data[self.at:self.at + len(buffer)]
        buffer[:len(chunk)] = chunk
        self.at += len(chunk)
        self.fetched += len(chunk)
        return len(chunk)


@pytest.fixture
def stored(monkeypatch):
    """objectstore.open_input over in-memory objects, with the buffer size a caller asks for."""
    objects: dict[str, Counting] = {}

    def open_input(url: str, buffer_size: int | None = None):
        stream = pa.PythonFile(objects[url], mode="r")
        return pa.BufferedInputStream(stream, buffer_size) if buffer_size else stream

    monkeypatch.setattr(objectstore, "open_input", open_input)
    return objects


@pytest.mark.portable
@pytest.mark.parametrize("name", ["GPU_UTIL.csv", "GPU_UTIL.csv.gz"])
def test_the_first_line_of_a_url_is_read_from_the_start_of_the_object(stored, tmp_path, name):
    rng = random.Random(3)
    body = "".join(f"{1689379200 + 15 * n}," + ",".join(str(rng.random()) for _ in range(300)) + "\n" for n in range(400))
    data = (HEADER + "\r\n" + body).encode()
    data = gzip.compress(data) if name.endswith(".gz") else data
    (tmp_path / name).write_bytes(data)
    stored[f"s3://bucket/{name}"] = Counting(data)
    with text.open_text(f"s3://bucket/{name}") as fh:
        from_store = fh.readline()
    with text.open_text(tmp_path / name) as fh:
        assert fh.readline() == from_store == HEADER + "\r\n"
    assert len(data) > 15 * text.HEAD_BYTES
    assert stored[f"s3://bucket/{name}"].fetched <= 2 * text.HEAD_BYTES  # the header's blocks, not the object


@pytest.mark.portable
def test_a_bad_byte_in_the_head_of_a_url_fails_as_on_disk(stored, tmp_path):
    data = b"Time,10.0.0.1\n1689379200,0.5\n1689379215,caf\xe9\n"
    (tmp_path / "x.csv").write_bytes(data)
    stored["s3://bucket/x.csv"] = Counting(data)
    errors = []
    for path in ("s3://bucket/x.csv", tmp_path / "x.csv"):
        with pytest.raises(UnicodeDecodeError) as caught, text.open_text(path) as fh:
            fh.readline()
        errors.append((caught.value.start, caught.value.object[caught.value.start]))
    assert errors[0] == errors[1] == (len(data) - 2, 0xE9)
