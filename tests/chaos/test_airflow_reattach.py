"""The Airflow worker dies while the AM restarts the gang: the next try re-attaches to the same application."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests._cluster import devcluster, node_index
from tests._util import rm_app, rm_apps, wait_until
from tests.chaos.test_node_loss import step_of
from tests.integration.test_airflow import ACTIVE, AIRFLOW, dag_tag, result_of

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

# The test DAGs' folder (tony_test_dags.py defines this DAG beside the resume one).
DAGS = Path(__file__).resolve().parents[1] / "integration" / "dags"
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
            app_id = wait_until(lambda: ours("RUNNING"), 180, "the application to run")[0]["id"]

            def past_first_checkpoint() -> Any:
                doc = client.am_state(app_id)
                return doc if doc is not None and step_of(doc, "worker:0") >= 15 else None

            doc = wait_until(past_first_checkpoint, 300, "training past the first checkpoint")
            am = node_index(rm_app(cluster.rm_url, app_id)["amHostHttpAddress"].split(":")[0])
            victims = [node_index(t.host) for t in doc.tasks.values() if t.host and node_index(t.host) != am]
            if not victims:
                pytest.skip(f"YARN put every worker on the AM's node {am}")
            devcluster("stop-nm", str(victims[0]))
            stopped_nodes.append(victims[0])
            wait_until(lambda: (d := client.am_state(app_id)) and d.restarts, 180, "the AM to restart the gang")
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the worker dies mid-restart, without any cleanup
        first.wait(timeout=30)
    assert [a["id"] for a in ours(ACTIVE)] == [app_id], "the application must survive its worker"
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    text = out.stdout + out.stderr
    assert f"re-attaching to {app_id}" in text or "Reconnecting to existing job" in text, text[-4000:]
    result = result_of(text)
    assert result["final_state"] == "SUCCEEDED", text[-4000:]
    assert len(result["restarts"]) == 1 and result["restarts"][0]["resumed_step"] is not None, result
    assert "restart 1" in text, "the restart is not in the Airflow log"
    assert [a["id"] for a in ours()] == [app_id], "a second application was submitted"
