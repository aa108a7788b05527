"""docs/newcomer.ipynb, run top to bottom in a Jupyter kernel (nbclient) over a lake of generated
AcmeTrace jobs and a generated Zhejiang hour: each of its four answers equals the same question
asked of the tables directly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import tracelake_in_process

from tracelake.run.registry import generate

pytestmark = pytest.mark.e2e  # a kernel of its own and a Zhejiang ingest: in `bash dev e2e`

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "newcomer.ipynb"


def test_the_newcomers_notebook_runs_and_answers_from_the_tables(engine, tmp_path, monkeypatch):
    import nbclient
    import nbformat
    from jupyter_client.manager import KernelManager

    lake = tmp_path / "lake"
    for source, options in (("acme", {}), ("zhejiang", {"hours": 1, "tasks": 1})):
        generate(source, tmp_path / source, scale=0.01, seed=5, **options)
        done = tracelake_in_process(engine, "ingest", source, "--raw", str(tmp_path / source), "--lake", str(lake))
        assert done.returncode == 0, done.stderr[-3000:]
    monkeypatch.setenv("TRACELAKE_LAKE", str(lake))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # the kernel on Unix sockets in a folder only we may enter, not on 127.0.0.1 ports
    sockets = tmp_path / "kernel"
    sockets.mkdir(mode=0o700)
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "k"))
    nbclient.NotebookClient(notebook, km=kernel, timeout=600,
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    [printed] = [o["text"] for o in notebook.cells[-1].outputs if o.get("name") == "stdout"]
    answers = json.loads(printed.strip().splitlines()[-1])

    def one(sql: str):
        done = tracelake_in_process(engine, "query", sql, "--lake", str(lake), "--format", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    [jobs] = one("SELECT count(*) AS n, round(sum(gpu_time) / 3600, 1) AS h FROM bronze.acme_jobs")
    assert answers["states"] == jobs["n"] > 0
    [by_type] = one("SELECT sum(h) AS h FROM (SELECT round(sum(gpu_time) / 3600, 1) AS h FROM bronze.acme_jobs "
                    "GROUP BY type)")
    assert answers["gpu_hours"] == pytest.approx(by_type["h"])
    [slow] = one("SELECT sum(CASE WHEN is_slow THEN 1 ELSE 0 END) AS slow, sum(CASE WHEN is_slow AND "
                 "suspect_reason <> 'none' THEN 1 ELSE 0 END) AS explained FROM gold.zj_iteration_network")
    assert (answers["slow"], answers["explained"]) == (slow["slow"], slow["explained"]) and slow["slow"] > 0
    top = one("SELECT task_id, iteration FROM gold.zj_iteration_network WHERE is_slow "
              "ORDER BY slowdown DESC, task_id, iteration LIMIT 3")
    assert answers["slowest"] == [[t["task_id"], t["iteration"]] for t in top]
