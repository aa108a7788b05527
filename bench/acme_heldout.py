"""A held-out AcmeTrace utilization input: two monthly Seren GPU_UTIL files at the release's width,
written by a generator of its own, with the counts an ingest must give computed from its own model.

Why: tracelake.sources.acme.synth.utilization is the generator the ingest was tuned on; this one
shares no code or model with it (nor with tracelake's parser), so the ingest is checked on files
nobody tuned it on.

    python bench/acme_heldout.py OUT [--lines 120] [--columns 2000] [--seed 0] [--bad-cells]

writes OUT/utilization/seren/GPU_UTIL-2023-09.csv and GPU_UTIL-2023-10.csv and
OUT/utilization/manifest.json (the keys bench/acme_utilization.py reads, plus `expected`: kept,
quarantined, per-reason counts, and a few exact `examples`). The model:

  * 10.48.<rack>.<host> servers, 8 GPUs each, running gang jobs (a level per job, on 1-8 of the
    node's GPUs, idle GPUs at 0); September's header sorts its column names as strings, October's
    goes GPU by GPU; one server is only in September's header (retired mid-month: empty after),
    one only in October's (its first samples are in October's copy of September's last rows);
  * empty cells: whole servers offline for days, single GPUs silent for hours, scattered cells;
  * Time rows written twice in a row (identical, or an export retried mid-scrape: a few cells
    rescraped, lost, filled or spelled `50.0`), now and then three times;
  * the last K Time rows of September again at the top of October, a few cells changed, emptied,
    filled or respelled;
  * with --bad-cells (off by default: a bad cell sends the whole series to the slower exact
    parse) a few `nan` and `N/A` cells in September, one on a repeated row of each kind.

--lines is the number of sampling times per file (the interval is 30 days / lines); files are
written a chunk of lines at a time, so memory stays flat whatever the size.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np

SEPT, OCT = 1693526400, 1696118400  # 2023-09-01 and 2023-10-01 00:00 UTC
MONTH_S = 30 * 86400
GPUS = 8
CHUNK = 256  # base lines per chunk
DUP_SHARE = 0.02  # base lines written more than once in a file
SCATTERED = 0.0015  # cells lost one at a time
BAD = {"nan": "is not a finite number", "N/A": "is not a number"}  # the exact parse's reasons
SAME = "duplicate Time row"
FILES = ("utilization/seren/GPU_UTIL-2023-09.csv", "utilization/seren/GPU_UTIL-2023-10.csv")
RANKS = (202309, 202310)  # file rank: the earlier month's copy is kept
TOKENS = np.array([""] + [str(v) for v in range(101)], dtype=object)  # value + 1 -> text; -1 is empty
CELL_WORD = np.array([f"{t},".encode() for t in TOKENS], dtype="S4").view(np.uint32)  # value + 1 -> "v,"
LAST_WORD = np.array([f"{t}\n".encode() for t in TOKENS], dtype="S4").view(np.uint32)  # a line's last cell
GPU_INDEX = np.arange(GPUS, dtype=np.int16)
NOISE = np.rint(np.sort(np.random.default_rng(0).normal(0, 4, 256))).astype(np.int16)  # a sample's noise, by a byte


KINDS = ("retried within a file", "same value spelled twice", "changed across months",
         "empty in September, filled in October", "only in October's header", "three copies", "kept by string order",
         "bad cell beside a good copy", "bad September cell, October's copy kept", "bad cell alone")
ACROSS = {"changed across months", "empty in September, filled in October", "only in October's header",
          "bad September cell, October's copy kept"}  # kinds only a Time in both files can show


def reasons(raw: str, best: bool, kept: str) -> tuple[str, ...]:
    """A quarantined cell's reasons: its own (a bad value), then the duplicate's (not the kept one)."""
    own = (f"value: '{raw}' {BAD[raw]}",) if raw in BAD else ()
    if best:
        return own
    return (*own, SAME if raw == kept else f"{SAME} with a different value (kept '{kept}')")


# ------------------------------------------------------------------ the cluster


class Cluster:
    """Servers, their jobs and their silences: what any copy of a Time row is drawn from."""

    def __init__(self, per_file: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 1])
        n = per_file + 1
        racks = n // 8 + 3
        slots = [f"10.48.{rack}.{host}" for rack in range(3, 3 + racks) for host in range(11, 19)]
        self.ips = [slots[i] for i in sorted(rng.choice(len(slots), n, replace=False))]
        self.retired, self.joiner = (int(i) for i in rng.choice(n, 2, replace=False))
        self.names = [f"{ip}-{g}" for ip in self.ips for g in range(GPUS)]
        self.bias = np.rint(rng.normal(0, 3, (n, GPUS))).astype(np.int16)
        self._jobs(rng, n)
        self._silences(rng, n)

    def _jobs(self, rng: np.random.Generator, n: int) -> None:
        """Per server, back to back: an idle gap (mean 4 h), a job (mean 14 h) at one level."""
        self.starts, self.levels, self.used = [], [], []
        for _ in range(n):
            steps = np.column_stack([rng.exponential(4 * 3600, 300), rng.exponential(14 * 3600, 300) + 600]).ravel()
            edges = SEPT - rng.uniform(0, 12 * 3600) + np.cumsum(steps)
            assert edges[-1] > OCT + MONTH_S
            heavy = rng.random(300) < 0.7
            level = np.where(heavy, rng.uniform(70, 98, 300), rng.uniform(8, 45, 300))
            used = rng.choice([8, 8, 8, 8, 4, 2, 1], 300)
            self.starts.append(np.concatenate([[-np.inf], edges]))
            self.levels.append(np.column_stack([np.zeros(300), np.rint(level)]).ravel().astype(np.int16))  # even: idle
            self.used.append(np.column_stack([np.zeros(300, int), used]).ravel().astype(np.int16))

    def _silences(self, rng: np.random.Generator, n: int) -> None:
        """(first column, last column + 1, from, to): servers offline for 1-5 days, GPUs silent."""
        quiet = []
        for node in range(n):
            for month in (SEPT, OCT):
                if rng.random() < 0.12:
                    start = month + rng.uniform(0, MONTH_S)
                    quiet.append((node * GPUS, node * GPUS + GPUS, start, start + rng.uniform(1, 5) * 86400))
                if rng.random() < 0.04:
                    col = node * GPUS + int(rng.integers(GPUS))
                    start = month + rng.uniform(0, MONTH_S)
                    quiet.append((col, col + 1, start, start + rng.uniform(2, 72) * 3600))
        quiet.append((self.retired * GPUS, self.retired * GPUS + GPUS, SEPT + 0.6 * MONTH_S, np.inf))
        self.quiet = quiet

    def rows(self, times: np.ndarray, rng: np.random.Generator, joined: float) -> np.ndarray:
        """GPU_UTIL of every column at `times` (lines x columns, int16; -1 = empty cell): a busy GPU
        at its job's level plus its own bias and a sample's noise, an idle one at 0. The joiner
        reports from `joined` on."""
        n = len(self.ips)
        level = np.empty((len(times), n), np.int16)
        used = np.empty((len(times), n), np.int16)
        for node in range(n):
            seg = np.searchsorted(self.starts[node], times, "right") - 1
            level[:, node], used[:, node] = self.levels[node][seg], self.used[node][seg]
        noise = NOISE[rng.integers(0, 256, (len(times), n, GPUS), dtype=np.uint8)]
        values = np.clip(level[:, :, None] + self.bias[None] + noise, 0, 100)
        values[GPU_INDEX[None, None, :] >= used[:, :, None]] = 0
        values = values.reshape(len(times), n * GPUS)
        for first, last, start, end in [*self.quiet, (self.joiner * GPUS, self.joiner * GPUS + GPUS, -np.inf, joined)]:
            values[(times >= start) & (times < end), first:last] = -1
        flat = values.reshape(-1)
        flat[rng.integers(0, flat.size, rng.binomial(flat.size, SCATTERED))] = -1
        return values


def as_text(values: np.ndarray) -> np.ndarray:
    """Raw cell text of a row (`<U5`, '' = empty)."""
    return TOKENS[values.astype(np.int64) + 1].astype("<U5")


# ------------------------------------------------------------------ copies of a row


def edited(raw: np.ndarray, rng: np.random.Generator, shown: np.ndarray, changed: int, lost: int, filled: int,
           respelled: int) -> np.ndarray:
    """Another copy of a row: `changed` cells rescraped (a few points off), `lost` emptied, `filled`
    empty ones given a value, `respelled` written as `<v>.0`; only among the `shown` columns."""
    out = raw.copy()
    full = shown[raw[shown] != ""]
    empty = shown[raw[shown] == ""]
    picked = rng.choice(full, min(len(full), changed + lost + respelled), replace=False)
    for col in picked[:changed]:
        out[col] = str(int(np.clip(int(raw[col]) + rng.choice([-5, -3, -2, -1, 1, 2, 3, 7]), 0, 100)))
    out[picked[changed:changed + lost]] = ""
    for col in picked[changed + lost:]:
        out[col] = raw[col] + ".0"
    for col in rng.choice(empty, min(len(empty), filled), replace=False):
        out[col] = str(int(rng.integers(0, 101)))
    return out


def retried(raw: np.ndarray, rng: np.random.Generator, shown: np.ndarray) -> np.ndarray:
    """An export retried mid-scrape: a handful of cells differ, one of them read afresh (the GPU's
    load a scrape later, anything from 0 to 100)."""
    out = edited(raw, rng, shown, int(rng.integers(1, 6)), int(rng.integers(0, 3)), int(rng.integers(0, 3)),
                 int(rng.integers(1, 3)))
    col = rng.choice(shown[raw[shown] != ""])
    out[col] = str(int(rng.integers(0, 101)))
    return out


def reexported(raw: np.ndarray, rng: np.random.Generator, shown: np.ndarray) -> np.ndarray:
    """October's copy of a September row: about 0.5 % of cells changed, 0.2 % lost, 0.1 % respelled."""
    k = len(shown)
    return edited(raw, rng, shown, int(rng.binomial(k, 0.005)), int(rng.binomial(k, 0.002)), int(rng.integers(0, 4)),
                  int(rng.binomial(k, 0.001)) + 1)


