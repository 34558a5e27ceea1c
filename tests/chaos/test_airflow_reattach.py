"""Node loss under Airflow: the worker dies while the AM restarts the gang (the next try
re-attaches to the same application), and without in-application restarts Airflow's
retry resumes from the checkpoint in exactly one new application."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests._cluster import devcluster
from tests._util import rm_apps, wait_until
from tests.chaos.test_node_loss import pick_victim, step_of
from tests.integration.dags.training_jobs import CHAOS_EVERY
from tests.integration.test_airflow import ACTIVE, AIRFLOW, dag_tag, result_of, run_state

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# The test DAGs' folder (tony_test_dags.py defines this DAG beside the resume one).
DAGS = Path(__file__).resolve().parents[1] / "integration" / "dags"
DAG_ID = "tony_chaos_restart"


def lose_a_worker_node(
    client: Any,
    cluster: Any,
    running: Callable[[], list[dict[str, Any]]],
    stopped_nodes: list[int],
    *,
    machine: bool = False,
    every: int = CHAOS_EVERY,
) -> tuple[str, int]:
    """Wait for the DAG's application to train past its first checkpoint, then stop a worker's node.

    Returns the application id and worker:0's step as the AM last heard it before the node was
    stopped. The node is one with a worker but neither the AM nor worker:0 (``pick_victim``);
    ``stopped_nodes`` starts it again after the test. ``machine``: SIGKILL the NodeManager and its
    containers (a machine lost: the RM still lists the node until it expires) instead of stopping
    it. ``every``: the job's checkpoint interval, in steps.
    """
    app_id: str = wait_until(running, 180, "the application to run")[0]["id"]

    def past_first_checkpoint() -> Any:
        doc = client.am_state(app_id)
        return doc if doc is not None and step_of(doc, "worker:0") >= every + every // 2 else None

    doc = wait_until(past_first_checkpoint, 300, "training past the first checkpoint")
    victim, _ = pick_victim(cluster, app_id, doc)
    devcluster("stop-nm", str(victim), *(["--lose"] if machine else []))
    stopped_nodes.append(victim)
    return app_id, step_of(doc, "worker:0")


def test_worker_killed_during_a_gang_restart_reattaches(airflow_env, cluster, stopped_nodes) -> None:
    from airflow_provider_tony.yarn.client import TonyClient

    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS)}
    run_id = f"chaos-{uuid.uuid4().hex[:8]}"
    subprocess.run([AIRFLOW, "dags", "reserialize"], env=env, check=True, capture_output=True, timeout=300)
    subprocess.run(
        [AIRFLOW, "dags", "trigger", DAG_ID, "--run-id", run_id], env=env, check=True, capture_output=True, timeout=300
    )
    cmd = [AIRFLOW, "tasks", "test", DAG_ID, "train", run_id]
    run_tag = f"tony-run:{run_id}"

    def ours(states: str | None = None) -> list[dict[str, Any]]:
        return [
            a
            for a in rm_apps(cluster.rm_url, states=states, tag=dag_tag(DAG_ID))
            if run_tag in a.get("applicationTags", "").split(",")
        ]

    first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    app_id = None
    try:
        with TonyClient.from_env() as client:
            app_id, _ = lose_a_worker_node(client, cluster, lambda: ours("RUNNING"), stopped_nodes)
            wait_until(lambda: (d := client.am_state(app_id)) and d.restarts, 180, "the AM to restart the gang")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies mid-restart, without any cleanup
        first.wait(timeout=30)
    assert [a["id"] for a in ours(ACTIVE)] == [app_id], "the application must survive its worker"
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    finally:
        leftover = ours(ACTIVE)  # the second try failed or timed out: nothing may keep running
        if leftover:
            with TonyClient.from_env() as client:
                for app in leftover:
                    client.kill(app["id"])
    text = out.stdout + out.stderr
    # Polling mode: the mixin's task state store path, not the operator's tag search.
    assert "Reconnecting to existing job" in text and "re-attaching to" not in text, text[-4000:]
    result = result_of(text)
    assert result["final_state"] == "SUCCEEDED", text[-4000:]
    assert len(result["restarts"]) == 1 and result["restarts"][0]["resumed_step"] is not None, result
    assert "restart 1" in text, "the restart is not in the Airflow log"
    assert [a["id"] for a in ours()] == [app_id], "a second application was submitted"


def test_without_restarts_airflows_retry_resumes_in_one_new_application(airflow_env, cluster, stopped_nodes) -> None:
    """``max_restarts: 0``, real MultiWorkerMirroredStrategy, a machine lost: the survivors' collectives
    fail at once, yet the try fails as retryable with the lost worker as its cause; the retry submits
    once (its task planned onto the dead node, which the RM still lists, runs elsewhere) and resumes."""
    retry_resumes_in_one_new_application(airflow_env, cluster, stopped_nodes, "tony_chaos_retry", CHAOS_EVERY)


def retry_resumes_in_one_new_application(
    airflow_env: dict[str, str], cluster: Any, stopped_nodes: list[int], dag_id: str, every: int
) -> tuple[dict[str, Any], str]:
    """Run ``dag_id`` (one task ``train``, ``max_restarts: 0``, one Airflow retry), lose a worker's
    machine past its first checkpoint, and check the retry: the first try failed as retryable with
    the lost worker as its root cause and worker:0 among the consequences, the retry is exactly one
    new application, and it resumed from a checkpoint (a multiple of ``every``) at most one interval
    behind the step worker:0 had reached when the node was lost. Returns the retry's result (XCom)
    and the Airflow log, for the caller's own checks."""
    from airflow_provider_tony.yarn.client import TonyClient

    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS)}
    before = {a["id"] for a in rm_apps(cluster.rm_url, tag=dag_tag(dag_id))}

    def ours(states: str | None = None) -> list[dict[str, Any]]:
        return [a for a in rm_apps(cluster.rm_url, states=states, tag=dag_tag(dag_id)) if a["id"] not in before]

    run = subprocess.Popen(
        [AIRFLOW, "dags", "test", dag_id],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        with TonyClient.from_env() as client:
            first, lost_at = lose_a_worker_node(
                client, cluster, lambda: ours("RUNNING"), stopped_nodes, machine=True, every=every
            )
        text, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
        leftover = ours(ACTIVE)  # nothing left running whatever happened
        if leftover:
            with TonyClient.from_env() as client:
                for app in leftover:
                    client.kill(app["id"])
    assert run_state(text) == "success", text[-4000:]
    apps = sorted(a["id"] for a in ours())
    assert len(apps) == 2 and apps[0] == first, f"expected the first application and one retry: {apps}"
    assert "[retryable]" in text and "in-application restart" not in text, text[-4000:]
    # The lost worker is the root cause, declared on missed heartbeats or, sooner, on its peers' blame.
    lost = "lost: missed heartbeats" in text or "lost: declared lost on" in text
    assert lost and "consequences: worker:0" in text, text[-4000:]
    result = result_of(text)
    assert result["application_id"] == apps[1] and result["restarts"] == [], result
    restored = result["tasks"]["worker:0"]["restored_step"]
    assert restored is not None and restored % every == 0, result["tasks"]
    assert restored >= lost_at - every, f"resumed from step {restored}, the node was lost at step {lost_at}"
    return result, text
