"""Jobs on the multi-node local cluster: GPUs across applications, placement.

They run in the chaos session (``make test-chaos``, part of ``make test``) on
its four-node cluster: three unlabelled nodes and a last one labelled ``gpu``
with 4 stand-in GPUs. There a cluster that is not that shape is a failure,
not a skip: a skipped test here would prove nothing.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.gpu_lease import GpuLeases
from airflow_provider_tony.runtime.spec import JobSpec
from tests._cluster import CHAOS_NODEMANAGERS
from tests._util import get_json, wait_until
from tests.integration._runtime import job as runtime_job

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


class _Holder(threading.Thread):
    """Takes all of a node's stand-in GPUs, through the same leases the executors use, as soon as
    they are free: polled every 20 ms, well before a restarted executor (seconds to start) asks."""

    def __init__(self, directory: Path, devices: list[str]) -> None:
        super().__init__(daemon=True)
        self.leases = GpuLeases(directory, owner="pytest (another GPU workload)")
        self.devices = devices
        self.got = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            if self.leases.try_acquire(self.devices, len(self.devices)) is not None:
                self.got.set()
                self.stop.wait()
                break
            self.stop.wait(0.02)
        self.leases.release()


def test_a_restarted_gangs_gpu_lease_failure_fails_the_job_with_the_gpu_message(
    tony_client, app_tag, python_exe, gpu_node, tmp_path: Path
) -> None:
    """Gang 0 takes a GPU lease and exits 75 (retryable), so the AM restarts the gang; meanwhile
    every GPU of the node is leased elsewhere. Gang 1's executor cannot lease one and reports so:
    the job fails with the GPU message, retryable, not with a registration timeout (which is what
    happened when that exit record carried no generation and the AM dropped it)."""
    out = tmp_path / "records"
    out.mkdir()
    role = {"memory": "256 MiB", "node_label": "gpu", "script": HOLD, "args": [str(out), "75"], "gpus": 1}
    # The restarted executor waits three quarters of registration_timeout for a lease, counted from
    # its own start: the last quarter must cover the container's start-up on a loaded machine (at
    # 40 s, 7 s of Python start-up under load lost the race to the registration timeout).
    spec = job(
        python_exe, {"worker": {**role, "instances": 1}}, queue="training", max_restarts=1, registration_timeout=90
    )
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    holder = None
    try:
        (record,) = wait_until(
            lambda: _records_while_running(tony_client.rm_url, [app_id], out, 1),
            240,
            "gang 0's worker to lease its GPU",
            interval=0.5,
        )
        assert record["host"] == gpu_node["nodeHostName"] and record["cuda"], record
        holder = _Holder(Path(record["lease_dir"]), [str(i) for i in range(_gpus(gpu_node))])
        holder.start()
        (out / "release").touch()  # gang 0 exits 75; its lease goes with its process
        assert holder.got.wait(120), "the node's GPUs never all came free after gang 0 ended"
        result = tony_client.wait(app_id, poll_interval=1.0, emit=lambda line: print(line, flush=True))
    finally:
        if holder is not None:
            holder.stop.set()
            holder.join(timeout=10)
    assert not result.succeeded
    doc = result.am_state
    assert doc is not None and doc.generation == 1 and len(doc.restarts) == 1, doc
    assert "GPU lease:" in result.diagnostics and "pytest (another GPU workload)" in result.diagnostics, (
        result.diagnostics
    )
    assert "registration timeout" not in result.diagnostics and result.retryable, result.diagnostics
