"""The learning-rate sweep in the real Airflow stack: trials named in the UI, a loser stopped, one publication.

``tony_hparam_sweep`` maps one ``TonyOperator`` over three rates (two at a time, as the
scheduler runs them) and ``publish_best`` sends only the best trial through the gate.
Checked as a user sees it: the mapped tasks named by their trial in the UI (Chromium), one
YARN application per trial, the smallest rate (started once another trial had finished)
stopped early by the median rule, exactly one new published version (the best trial's)
while the others stay candidates.
"""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Any

import pytest

from tests._util import rm_apps, wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.e2e]
DAG = "tony_hparam_sweep"
ENDED = ("success", "failed")
NAMES = ["digits-sweep-lr0.2", "digits-sweep-lr0.05", "digits-sweep-lr0.002"]
TOTAL_STEPS = 4 * 100  # each trial's --epochs x --steps-per-epoch


def xcom(stack: Any, run_id: str, task_id: str, map_index: int = -1) -> Any:
    entry = stack.api(
        "GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value?map_index={map_index}"
    )
    return json.loads(entry["value"]) if isinstance(entry["value"], str) else entry["value"]


def test_sweep_names_its_trials_and_publishes_only_the_best(airflow_stack, page, shots_dir: Path, cluster) -> None:
    from hdfs import InsecureClient

    hdfs = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    models = f"/user/{cluster.user}/tony/models/digits-sweep"
    # A sweep on this cluster before (a developer's earlier run) would be the gate's yardstick: start clean.
    parent = posixpath.dirname(models)
    if hdfs.status(parent, strict=False):
        for leftover in hdfs.list(parent):
            if leftover.startswith("digits-sweep"):
                hdfs.delete(f"{parent}/{leftover}", recursive=True)
    run_id = airflow_stack.api("POST", f"/dags/{DAG}/dagRuns", {"logical_date": None})["dag_run_id"]
    final = wait_until(
        lambda: (r := airflow_stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}"))["state"] in ENDED and r,
        900,
        f"the sweep run {run_id} to end",
    )
    tis = airflow_stack.api("GET", f"/dags/{DAG}/dagRuns/{run_id}/taskInstances?limit=100")["task_instances"]
    assert final["state"] == "success", [(t["task_id"], t["map_index"], t["state"]) for t in tis]
    trials = sorted((t["map_index"], t["rendered_map_index"]) for t in tis if t["task_id"] == "train")
    assert trials == list(enumerate(NAMES)), trials

    # The UI names each mapped task by its trial, not train[1].
    page.goto(f"{airflow_stack.url}/dags/{DAG}/runs/{run_id}/tasks/train/mapped")
    for name in NAMES:
        page.get_by_text(name).first.wait_for()
    page.screenshot(path=str(shots_dir / "sweep-trials.png"), full_page=True)

    tag = f"tony-run:{run_id.lower()}"
    apps = [a for a in rm_apps(cluster.rm_url, tag=f"tony-dag:{DAG}") if tag in a["applicationTags"].split(",")]
    maps = sorted(t for a in apps for t in a["applicationTags"].split(",") if t.startswith("tony-map:"))
    assert maps == ["tony-map:0", "tony-map:1", "tony-map:2"] and all(a["finalStatus"] == "SUCCEEDED" for a in apps)

    results = [xcom(airflow_stack, run_id, "train", i) for i in range(3)]
    # The smallest rate started after a trial had finished, fell behind it and stopped itself, with no model.
    loser = results[2]["early_stopped"]
    assert loser and loser["metric"] == "loss" and 20 <= loser["step"] < TOTAL_STEPS, results[2]
    assert loser["value"] > loser["median"] and loser["finished_trials"] >= 1, loser
    kept = [r for r in results if not r["early_stopped"]]
    assert kept and all(r["candidate"] and ".candidate-" in r["model_dir"] for r in kept), results
    published = xcom(airflow_stack, run_id, "publish_best")
    best = max(kept, key=lambda r: (r["metrics"]["val_accuracy"], -results.index(r)))
    assert published["application_id"] == best["application_id"] and published["quality_gate"]["passed"]
    assert [s["application_id"] for s in published["stopped"]] == [
        r["application_id"] for r in results if r not in kept
    ]
    versions = [v for v in hdfs.list(f"{models}.versions") if v.startswith("application_")]
    assert versions == [best["application_id"]], "one publication per sweep"
    candidates = sorted(c["application_id"] for c in published["candidates"])
    assert candidates == sorted(r["application_id"] for r in kept if r is not best)
    assert all(hdfs.status(c["model_dir"], strict=False) for c in published["candidates"]), "the others stay"
