"""Issue 40: a container YARN kills for its memory, on the local cluster with memory enforced.

The cluster's NodeManagers run Hadoop's physical-memory check as production
ones do (``devcluster/conf/yarn-site.xml``). A worker of a real
MultiWorkerMirroredStrategy gang takes more memory than its container asks for
mid-training (``jobs/strategies.py --hog-task``); through Airflow, plain Python
(``jobs/hog.py``) does the same, cheaper, where what is tested is the retry's
larger request.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.page import render_page
from airflow_provider_tony.runtime.spec import JobSpec
from tests._airflow import (
    TEST_DAGS,
    dags_test,
    own_runs,
    result_of,
)
from tests._util import get_json

pytestmark = pytest.mark.cluster

HOG = str(Path(__file__).parent / "jobs" / "hog.py")
STRATEGIES = str(Path(__file__).parent / "jobs" / "strategies.py")
JSON = "application/json"


def nm_conf(name: str) -> str:
    """One property of the running NodeManager's effective configuration (its ``/conf`` page)."""
    request = urllib.request.Request(f"{os.environ['TONY_NM_URL']}/conf?name={name}", headers={"Accept": JSON})
    with urllib.request.urlopen(request, timeout=10) as resp:
        return str(json.load(resp)["property"]["value"])


def test_the_nodemanager_enforces_physical_memory(cluster: Any) -> None:
    """Hadoop's own check on, and the cgroups flag off: with it on (Hadoop's default) the
    NodeManager leaves memory to cgroups, which the DefaultContainerExecutor does not use."""
    assert nm_conf("yarn.nodemanager.pmem-check-enabled") == "true"
    assert nm_conf("yarn.nodemanager.resource.memory.enforced") == "false"
    assert nm_conf("yarn.nodemanager.vmem-check-enabled") == "false"


def test_a_worker_over_its_memory_fails_once_naming_task_peak_request_and_field(
    tony_client: Any, app_tag: str, cluster: Any
) -> None:
    spec = JobSpec.from_dict(
        {
            "name": "pytest-memory",
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 10,
            "max_restarts": 2,
            "roles": {
                "worker": {
                    "instances": 2,
                    "memory": "1 GiB",  # TensorFlow's import holds about 630 MiB of it
                    "script": STRATEGIES,
                    "args": [
                        "--mode",
                        "mwms-loop",
                        "--steps",
                        "400",
                        "--sleep",
                        "0.1",
                        "--hog-task",
                        "worker:1",
                        "--hog-mib",
                        "900",
                        "--hog-step",
                        "3",
                    ],  # fmt: skip
                }
            },
        }
    )
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    result = tony_client.wait(app_id, poll_interval=0.5, emit=lambda line: print(line, flush=True))
    assert not result.succeeded
    failure = result.failure
    assert failure is not None, result
    assert (failure.kind, failure.retryable, failure.task_id) == ("out_of_memory", False, "worker:1"), failure
    assert failure.requested_mib == 1024 and failure.fix_field == "roles.worker.memory", failure
    assert failure.peak_mib is not None and failure.peak_mib >= 1024, failure  # YARN rounds to 0.1 GB
    for text in ("worker:1 out of memory", f"used {failure.peak_mib} MiB", "1024 MiB", "roles.worker.memory"):
        assert text in result.diagnostics, result.diagnostics
    assert "[retryable]" not in result.diagnostics
    state = result.am_state
    assert state is not None and state.restarts == [] and state.generation == 0, "no in-application restart spent"
    attempts = get_json(f"{cluster.rm_url}/ws/v1/cluster/apps/{app_id}/appattempts") or {}
    assert len(attempts["appAttempts"]["appAttempt"]) == 1, attempts
    # The job page, from the history the AM left on HDFS: the typed cause with its figures.
    history = tony_client.stored_history(app_id)
    assert history is not None and history.state is not None
    page = render_page(history, refresh_s=None)
    assert 'id="failure"' in page and "out_of_memory" in page and "roles.worker.memory" in page


def _tries(env: dict[str, str], runs: set[tuple[str, str]]) -> dict[str, tuple[int, str]]:
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return {
            task: (tries, state)
            for dag_id, run_id in runs
            for task, tries, state in conn.execute(
                "SELECT task_id, try_number, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
                (dag_id, run_id),
            ).fetchall()
        }


def _xcom(env: dict[str, str], task_id: str, key: str) -> Any:
    db = Path(env["AIRFLOW_HOME"]) / "airflow.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT value FROM xcom WHERE dag_id = 'tony_test_memory' AND task_id = ? AND key = ?", (task_id, key)
        ).fetchall()
    assert len(rows) == 1, rows
    value = rows[0][0]
    return json.loads(value) if isinstance(value, (str, bytes)) else value


@pytest.mark.slow
def test_through_airflow_the_kill_is_final_unless_memory_retry_grows_the_request(
    airflow_env: dict[str, str],
    kill_dag_apps: list[str],
) -> None:
    """One DAG run, both tasks with retries=2: as written, the kill fails the task on its first try
    (AirflowFailException, one submission, the typed failure in its ``failure`` XCom); with
    ``memory_retry`` (factor 2, max 1 GiB) the second try asks for 1024 MiB and succeeds."""
    kill_dag_apps.append("tony_test_memory")
    before = own_runs(airflow_env)
    out = dags_test(airflow_env, "tony_test_memory", dagfile=TEST_DAGS)
    runs = {r for r in own_runs(airflow_env) - before if r[0] == "tony_test_memory"}
    tries = _tries(airflow_env, runs)
    assert tries == {"as_written": (1, "failed"), "memory_retry": (2, "success")}, (tries, out[-6000:])
    assert "AirflowFailException" in out and "Out of memory: raise roles.worker.memory" in out, out[-6000:]
    failure = _xcom(airflow_env, "as_written", "failure")
    assert (failure["kind"], failure["task_id"], failure["requested_mib"]) == ("out_of_memory", "worker:1", 512)
    assert failure["fix_field"] == "roles.worker.memory" and failure["peak_mib"] > 512, failure
    assert "the next try asks for roles.worker.memory = 1024 MiB" in out, out[-6000:]
    grown = re.findall(r"memory_retry: worker:1 was killed for memory in (application_\d+_\d+) .*? = 1024 MiB", out)
    assert len(grown) == 1, out[-6000:]
    result = result_of(out)  # the succeeded try's XCom: worker:1 ran with the grown request
    assert result["final_state"] == "SUCCEEDED" and result["application_id"] != grown[0]
    assert result["tasks"]["worker:1"]["usage"]["requested_memory_mib"] == 1024, result["tasks"]
    assert result["tasks"]["worker:1"]["usage"]["peak_rss_bytes"] > 600 << 20, result["tasks"]
    assert len(set(re.findall(r"submitted (application_\d+_\d+)", out))) == 3, "1 + 2 submissions"
