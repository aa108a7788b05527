"""The bad-input corpus: small inputs a hostile but realistic user feeds the CLI, each with the
outcome it must have. A case writes its files, names the CLI runs, and states the exit code,
a fragment of the one-line message, and the rows each table must hold afterwards."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from helpers import ITP_HEADER, job_id, write_archive

FIXTURES = Path(__file__).resolve().parents[1] / "sources" / "zhejiang" / "fixtures"
TRAIN_HEADER = "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch"
POWER_HEADER = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power"
SEREN_HEADER = "job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,duration,queue,gpu_time"
SEREN_ROW = ("5778432,u5907,1,8,128,Other,FAILED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,"
             "2023-03-01 00:20:51+08:00,117,32,936.0")
TRAIN_ROW = "cifar100,shufflenetv2,64,adadelta,1e-1,1,0.5,3"
PORT_HEADER = "SaveTime,SaveTimeUTC,DeviceName,PortName,InPkts,InOctets,OutPkts,OutOctets,InRatio,OutRatio"
LEAF1 = "NH-DC-NM129-B03-ROCE-Leaf-1"
ST_TIME = "2024/05/24 星期五 00:00:{:06.3f}"
HOUR_MS = 1716480000000
REMOVE = "remove-from-lake"  # not a CLI command: the runner removes this table folder (layer/table) between runs


@dataclass
class Case:
    """`runs`: CLI argument lists run in order (the lake is added), or [REMOVE, "layer/table"];
    the last CLI run is checked."""

    name: str
    write: Callable[[Path], list[list[str]]]
    rc: int
    message: str | None = None  # a fragment of the last stderr line
    rows: dict[str, int] = field(default_factory=dict)  # table path (layer/table) -> rows
    reasons: dict[str, list[list[str]]] = field(default_factory=dict)  # quarantine table -> sorted reasons
    read: dict[str, int] = field(default_factory=dict)  # bronze table -> data rows written: kept + quarantined
    stdout: str | None = None  # a fragment of stdout
    hidden: str | None = None  # text that must appear nowhere in stdout or stderr
    # a server run beside the commands, started before and stopped after them: its address
    # replaces "{beside}" in their arguments
    beside: Callable[[], contextlib.AbstractContextManager[str]] | None = None


def itp(rows: list[str], header: str = ITP_HEADER, member: str = "cluster01.csv") -> Callable[[Path], list[list[str]]]:
    def write(raw: Path) -> list[list[str]]:
        write_archive(raw / "raw-traces.tar.gz", {member: "\n".join([header, *rows])})
        return [["ingest", "itp", "--raw", str(raw)]]
    return write


def files(content: dict[str, str | bytes], command: list[str]) -> Callable[[Path], list[list[str]]]:
    def write(raw: Path) -> list[list[str]]:
        for name, text in content.items():
            path = raw / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
        return [[*command[:1], *[c.replace("{raw}", str(raw)) for c in command[1:]]]]
    return write


def zeus(train: list[str] | None, power: list[str] | None, header_train: str = TRAIN_HEADER):
    content: dict[str, str | bytes] = {}
    if train is not None:
        content["summary_train.csv"] = "\n".join([header_train, *train]) + "\n"
    if power is not None:
        content["summary_power_a40.csv"] = "\n".join([POWER_HEADER, *power]) + "\n"
    return files(content, ["ingest", "zeus", "--raw", "{raw}"])


def good_itp(n: int, offset: int = 0) -> list[str]:
    return [f"{job_id(offset + i)},{i},{600 + i},1" for i in range(1, n + 1)]


def port_rows(port: str, counts: list[int]) -> str:
    lines = [PORT_HEADER]
    for i, count in enumerate(counts):
        t = 0.9 + 0.5 * i
        lines.append(f"{ST_TIME.format(t)},{HOUR_MS + int(t * 1000)},{LEAF1}.GPU.S9825,{port},"
                     f"{abs(count) // 1000},{count},{abs(count) // 1000},{count},1.0,1.0")
    return "\n".join(lines) + "\n"


def port_file(name: str, port: str, counts: list[int]) -> dict[str, str | bytes]:
    return {f"trafficinfo/2024052400/{LEAF1}_GPU_S9825/{name}": port_rows(port, counts)}


def task_folder(log_lines: list[str] | bytes) -> dict[str, str | bytes]:
    base = FIXTURES / "tasks" / "taskinfo" / "20240101-0000-1"
    content: dict[str, str | bytes] = {
        "taskinfo/20240101-0000-1/pod-node-starttime.log": (base / "pod-node-starttime.log").read_text(),
    }
    log = log_lines if isinstance(log_lines, bytes) else "\n".join(log_lines) + "\n"
    content["taskinfo/20240101-0000-1/demo-a1b2c-master.log"] = log
    return content


def copy_tree(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, dirs_exist_ok=True)


FIFO_RELEASE_S = 120.0  # a regression then fails its case (the read sees an empty file) instead of hanging


def fifo(path: Path) -> None:
    """A FIFO at `path`. Should a reader block on it, a writer opens and closes it after
    FIFO_RELEASE_S, so the reader sees its end and the case fails on its outcome."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)

    def release() -> None:
        deadline = time.monotonic() + 3600
        time.sleep(FIFO_RELEASE_S)
        while time.monotonic() < deadline and path.exists():
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                    return
            time.sleep(1)
    threading.Thread(target=release, daemon=True).start()


def with_fifo(content: dict[str, str | bytes], fifo_name: str, command: list[str]) -> Callable[[Path], list[list[str]]]:
    """`files(content, command)` plus a FIFO at `fifo_name` (relative to the raw folder)."""
    def write(raw: Path) -> list[list[str]]:
        runs = files(content, command)(raw)
        fifo(raw / fifo_name)
        return runs
    return write


@contextlib.contextmanager
def server_ending_every_call() -> Iterator[str]:
    """A gRPC server on 127.0.0.1 that ends every call with INTERNAL and no error of Spark's own
    (what a server or a link that breaks mid-call gives): its sc:// address."""
    from concurrent import futures

    import grpc

    def end(request, context):
        context.abort(grpc.StatusCode.INTERNAL, "the test server ends every call")

    class EndEveryCall(grpc.GenericRpcHandler):
        def service(self, details):
            if details.method.endswith(("/ExecutePlan", "/ReattachExecute")):  # Connect's streamed calls
                return grpc.unary_stream_rpc_method_handler(end)
            return grpc.unary_unary_rpc_method_handler(end)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((EndEveryCall(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.stop(grace=None)
