"""The ``tony`` command on the real local cluster: submit, status, logs, validate --cluster.

The command runs as a subprocess (``python -m airflow_provider_tony``, the same
``main`` as the ``tony`` script), so this is what a person at a terminal gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from tests._util import assert_no_java_started, wait_until, without_java

pytestmark = pytest.mark.cluster

BEHAVE = Path(__file__).parent / "jobs" / "behave.py"


NO_JAVA = Path(tempfile.mkdtemp(prefix="tony-no-java-"))


def tony(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The command with no JDK visible (no JAVA_HOME, no java on PATH): it must need none."""
    env = without_java(dict(os.environ), NO_JAVA)
    out = subprocess.run(
        [sys.executable, "-m", "airflow_provider_tony", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert_no_java_started(env)
    return out


def write_job(tmp_path: Path, tag: str, python: str, **role: object) -> Path:
    # A relative script beside the YAML: the CLI resolves it against the file's folder.
    (tmp_path / "behave.py").write_text(BEHAVE.read_text())
    doc = {
        "name": "pytest-cli",
        "tags": [tag],
        "python": {"interpreter": python},
        "roles": {"worker": {"instances": 1, "memory": "256 MiB", "script": "behave.py", "args": ["ok"], **role}},
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 10,
        "registration_timeout": 120,
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_submit_follows_to_success_then_status_and_logs(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    job = write_job(tmp_path, app_tag, python_exe)
    submitted = tony("submit", str(job), "--poll-interval", "0.5")
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    app_id = submitted.stdout.splitlines()[0]
    assert app_id.startswith("application_")
    assert f"{app_id} SUCCEEDED" in submitted.stdout

    status = tony("status", app_id)
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)  # the AM is gone: YARN's report
    assert (report["app_id"], report["final_status"]) == (app_id, "SUCCEEDED")
    assert app_tag in report["tags"]

    # Right after the end, a NodeManager may not list the finished container's logs yet.
    def worker_log() -> subprocess.CompletedProcess[str] | None:
        logs = tony("logs", app_id, "--file", "worker.log")
        return logs if logs.returncode == 0 and "worker.log" in logs.stdout else None

    logs = wait_until(worker_log, 60, "tony logs to print the finished worker's log")
    assert "==== " in logs.stdout


def test_submit_of_a_failing_job_exits_1(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    job = write_job(tmp_path, app_tag, python_exe, args=["exit", "--code", "3"])
    submitted = tony("submit", str(job), "--poll-interval", "0.5")
    assert submitted.returncode == 1, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    assert "exited with code 3" in submitted.stdout


def test_validate_against_the_cluster_names_the_limit(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    job = write_job(tmp_path, app_tag, python_exe, memory="4 TiB")
    offline = tony("validate", str(job))
    assert offline.returncode == 0, offline.stderr  # the model allows it; only the cluster knows its limit
    checked = tony("validate", str(job), "--cluster")
    assert checked.returncode == 2
    assert "roles.worker.memory" in checked.stderr and "maximum-allocation-mb" in checked.stderr


def test_submit_detached_then_kill_with_no_jdk(tmp_path: Path, app_tag: str, python_exe: str) -> None:
    """``tony submit --detach`` then ``tony kill``: both over the RM's REST API, with no java anywhere (tony())."""
    job = write_job(tmp_path, app_tag, python_exe, args=["sleep", "--seconds", "600"])
    submitted = tony("submit", str(job), "--detach")
    assert submitted.returncode == 0, submitted.stdout[-3000:] + submitted.stderr[-3000:]
    app_id = submitted.stdout.split()[0]
    assert app_id.startswith("application_")
    killed = tony("kill", app_id)
    assert killed.returncode == 0, killed.stderr
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        report = wait_until(lambda: (r := client.report(app_id)).state == "KILLED" and r, 120, f"{app_id} killed")
    assert report.final_status == "KILLED"
