"""What several chaos tests share: the node-loss job, choosing a node to lose, waiting for the gang to resume, the
Airflow retry after a lost node. No test module imports another: these live here.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime.constants import RETRYABLE_MARK
from airflow_provider_tony.runtime.messages import StateDocument
from airflow_provider_tony.runtime.spec import JobSpec
from tests._airflow import ACTIVE, AIRFLOW, dag_tag, result_of, run_state
from tests._cluster import devcluster, node_index
from tests._util import rm_app, rm_apps, step_of, wait_until
from tests.integration.dags.training_jobs import CHAOS_EVERY, chaos_job


def count_job(ckpt: str, max_restarts: int) -> JobSpec:
    """The node-loss job (three workers counting steps), as the chaos DAG runs it (bench/node_loss.py with TF)."""
    return JobSpec.from_dict(chaos_job(max_restarts, ckpt, plain=True, name="pytest-chaos"))


def am_node(cluster: Any, app_id: str) -> int:
    return node_index(rm_app(cluster.rm_url, app_id)["amHostHttpAddress"].split(":")[0])


def pick_victim(cluster: Any, app_id: str, doc: StateDocument) -> tuple[int, str]:
    """A node that runs a worker but neither the AM (its loss ends the application) nor
    worker:0 (the checkpoint uploader: its unsent checkpoint would go with it)."""
    am = am_node(cluster, app_id)
    keep = {am, *(node_index(t.host) for tid, t in doc.tasks.items() if tid == "worker:0" and t.host)}
    for task_id, task in sorted(doc.tasks.items()):
        if task.host is not None and node_index(task.host) not in keep:
            return node_index(task.host), task_id
    raise AssertionError(f"no worker away from the AM (node {am}) and worker:0: {doc.tasks}")


def wait_resumed(tony_client: Any, app_id: str) -> StateDocument:
    """The state once the gang restarted and every task runs user code again, in the same application."""

    def resumed() -> StateDocument | None:
        doc = tony_client.am_state(app_id)
        return doc if doc is not None and doc.restarts and doc.restarts[0].resumed_at is not None else None

    return wait_until(resumed, 300, "the gang restarted and resumed in the same application")


def victim_of(cluster: Any, app_id: str, doc: StateDocument, uploader: str) -> tuple[int, str]:
    """A node running a worker but neither the AM (its loss ends the application) nor the uploader.

    A node where that worker runs alone comes first: with a second task beside it (a ps), the
    node's loss loses both and either is a right root cause (the test accepts any task there).
    """
    am = node_index(rm_app(cluster.rm_url, app_id)["amHostHttpAddress"].split(":")[0])
    keep = {am, *(node_index(t.host) for tid, t in doc.tasks.items() if tid == uploader and t.host)}
    candidates = [
        (len(tasks_on(doc, node_index(task.host))), node_index(task.host), task_id)
        for task_id, task in sorted(doc.tasks.items())
        if task_id.startswith("worker:") and task.host and node_index(task.host) not in keep
    ]
    if not candidates:
        raise AssertionError(f"no worker away from the AM (node {am}) and {uploader}: {doc.tasks}")
    _, node, task_id = min(candidates)
    return node, task_id


def tasks_on(doc: StateDocument, node: int) -> set[str]:
    """The tasks placed on ``node``: a lost node loses all of them."""
    return {tid for tid, t in doc.tasks.items() if t.host and node_index(t.host) == node}


# The test DAGs' folder (tony_test_dags.py defines this DAG beside the resume one).
DAGS = Path(__file__).resolve().parents[1] / "integration" / "dags"


def retry_resumes_in_one_new_application(
    airflow_env: dict[str, str], cluster: Any, stopped_nodes: list[int], dag_id: str, every: int
) -> tuple[dict[str, Any], str]:
    """Run ``dag_id`` (one task ``train``, ``max_restarts: 0``, one Airflow retry), lose a worker's
    machine past its first checkpoint, and check the retry: the first try failed as retryable with
    the lost worker as its root cause (never a survivor whose collective failed first: those are
    its consequences when they failed before the verdict), the retry is exactly one new
    application, and it resumed from a checkpoint (a multiple of ``every``) at most one interval
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
            first, lost_tasks, lost_at = lose_a_worker_node(
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
    assert RETRYABLE_MARK in text and "in-application restart" not in text, text[-4000:]
    # The lost worker is the root cause, declared on missed heartbeats or, sooner, on its peers' blame.
    # The survivors that failed before the verdict are its consequences; one still inside a collective
    # when the verdict came is killed with the gang, so which of them are listed is a matter of timing.
    verdicts = [line for line in text.splitlines() if RETRYABLE_MARK in line]
    roots = [f"{task} lost: {how}" for task in lost_tasks for how in ("missed heartbeats", "declared lost on")]
    assert any(root in line for line in verdicts for root in roots), verdicts or text[-4000:]
    # At least one survivor failed first (its collective broke) and is a consequence, not the cause.
    assert any("; consequences: worker:" in line for line in verdicts), verdicts
    assert not any("exited with code" in line for line in verdicts), verdicts
    print(f"\n{dag_id}: the first try's verdict: {verdicts[0]}")
    result = result_of(text)
    assert result["application_id"] == apps[1] and result["restarts"] == [], result
    restored = result["tasks"]["worker:0"]["restored_step"]
    assert restored is not None and restored % every == 0, result["tasks"]
    assert restored >= lost_at - every, f"resumed from step {restored}, the node was lost at step {lost_at}"
    return result, text


def lose_a_worker_node(
    client: Any,
    cluster: Any,
    running: Callable[[], list[dict[str, Any]]],
    stopped_nodes: list[int],
    *,
    machine: bool = False,
    every: int = CHAOS_EVERY,
) -> tuple[str, set[str], int]:
    """Wait for the DAG's application to train past its first checkpoint, then stop a worker's node.

    Returns the application id, the tasks on the lost node and worker:0's step as the AM last
    heard it before the node was stopped. The node is one with a worker but neither the AM nor
    worker:0 (``pick_victim``); ``stopped_nodes`` starts it again after the test. ``machine``:
    SIGKILL the NodeManager and its containers (a machine lost: the RM still lists the node until
    it expires) instead of stopping it. ``every``: the job's checkpoint interval, in steps.
    """
    app_id: str = wait_until(running, 180, "the application to run")[0]["id"]

    def past_first_checkpoint() -> Any:
        doc = client.am_state(app_id)
        return doc if doc is not None and step_of(doc, "worker:0") >= every + every // 2 else None

    doc = wait_until(past_first_checkpoint, 300, "training past the first checkpoint")
    victim, _ = pick_victim(cluster, app_id, doc)
    devcluster("stop-nm", str(victim), *(["--lose"] if machine else []))
    stopped_nodes.append(victim)
    return app_id, tasks_on(doc, victim), step_of(doc, "worker:0")