def dup_plan(lines: int, rng: np.random.Generator) -> dict[int, str]:
    """Base line -> how it is repeated in its file: 'same' (twice, identical), 'retry' (twice, a few
    cells differ), 'triple' (identical, then retried)."""
    n = max(4, round(DUP_SHARE * lines))
    picked = sorted(int(i) for i in rng.choice(lines, n, replace=False))
    return {i: "triple" if j % 10 == 0 else "retry" if j % 2 else "same" for j, i in enumerate(picked)}


# ------------------------------------------------------------------ the rules, as the model sees them


class Expected:
    """The ingest's outcome by the parse rules (acme/utilization.py, unpivot.rank_repeated_cells):
    one row per non-empty cell; per (Time, column) the kept copy is a cell without error, then of
    the lowest file rank, then the smallest raw text (string order); the others are duplicates,
    named with the kept text when theirs differs. Copies of a Time are held until all are seen."""

    def __init__(self, names: list[str], due: dict[int, int], in_sept: np.ndarray, bad_cells: bool) -> None:
        self.names, self.due, self.in_sept = names, due, in_sept
        self.wanted = {k for k in KINDS if bad_cells or "bad" not in k}  # kinds of example cells to find
        self.pending: dict[int, list] = {}
        self.cells = self.kept = self.distinct = 0
        self.lists: Counter = Counter()
        self.examples: dict[str, dict] = {}

    def plain(self, values: np.ndarray) -> None:
        """Lines no other line repeats, all numbers: every non-empty cell kept."""
        n = int((values >= 0).sum())
        self.cells += n
        self.kept += n
        self.distinct += n

    def copy(self, ts: int, file: int, raw: np.ndarray) -> None:
        self.pending.setdefault(ts, []).append((file, raw))
        if len(self.pending[ts]) == self.due.get(ts, 1):
            self._resolve(ts, self.pending.pop(ts))

    def _resolve(self, ts: int, copies: list) -> None:
        files = np.array([f for f, _ in copies])
        raws = np.stack([r for _, r in copies])
        full = raws != ""
        bad = np.logical_or.reduce([raws == text for text in BAD])
        rank = np.broadcast_to(np.array(RANKS)[files][:, None], raws.shape)
        # the last key sorts first; stable: equal keys keep line order (their texts are equal then)
        best = np.lexsort((raws, rank, bad, ~full), axis=0)[0]
        cols = np.arange(raws.shape[1])
        kept_raw = raws[best, cols]
        is_best = np.arange(len(copies))[:, None] == best[None, :]
        kept = full & is_best & ~bad
        out = full & ~kept
        plain = out & ~bad & (raws == kept_raw[None])  # not the kept copy, the same text: 'duplicate Time row'
        self.cells += int(full.sum())
        self.kept += int(kept.sum())
        self.distinct += int(full.any(axis=0).sum())
        self.lists[(SAME,)] += int(plain.sum())
        for c, col in np.argwhere(out & ~plain).tolist():
            self.lists[reasons(raws[c, col], bool(is_best[c, col]), kept_raw[col])] += 1
        if self.wanted - set(self.examples):
            self._note(ts, files, raws, full, bad, best, kept_raw)

    def _note(self, ts, files, raws, full, bad, best, kept_raw) -> None:
        """A few cells of each kind, for a test to look up row by row."""
        both = len(set(files.tolist())) == 2
        missing = [k for k in KINDS if k in self.wanted and k not in self.examples and (both or k not in ACROSS)]
        if not missing:
            return
        good = full & ~bad
        number = np.where(good, raws, "0").astype(float)
        lo, hi = np.where(good, number, np.inf).min(0), np.where(good, number, -np.inf).max(0)
        cols = np.arange(raws.shape[1])
        differ = (good.sum(0) > 1) & (hi != lo)
        sept, octo = full & (files[:, None] == 0), full & (files[:, None] == 1)
        peers = good & (files[:, None] == files[best][None, :])  # good copies of the kept one's file
        peer_lo = np.where(peers, number, np.inf).min(0)
        kinds = {
            "retried within a file": differ & ~octo.any(0),
            "same value spelled twice": (good.sum(0) > 1) & (hi == lo) & np.char.endswith(raws.astype(str), ".0").any(0),
            "changed across months": differ & sept.any(0) & octo.any(0),
            "empty in September, filled in October": both & self.in_sept & ~sept.any(0) & octo.any(0),
            "only in October's header": both & ~self.in_sept & octo.any(0),
            "three copies": full.sum(0) >= 3,
            "kept by string order": good[best, cols] & (number[best, cols] > peer_lo),
            "bad cell beside a good copy": bad.any(0) & good.any(0),
            "bad September cell, October's copy kept": bad.any(0) & good[best, cols] & (files[best] == 1),
            "bad cell alone": bad.any(0) & (full.sum(0) == 1),
        }
        assert set(kinds) == set(KINDS)
        for kind in missing:
            hits = np.flatnonzero(kinds[kind])
            if not len(hits):
                continue
            col = int(hits[0])
            cell = {"kind": kind, "ts": ts, "column": self.names[col], "kept": None, "quarantined": []}
            for c in np.flatnonzero(full[:, col]):
                entry = {"source_file": FILES[files[c]], "raw": str(raws[c, col])}
                if c == best[col] and not bad[c, col]:
                    cell["kept"] = entry
                else:
                    cell["quarantined"].append({**entry, "reasons": list(reasons(raws[c, col], c == best[col], kept_raw[col]))})
            self.examples[kind] = cell

    def result(self) -> dict:
        assert not self.pending, f"copies never completed: {sorted(self.pending)[:5]}"
        quarantined = sum(self.lists.values())
        per_reason: Counter = Counter()
        for listed, n in self.lists.items():
            for r in listed:
                per_reason[r] += n
        assert self.cells == self.kept + quarantined
        return {"kept": self.kept, "quarantined": quarantined, "quarantine_reasons": dict(sorted(per_reason.items())),
                "quarantine_reason_lists": {json.dumps(list(k)): n for k, n in sorted(self.lists.items())}}


