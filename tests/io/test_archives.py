import tarfile

import pytest
from helpers import write_archive

from tracelake.errors import TracelakeError
from tracelake.io.archives import extract_members


def test_wanted_members_land_in_the_staging_folder_only(tmp_path):
    archive = write_archive(tmp_path / "a.tar.gz", {"cluster01.csv": "x", "LICENSE": "y", "sub/cluster02.csv": "z"})
    out = extract_members(archive, tmp_path / "stage", lambda n: n.endswith(".csv"))
    assert sorted(out) == ["cluster01.csv", "sub/cluster02.csv"]
    assert (tmp_path / "stage" / "cluster01.csv").read_text() == "x"
    assert (tmp_path / "stage" / "cluster02.csv").read_text() == "z"
    assert not (tmp_path / "stage" / "LICENSE").exists()


@pytest.mark.parametrize("name, message", [
    ("../evil.csv", "escapes the archive"),
    ("/etc/evil.csv", "absolute path"),
    ("ok/../../evil.csv", "escapes the archive"),
])
def test_unsafe_member_names_refuse_the_archive(tmp_path, name, message):
    archive = write_archive(tmp_path / "a.tar.gz", {"cluster01.csv": "x", name: "bad"})
    with pytest.raises(TracelakeError, match=message):
        extract_members(archive, tmp_path / "stage", lambda n: True)
    assert not (tmp_path / "stage").exists()  # nothing written before the check
    assert not (tmp_path / "evil.csv").exists()


def test_links_are_refused(tmp_path):
    path = tmp_path / "a.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("cluster01.csv")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(TracelakeError, match="link or special file"):
        extract_members(path, tmp_path / "stage", lambda n: True)


def test_not_an_archive(tmp_path):
    bad = tmp_path / "raw-traces.tar.gz"
    bad.write_bytes(b"not a tar")
    with pytest.raises(TracelakeError, match="not a readable tar archive"):
        extract_members(bad, tmp_path / "stage", lambda n: True)
