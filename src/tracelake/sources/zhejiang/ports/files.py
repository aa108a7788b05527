"""Which files are port files: trafficinfo/<hour>/<switch folder>/<port file>.csv (docs/formats/zhejiang.md §3).

One file per leaf port. The file name says which port it is (§3.2, the naming rules of layout.py,
verified on every real file); the rows say it again, and both are kept so the quality gate can
check they agree. Anything else in a switch folder, or a folder that is no switch's, stops the run
rather than being left out.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from tracelake.errors import TracelakeError
from tracelake.io.storetree import as_folder, listed_size
from tracelake.io.text import RawFile, regular_file
from tracelake.sources.zhejiang.layout import (  # the naming rules (layout.py: the generator uses them too)
    PORT_FILE,
    SWITCH_DIR,
    TRAFFIC,
    device_name,
    file_prefix,
    hour_folders,
    port_exists,
    port_name_for_file,
)


def _hour(name: str, where: str) -> str:
    try:
        datetime.strptime(name, "%Y%m%d%H")
    except ValueError as exc:
        raise TracelakeError(f"{where}: hour folder '{name}' is not a valid YYYYMMDDHH (CST) hour") from exc
    return name


def _switch_files(raw_dir: Path, hour: str, folder: Path) -> list[RawFile]:
    """The port files of one switch folder; macOS dot files are skipped, anything else, or no
    port file at all, is an error."""
    prefix, device = file_prefix(folder.name), device_name(folder.name)
    files = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        where = path.relative_to(raw_dir).as_posix()
        if path.name.endswith(".csv") and not path.is_dir():
            regular_file(path, where)
        if not path.is_file() or not path.name.endswith(".csv"):
            raise TracelakeError(f"{where}: unexpected entry in a switch folder (only port CSVs belong there)")
        port = port_name_for_file(path.name)
        if PORT_FILE.fullmatch(path.name).group("sw") != prefix:
            raise TracelakeError(f"{where}: a {prefix} folder holds a file of another switch")
        if not port_exists(prefix, port):
            kind = "storage leaf" if prefix.startswith("leaf-") else "GPU leaf"
            raise TracelakeError(f"{where}: a {kind} has no port {port} (docs/formats/zhejiang.md §3.2)")
        constants = {"hour_cst": hour, "folder_device_name": device, "file_port_name": port}
        files.append(RawFile(str(path), where, constants, size=listed_size(path)))
    if not files:  # a copy that failed part way: the switch's hour would be missing without a word
        raise TracelakeError(f"{TRAFFIC}/{hour}/{folder.name}: a switch folder with no port files")
    return files


def find_port_files(raw_dir: Path, hours: tuple[str, ...] | None = None) -> list[RawFile]:
    """Every trafficinfo/<hour>/<switch folder>/<port file>.csv under the release folder.

    Files directly in an hour folder (the hourly flow/nic/link/port CSVs) belong to another part;
    a sub-folder that is not a switch folder stops the run rather than being left out."""
    files: list[RawFile] = []
    for hour_dir in hour_folders(raw_dir, hours):
        hour = _hour(hour_dir.name, f"{TRAFFIC}/{hour_dir.name}")
        for folder in sorted(p for p in hour_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if not SWITCH_DIR.fullmatch(folder.name):
                raise TracelakeError(
                    f"{TRAFFIC}/{hour}/{folder.name}: not a switch folder "
                    "(NH-DC-<room>-<rack>-ROCE-<leaf>_GPU_S9825)"
                )
            files += _switch_files(as_folder(raw_dir), hour, folder)
    return files

