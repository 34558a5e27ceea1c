"""Jobs on the multi-node local cluster: GPUs across applications, placement.

They run in the chaos session (``make test-chaos``, part of ``make test``) on
its four-node cluster: three unlabelled nodes and a last one labelled ``gpu``
with 4 stand-in GPUs. There a cluster that is not that shape is a failure,
not a skip: a skipped test here would prove nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.spec import JobSpec
from tests._cluster import CHAOS_NODEMANAGERS
from tests._util import get_json, wait_until
from tests.integration.test_runtime import job as runtime_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

HOLD = str(Path(__file__).resolve().parents[1] / "integration" / "jobs" / "hold_gpus.py")


def _nodes(rm_url: str) -> list[dict[str, Any]]:
    return (get_json(f"{rm_url}/ws/v1/cluster/nodes").get("nodes") or {}).get("node") or []


def _gpus(node: dict[str, Any]) -> int:
    infos = (node.get("totalResource") or {}).get("resourceInformations", {}).get("resourceInformation", [])
    return next((int(i["value"]) for i in infos if i["name"] == "yarn.io/gpu"), 0)


@pytest.fixture(scope="module")
def nodes(cluster) -> list[dict[str, Any]]:
    running = [n for n in _nodes(cluster.rm_url) if n["state"] == "RUNNING"]
    assert len(running) == CHAOS_NODEMANAGERS, (
        f"the chaos cluster runs {CHAOS_NODEMANAGERS} NodeManagers; the RM lists these RUNNING: "
        f"{[n['id'] for n in running]} (a node a previous test stopped and did not start again?)"
    )
    return running


@pytest.fixture(scope="module")
def gpu_node(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    node = next((n for n in nodes if "gpu" in (n.get("nodeLabels") or []) and _gpus(n) >= 4), None)
    assert node is not None, f"no node labelled gpu with 4 GPUs (the devcluster's last node): {nodes}"
    return node


def job(python: str, roles: dict[str, Any], **extra: Any) -> JobSpec:
    """test_runtime's job with room for several nodes' worth of containers to start on two cores."""
    settings = {"heartbeat_interval": 1, "heartbeat_timeout": 60, "registration_timeout": 240, **extra}
    return runtime_job(python, roles, name="pytest-multinode", **settings)


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


def _records_while_running(rm_url: str, apps: list[str], out: Path, count: int) -> list[dict[str, Any]] | None:
    """The tasks' records once ``count`` are in; fail at once if an application ended first."""
    for app_id in apps:
        app = get_json(f"{rm_url}/ws/v1/cluster/apps/{app_id}")["app"]
        if app["state"] in ("FINISHED", "FAILED", "KILLED"):
            raise AssertionError(f"{app_id} ended before all tasks started: {app['diagnostics']}")
    records = _records(out)
    return records if len(records) == count else None


def test_two_jobs_on_one_gpu_node_get_disjoint_gpus(tony_client, app_tag, python_exe, gpu_node, tmp_path: Path) -> None:
    """Each AM divides GPUs only within its job; the node-local leases keep two jobs apart."""
    out = tmp_path / "records"
    out.mkdir()
    gpu_role = {"memory": "256 MiB", "node_label": "gpu", "script": HOLD, "args": [str(out)]}
    first = job(python_exe, {"worker": {**gpu_role, "instances": 2, "gpus": 1}}, queue="training")
    second = job(python_exe, {"worker": {**gpu_role, "instances": 1, "gpus": 2}}, queue="training")
    apps = [tony_client.submit(spec, extra_tags=[app_tag]) for spec in (first, second)]
    try:
        records = wait_until(
            lambda: _records_while_running(tony_client.rm_url, apps, out, 3),
            240,
            "all three GPU tasks to start and record their GPUs",
            interval=1.0,
        )
        by_app: dict[str, list[str]] = {}
        for rec in records:
            assert rec["host"] == gpu_node["nodeHostName"], rec
            assert rec["cuda"], f"a GPU task got no GPU: {rec}"
            by_app.setdefault(rec["app"], []).extend(rec["cuda"].split(","))
        granted = [g for gpus in by_app.values() for g in gpus]
        assert sorted(granted) == ["0", "1", "2", "3"], f"GPU sets overlap or are missing: {records}"
        assert {len(v) for v in by_app.values()} == {2}, records
    finally:
        (out / "release").touch()
    for app_id in apps:
        result = tony_client.wait(app_id, poll_interval=1.0, emit=lambda line: print(line, flush=True))
        assert result.succeeded, result.diagnostics


def test_spread_deals_workers_over_the_nodes(tony_client, app_tag, python_exe, nodes, tmp_path: Path) -> None:
    """Four spread workers go round-robin over the unlabelled nodes (one gets two), each exactly
    where the plan put it; the ps goes to the one host it lists. Unplaced, YARN puts containers wherever a node
    heartbeats with room (the labelled node included), which matches this exact layout by chance
    only rarely."""
    unlabelled = sorted(n["nodeHostName"] for n in nodes if not n.get("nodeLabels"))
    assert len(unlabelled) == CHAOS_NODEMANAGERS - 1, f"all but the gpu node are unlabelled: {unlabelled}"
    out = tmp_path / "records"
    out.mkdir()
    role = {"memory": "256 MiB", "script": HOLD, "args": [str(out)]}
    spec = job(
        python_exe,
        {
            "worker": {**role, "instances": 4, "placement": "spread"},
            "ps": {**role, "instances": 1, "placement": [unlabelled[1]]},
        },
    )
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    try:
        records = wait_until(
            lambda: _records_while_running(tony_client.rm_url, [app_id], out, 5),
            240,
            "the four workers and the ps to start",
            interval=1.0,
        )
        hosts = {rec["task"]: rec["host"] for rec in records}
        expected = {f"worker:{i}": unlabelled[i % len(unlabelled)] for i in range(4)} | {"ps:0": unlabelled[1]}
        assert hosts == expected
    finally:
        (out / "release").touch()
    result = tony_client.wait(app_id, poll_interval=1.0, emit=lambda line: print(line, flush=True))
    assert result.succeeded, result.diagnostics
