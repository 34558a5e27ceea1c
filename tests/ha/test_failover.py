"""Failover on the HA profile: real ZooKeeper elections, real standbys, real TensorFlow.

- rm1 dead before anything is submitted: ``tony submit`` and the operator (polling and
  deferrable mode, through ``airflow dags test``) submit through rm2; the active RM is then
  SIGKILLed while the operator (or its trigger) follows a MultiWorkerMirroredStrategy job with
  checkpoints: the same application finishes, the task succeeds on its first (only) try, one
  submission.
- the active NameNode SIGKILLed mid-job: the containers' WebHDFS fails over, checkpoint uploads
  go on after the failover, the model is published, one application.

Each test waits on conditions with timeouts; the killed daemon comes back before the next test
(``every_daemon_up``) and its applications are killed by ``app_tag`` / the run's tags.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests._airflow import dag_tag, dags_test, result_of, run_state
from tests._ha import ha, ha_apps, the_active_namenode_killed_mid_job
from tests._util import step_of, wait_until
from tests.integration.dags.training_jobs import STRATEGY_EVERY

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

DAG_FILE = Path(__file__).parent / "dags" / "tony_ha_dags.py"
COUNT_STEPS = Path(__file__).resolve().parents[1] / "integration" / "jobs" / "count_steps.py"
TONY = str(Path(sys.executable).parent / "tony")


def kill_rm1() -> None:
    """SIGKILL rm1 whatever its state, and wait until rm2 is the active RM."""
    home = Path(os.environ["TONY_DEVCLUSTER_HOME"])
    pid = int((home / "run" / "resourcemanager-rm1.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: active_or_none("rm") == "rm2" or None, 120, "rm2 to become the active RM")


def active_or_none(kind: str) -> str | None:
    """The active RM/NameNode's id, or None while none is active (an election under way)."""
    try:
        return ha("active", kind)
    except RuntimeError:
        return None


@pytest.mark.parametrize("deferrable", [False, True], ids=["polling", "deferrable"])
def test_rm1_dead_then_the_active_rm_killed_mid_job_followed_by_the_operator(
    cluster, airflow_env, app_tag, tmp_path, deferrable: bool
) -> None:
    kill_rm1()
    # (a) the command line submits through rm2 (rm1, dead, is first in TONY_RM_URL)
    job_file = tmp_path / "small.yaml"
    job_file.write_text(
        "roles:\n  worker:\n    instances: 1\n    memory: 1 GiB\n"
        f"    script: {COUNT_STEPS}\n    args: ['--steps', '3', '--every', '1', '--plain']\n"
        f"python:\n  interpreter: {sys.executable}\n"
    )
    cli = subprocess.run([TONY, "submit", str(job_file), "--tag", app_tag], capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    submitted = [a["id"] for a in ha_apps(app_tag)]
    assert len(submitted) == 1 and cli.stdout.startswith(submitted[0]), (submitted, cli.stdout[:500])

    # (b) the operator submits through rm2 too, then follows across a failover back to rm1
    env = {**airflow_env, "AIRFLOW__CORE__DAGS_FOLDER": str(DAG_FILE.parent)}
    since_ms = time.time() * 1000

    def dag_apps(states: str | None = None) -> list[dict[str, Any]]:
        """This run's applications (a kept cluster may hold an earlier session's with the same DAG tag)."""
        return [a for a in ha_apps(dag_tag("tony_ha_follow"), states=states) if a["startedTime"] >= since_ms]

    output: list[str] = []
    runner = threading.Thread(
        target=lambda: output.append(
            dags_test(env, "tony_ha_follow", dagfile=DAG_FILE, deferrable=deferrable, timeout=900)
        ),
        name="airflow-dags-test",
        daemon=True,
    )
    runner.start()
    try:
        running = wait_until(lambda: dag_apps("RUNNING") or None, 300, "the DAG's application to run")
        app_id = running[0]["id"]
        ha("up")  # rm1 back, as the standby
        from airflow_provider_tony.yarn.client import TonyClient

        with TonyClient.from_env() as client:
            wait_until(
                lambda: step_of(client.am_state(app_id), "worker:0") >= 2 * STRATEGY_EVERY or None,
                600,  # TensorFlow's start on a loaded 2-core machine takes minutes
                "training past its first checkpoints",
            )
            assert ha("failover", "rm") == "rm1"  # rm2, the active one, SIGKILLed
            # mid-job: rm1 recovered the application from ZooKeeper (ACCEPTED until its AM, still
            # running, registers again with rm1) and it runs on
            wait_until(lambda: client.report(app_id).state == "RUNNING" or None, 120, "the AM to re-register with rm1")
            runner.join(timeout=900)
            assert output, "airflow dags test did not end"
            assert run_state(output[0]) == "success", output[0][-4000:]
            # the mode really was the one asked for (the trigger follows in deferrable mode)
            assert ("Pausing task as DEFERRED" in output[0] or "TonyTrigger" in output[0]) == deferrable
            result = result_of(output[0])
            assert result["application_id"] == app_id, result
            assert [a["id"] for a in dag_apps()] == [app_id], "a second submission"
            report = client.report(app_id)
            assert report.final_status == "SUCCEEDED", report
    finally:
        with_left = dag_apps("NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING")
        if with_left:
            from airflow_provider_tony.yarn.client import TonyClient

            with TonyClient.from_env() as client:
                for app in with_left:
                    client.kill(app["id"])


def test_the_active_namenode_killed_mid_job_uploads_go_on_and_the_model_is_published(
    tony_client, hdfs, ckpt_dir, app_tag
) -> None:
    the_active_namenode_killed_mid_job(tony_client, hdfs, ckpt_dir, "pytest-ha-nn", app_tag)
