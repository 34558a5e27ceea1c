"""What the two HA suites share (``tests/ha``, ``tests/ha_secure``): the profile's commands, its
daemons brought back between tests, and the MultiWorkerMirroredStrategy job they fail over under.

Not a test module: plain helpers, imported by both suites' conftests and tests.
"""

from __future__ import annotations

import os
import subprocess
import sys

from airflow_provider_tony.runtime.spec import JobSpec
from tests._cluster import DEVCLUSTER, devcluster
from tests.integration.dags.training_jobs import strategy_job


def ha(*args: str, timeout: float = 300) -> str:
    """``devcluster.py ARGS`` on this process's HA cluster; its stdout (``active``/``failover`` print an id)."""
    proc = subprocess.run([sys.executable, str(DEVCLUSTER), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"devcluster {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout.strip()


def down_unless_kept() -> None:
    """The session's end: the cluster goes down, unless ``TONY_HA_KEEP=1`` keeps it between local runs."""
    if os.environ.get("TONY_HA_KEEP") != "1":
        devcluster("down")


def every_daemon_back() -> None:
    """A daemon an earlier test killed comes back (an RM or NameNode as the standby) before the next."""
    if subprocess.run([sys.executable, str(DEVCLUSTER), "status"], capture_output=True, timeout=60).returncode:
        devcluster("up")


def mwms_job(ckpt: str, model_dir: str, name: str) -> JobSpec:
    """Two MultiWorkerMirroredStrategy workers with checkpoints, on the profile's one NodeManager."""
    job = strategy_job("mwms-loop", max_restarts=0, ckpt=ckpt, model_dir=model_dir, name=name)
    worker = job["roles"]["worker"]
    worker.pop("placement", None)  # one NodeManager: both workers on it
    worker["instances"] = 2
    return JobSpec.from_dict(job)
