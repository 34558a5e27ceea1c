"""Node loss under Airflow: the worker dies while the AM restarts the gang (the next try
re-attaches to the same application), and without in-application restarts Airflow's
retry resumes from the checkpoint in exactly one new application."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from typing import Any

import pytest

from tests._airflow import ACTIVE, AIRFLOW, dag_tag, result_of
from tests._util import rm_apps, wait_until
from tests.chaos._support import (
    DAGS,
    lose_a_worker_node,
    retry_resumes_in_one_new_application,
)
from tests.integration.dags.training_jobs import CHAOS_EVERY

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DAG_ID = "tony_chaos_restart"


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
            app_id, _, _ = lose_a_worker_node(client, cluster, lambda: ours("RUNNING"), stopped_nodes)
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
