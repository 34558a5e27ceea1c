"""What the two HA suites share (``tests/ha``, ``tests/ha_secure``): the profile's commands, its
daemons brought back between tests, the MultiWorkerMirroredStrategy job they fail over under, and
the NameNode failover both profiles go through.

Not a test module: plain helpers, imported by both suites' conftests and tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.spec import JobSpec
from tests._cluster import DEVCLUSTER, devcluster
from tests._util import wait_until
from tests.integration.dags.training_jobs import STRATEGY_EVERY, STRATEGY_STEPS, strategy_job


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


def the_active_namenode_killed_mid_job(client: Any, hdfs: Any, ckpt: str, name: str, tag: str) -> None:
    """Submit the MWMS job, SIGKILL the active NameNode after its first checkpoint upload: uploads go
    on over the other NameNode, the job finishes with every checkpoint and its model published, in
    one application and without a restart."""
    model_dir = f"{ckpt}-model"
    app_id = client.submit(mwms_job(ckpt, model_dir, name), extra_tags=[tag])
    first = wait_until(lambda: remote_checkpoints(hdfs, ckpt), 300, "the first checkpoint on HDFS")[-1]
    killed = ha("active", "nn")
    now_active = ha("failover", "nn")
    assert now_active != killed
    wait_until(
        lambda: remote_checkpoints(hdfs, ckpt)[-1] >= first + 2 * STRATEGY_EVERY or None,
        300,
        f"checkpoint uploads after the failover to {now_active}",
    )
    result = client.wait(app_id, poll_interval=1.0, emit=lambda _: None)
    assert result.succeeded, result.diagnostics
    assert remote_checkpoints(hdfs, ckpt)[-1] == STRATEGY_STEPS
    assert hdfs.status(model_dir, strict=False) is not None, "the model was not published"
    assert [a.app_id for a in client.find_by_tags([tag], active_only=False)] == [app_id], "a second application"
    assert result.am_state is not None and result.am_state.restarts == []


def rm_urls() -> list[str]:
    return os.environ["TONY_RM_URL"].split(",")


def active_rm_url() -> str:
    """The web address of the RM that is active now."""
    return rm_urls()[int(ha("active", "rm").removeprefix("rm")) - 1]


def ha_apps(tag: str, states: str | None = None) -> list[dict[str, Any]]:
    """The applications with ``tag``, from whichever RM is active."""
    from tests._util import rm_apps

    return rm_apps(active_rm_url(), states=states, tag=tag)