# ------------------------------------------------------------------ writing


def _line(ts: int, raw: np.ndarray, header: np.ndarray) -> bytes:
    return (f"{ts}," + ",".join(raw[header].tolist()) + "\n").encode()


def _plain_bytes(times: np.ndarray, values: np.ndarray) -> bytes:
    """CSV lines of integer rows (-1 = empty), in numpy: each cell is a 4-byte word (its text, a
    comma or the line end, NUL padding), the Time in front; the NULs are then deleted."""
    n, c = values.shape
    heads = np.array([b"%d," % t for t in times.tolist()], dtype="S12")  # 10-digit epoch seconds, a comma
    heads = heads.view(np.uint32).reshape(n, 3)
    words = np.empty((n, 3 + c), np.uint32)
    words[:, :3] = heads
    words[:, 3:-1] = CELL_WORD[values[:, :-1] + 1]
    words[:, -1] = LAST_WORD[values[:, -1] + 1]
    return words.tobytes().translate(None, b"\0")


class Month:
    """One file's plan: its header, its base Times and how each is repeated."""

    def __init__(self, index: int, cluster: Cluster, lines: int, interval: int, rng: np.random.Generator) -> None:
        self.index = index
        start = (SEPT, OCT)[index]
        self.times = start + interval * np.arange(lines, dtype=np.int64)
        absent = (cluster.joiner, cluster.retired)[index]
        cols = [c for c in range(len(cluster.names)) if c // GPUS != absent]
        if index == 0:  # names sorted as strings (10.48.10.x before 10.48.3.x)
            cols.sort(key=lambda c: cluster.names[c])
        else:  # GPU by GPU, servers in address order
            cols.sort(key=lambda c: (c % GPUS, c // GPUS))
        self.header = np.array(cols)
        self.hidden = np.setdiff1d(np.arange(len(cluster.names)), self.header)  # columns not in this file
        self.dups = dup_plan(lines, rng)

    def header_line(self, cluster: Cluster) -> str:
        return "Time," + ",".join(cluster.names[c] for c in self.header) + "\n"


def generate(out: Path, lines: int = 120, columns: int = 2000, seed: int = 0, bad_cells: bool = False) -> dict:
    """Write the two files and utilization/manifest.json under `out`; returns the manifest."""
    assert columns % GPUS == 0 and columns >= 2 * GPUS, "columns: a multiple of 8, at least 16"
    started = time.perf_counter()
    interval = MONTH_S // lines
    stretch = max(2, min(30, lines // 4))  # September's last rows again at the top of October
    cluster = Cluster(columns // GPUS, seed)
    plans = np.random.default_rng([seed, 2])
    months = [Month(i, cluster, lines, interval, plans) for i in range(2)]
    sept, octo = months
    copies_of = {"same": 2, "retry": 2, "triple": 3}
    due = {int(sept.times[i]): copies_of[k] for i, k in sept.dups.items()}
    for t in sept.times[-stretch:].tolist():
        due[t] = due.get(t, 1) + 1
    for i, k in octo.dups.items():
        due[int(octo.times[i])] = copies_of[k]
    bad = bad_plan(sept, stretch, np.random.default_rng([seed, 3])) if bad_cells else {}  # September's lines
    for i in bad:
        due.setdefault(int(sept.times[i]), 1)
    in_sept = np.zeros(len(cluster.names), bool)
    in_sept[sept.header] = True
    model = Expected(cluster.names, due, in_sept, bad_cells)
    values_rng, edit_rng = np.random.default_rng([seed, 4]), np.random.default_rng([seed, 5])
    folder = out / "utilization" / "seren"
    folder.mkdir(parents=True, exist_ok=True)
    files, carried = {}, []  # carried: October's copies of September's last rows
    joined = OCT - 5 * interval  # the joiner's first samples: in October's copy of September's last rows
    for month in months:
        path = out / FILES[month.index]
        shown = np.sort(month.header)
        with open(path, "wb") as fh:
            fh.write(month.header_line(cluster).encode())
            for ts, raw in carried:
                model.copy(ts, month.index, raw)
                fh.write(_line(ts, raw, month.header))
            n_lines = len(carried)
            for lo in range(0, lines, CHUNK):
                times = month.times[lo:lo + CHUNK]
                values = cluster.rows(times.astype(float), values_rng, joined)
                marred = bad if month.index == 0 else {}
                special = [i for i in range(lo, lo + len(times)) if int(month.times[i]) in due or i in marred]
                text, start = [], lo
                for i in [*special, lo + len(times)]:
                    if i > start:  # the plain lines before this one
                        part = values[start - lo:i - lo][:, month.header]
                        model.plain(part)
                        text.append(_plain_bytes(times[start - lo:i - lo], part))
                        n_lines += i - start
                    if i == lo + len(times):
                        break
                    ts, base = int(month.times[i]), as_text(values[i - lo])
                    base[month.hidden] = ""
                    rows = repeated(base, month.dups.get(i), edit_rng, shown)
                    if month.index == 0 and i >= lines - stretch:
                        other = as_text(cluster.rows(np.array([float(ts)]), values_rng, joined)[0])
                        other[shown] = base[shown]  # the same scrape, but the joiner already reports
                        other[cluster.retired * GPUS:(cluster.retired + 1) * GPUS] = ""
                        carried.append((ts, reexported(other, edit_rng, np.sort(octo.header))))
                    for pos, col, text_value in marred.get(i, []):
                        rows[pos][col] = text_value
                    for raw in rows:
                        model.copy(ts, month.index, raw)
                        text.append(_line(ts, raw, month.header))
                    n_lines += len(rows)
                    start = i + 1
                fh.write(b"".join(text))
        carried = [] if month.index else carried
        files[FILES[month.index]] = {"lines": n_lines, "columns": len(month.header), "bytes": path.stat().st_size}
    expected = model.result()
    manifest = {
        "generator": "bench/acme_heldout.py", "seed": seed, "lines_per_month": lines, "columns": columns,
        "nodes": len(cluster.ips), "nodes_per_file": columns // GPUS, "interval_s": interval,
        "repeated_stretch": stretch, "repeated_times": sum(1 for n in due.values() if n > 1),
        "bad_cells": bad_cells, "files": files,
        "retired_node": cluster.ips[cluster.retired], "joined_node": cluster.ips[cluster.joiner],
        "bronze.acme_utilization": {"cells": model.cells, "distinct_cells": model.distinct,
                                    "duplicate_cells": model.cells - model.distinct},
        "bronze.acme_power": {"cells": 0},
        "expected": expected,
        "examples": list(model.examples.values()),
        "generated_s": round(time.perf_counter() - started, 2),
    }
    (out / "utilization" / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def repeated(base: np.ndarray, kind: str | None, rng: np.random.Generator, shown: np.ndarray) -> list[np.ndarray]:
    """The copies a base line is written as, in file order."""
    if kind is None:
        return [base]
    if kind == "same":
        return [base, base.copy()]
    if kind == "retry":
        return [base, retried(base, rng, shown)]
    return [base, base.copy(), retried(base, rng, shown)]


def bad_plan(sept: Month, stretch: int, rng: np.random.Generator) -> dict[int, list[tuple[int, int, str]]]:
    """Base line -> [(copy, column, text)]: bad cells on four lines of their own, on the second copy
    of a line written twice, and on the first repeated September row (whose October copy is good
    or empty); columns drawn from the header, a cell that is empty simply becomes bad."""
    lines = len(sept.times)
    single = [i for i in range(lines - stretch) if i not in sept.dups]
    twice = [i for i, k in sept.dups.items() if k != "triple" and i < lines - stretch]
    picked = {int(i): [(0, int(rng.choice(sept.header)), ("nan", "N/A")[j % 2])]
              for j, i in enumerate(rng.choice(single, 4, replace=False))}
    if twice:
        picked[twice[0]] = [(1, int(rng.choice(sept.header)), "N/A")]
    picked.setdefault(lines - stretch, []).append((0, int(rng.choice(sept.header)), "nan"))
    return picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=120, help="sampling times per monthly file (default 120)")
    parser.add_argument("--columns", type=int, default=2000, help="GPU columns per file, 8 per server (default 2000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bad-cells", action="store_true", help="a few nan / N/A cells (the series then parses exactly)")
    args = parser.parse_args()
    manifest = generate(args.out, args.lines, args.columns, args.seed, args.bad_cells)
    size = sum(f["bytes"] for f in manifest["files"].values())
    print(f"{args.out}: {size / 1e6:,.1f} MB in {manifest['generated_s']:.1f} s "
          f"({size / 1e6 / max(manifest['generated_s'], 1e-9):,.0f} MB/s); expected {json.dumps(manifest['expected'])[:300]}")


if __name__ == "__main__":
    main()
