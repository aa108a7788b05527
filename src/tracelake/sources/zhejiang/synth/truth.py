"""The correlation held against a generated world's ground_truth.json: which injected episodes
gold.zj_iteration_network found at the right port, whether it blamed a decoy, and for the
interference episodes whether gold.zj_iteration_interference named their aggressor top. The demo
prints it so a newcomer need not check by hand; the correlation tests assert on it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Verdict = Mapping[str, Any]  # a gold.zj_iteration_network row: is_slow, suspect_reason/_switch/_port
Party = Mapping[str, Any]  # a gold.zj_iteration_interference row: task_id, iteration, device_name, port_name, party, is_top


@dataclass(frozen=True)
class TruthCheck:
    found: tuple[str, ...]  # ids of episodes blamed at their own switch and port
    injected: int
    decoys_blamed: tuple[tuple[str, int], ...]  # (task_id, iteration) blamed on a decoy's port
    # interference episodes whose aggressor is the top party at their port in every iteration they slowed
    interference_found: tuple[str, ...] = ()
    interference_injected: int = 0
    interference_slowed: int = 0  # the iterations the interference episodes slowed
    aggressor_top: int = 0  # of those, the ones whose top party at the episode's port is its aggressor

    def line(self) -> str:
        decoys = "no decoy blamed" if not self.decoys_blamed else f"{len(self.decoys_blamed)} iterations blamed on a decoy"
        line = (f"correlation vs the generator's ground truth: {len(self.found)} of {self.injected} "
                f"injected episodes found at the right port, {decoys}")
        if self.interference_injected:
            line += (f"; interference: the aggressor named top in {len(self.interference_found)} of "
                     f"{self.interference_injected} episodes ({self.aggressor_top} of {self.interference_slowed} "
                     "slowed iterations)")
        return line


def check_against_truth(gold: Iterable[Verdict], truth: Mapping[str, Any],
                        parties: Iterable[Party] | None = None) -> TruthCheck:
    """Hold the verdicts against the generator's answers: an episode counts as found when one of
    the iterations it slowed is slow and blamed on the episode's switch and port. With `parties`
    (rows of gold.zj_iteration_interference), an interference episode counts as found when its
    aggressor is the top party at its switch and port in every iteration it slowed."""
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
    interference = [e for e in truth["episodes"] if e["kind"] == "interference"]
    if parties is None or not interference:  # not held against the interference table: nothing said of it
        return TruthCheck(found, len(truth["episodes"]), decoys)
    top = {(r["task_id"], r["iteration"], r["device_name"], r["port_name"]): r["party"] for r in parties if r["is_top"]}
    named = {e["id"]: [top.get((e["victim_task"], i, e["switch"], e["port"])) == e["aggressor_task"]
                       for i in e["iterations"]] for e in interference}
    return TruthCheck(found, len(truth["episodes"]), decoys,
                      interference_found=tuple(ident for ident, hits in named.items() if hits and all(hits)),
                      interference_injected=len(interference),
                      interference_slowed=sum(len(hits) for hits in named.values()),
                      aggressor_top=sum(sum(hits) for hits in named.values()))


GROUND_TRUTH = "ground_truth.json"
VERDICTS = ("SELECT task_id, iteration, is_slow, suspect_reason, suspect_device_name, suspect_port_name "
            "FROM gold.zj_iteration_network")
TOP_PARTIES = ("SELECT task_id, iteration, device_name, port_name, party, is_top "
               "FROM gold.zj_iteration_interference WHERE is_top")


def held_against_truth(spark, raw_dir: Path) -> str | None:
    """The demo's line on a lake built from a generated world in `raw_dir`; None for a release
    that carries no ground truth (a real one)."""
    truth = Path(raw_dir) / GROUND_TRUTH
    if not truth.is_file():
        return None
    gold = [row.asDict() for row in spark.sql(VERDICTS).collect()]
    answers = json.loads(truth.read_text(encoding="utf-8"))
    parties = None
    if any(e["kind"] == "interference" for e in answers["episodes"]):  # a world of 3 tasks or more
        parties = [row.asDict() for row in spark.sql(TOP_PARTIES).collect()]
    return check_against_truth(gold, answers, parties).line()
