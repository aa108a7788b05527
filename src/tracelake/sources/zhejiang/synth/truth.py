"""The correlation held against a generated world's ground_truth.json: which injected episodes
gold.zj_iteration_network found at the right port, and whether it blamed a decoy. The demo prints
it so a newcomer need not check by hand; the correlation tests assert on it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Verdict = Mapping[str, Any]  # a gold.zj_iteration_network row: is_slow, suspect_reason/_switch/_port


@dataclass(frozen=True)
class TruthCheck:
    found: tuple[str, ...]  # ids of episodes blamed at their own switch and port
    injected: int
    decoys_blamed: tuple[tuple[str, int], ...]  # (task_id, iteration) blamed on a decoy's port

    def line(self) -> str:
        decoys = "no decoy blamed" if not self.decoys_blamed else f"{len(self.decoys_blamed)} iterations blamed on a decoy"
        return (f"correlation vs the generator's ground truth: {len(self.found)} of {self.injected} "
                f"injected episodes found at the right port, {decoys}")


def check_against_truth(gold: Iterable[Verdict], truth: Mapping[str, Any]) -> TruthCheck:
    """Hold the verdicts against the generator's answers: an episode counts as found when one of
    the iterations it slowed is slow and blamed on the episode's switch and port."""
    verdicts = {(v["task_id"], v["iteration"]): v for v in gold}

    def blamed_at(key: tuple[str, int], switch: str, port: str) -> bool:
        v = verdicts.get(key)
        return bool(v and v["is_slow"] and (v["suspect_device_name"], v["suspect_port_name"]) == (switch, port))

    found = tuple(e["id"] for e in truth["episodes"] if any(
        blamed_at((hit["task_id"], i), e["switch"], e["port"])
        for hit in e["slowed_iterations"] for i in hit["iterations"]))
    decoy_ports = {(d["switch"], d["port"]) for d in truth["decoys"]}
    decoys = tuple(sorted(k for k, v in verdicts.items() if v["suspect_reason"] != "none"
                          and (v["suspect_device_name"], v["suspect_port_name"]) in decoy_ports))
    return TruthCheck(found, len(truth["episodes"]), decoys)


GROUND_TRUTH = "ground_truth.json"
VERDICTS = ("SELECT task_id, iteration, is_slow, suspect_reason, suspect_device_name, suspect_port_name "
            "FROM gold.zj_iteration_network")


def held_against_truth(spark, raw_dir: Path) -> str | None:
    """The demo's line on a lake built from a generated world in `raw_dir`; None for a release
    that carries no ground truth (a real one)."""
    truth = Path(raw_dir) / GROUND_TRUTH
    if not truth.is_file():
        return None
    gold = [row.asDict() for row in spark.sql(VERDICTS).collect()]
    return check_against_truth(gold, json.loads(truth.read_text(encoding="utf-8"))).line()
