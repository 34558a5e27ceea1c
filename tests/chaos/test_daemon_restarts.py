"""Daemons restart under a running job: the ResourceManager (work-preserving) and the NameNode.

Neither is a task failure: the job keeps its containers, nothing is restarted
or resubmitted, and the follower that watched it before the outage sees it
finish. Each test starts the daemon again (``devcluster up`` starts what is
missing) whatever happens.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.yarn.follower import JobResult
from tests._cluster import devcluster
from tests._util import rm_apps, step_of, wait_until
from tests.chaos._support import (
    count_job,
)
from tests.integration.dags.training_jobs import CHAOS_EVERY as EVERY
from tests.integration.dags.training_jobs import CHAOS_STEPS as STEPS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def follow_in_background(tony_client: Any, app_id: str) -> tuple[threading.Thread, list[JobResult]]:
    """The follow loop the operator runs, started before the outage."""
    results: list[JobResult] = []
    thread = threading.Thread(
        target=lambda: results.append(tony_client.wait(app_id, poll_interval=1.0)), name="follower", daemon=True
    )
    thread.start()
    return thread, results


def newest(hdfs: Any, ckpt: str) -> int:
    steps = remote_checkpoints(hdfs, ckpt)
    return steps[-1] if steps else -1


def test_resourcemanager_restart_keeps_the_job_and_its_follower(tony_client, cluster, hdfs, ckpt_dir, app_tag) -> None:
    app_id = tony_client.submit(count_job(ckpt_dir, max_restarts=0), extra_tags=[app_tag])
    first = wait_until(
        lambda: newest(hdfs, ckpt_dir) if newest(hdfs, ckpt_dir) >= 0 else None, 300, "the first checkpoint upload"
    )
    thread, results = follow_in_background(tony_client, app_id)
    devcluster("stop", "resourcemanager")
    try:
        # training (and its uploads to HDFS) goes on without the RM
        wait_until(lambda: newest(hdfs, ckpt_dir) >= first + 2 * EVERY, 180, "checkpoints while the RM is down")
    finally:
        devcluster("up")
    thread.join(timeout=600)
    assert results, "the follower did not come back with a result"
    result = results[0]
    assert result.succeeded, result.diagnostics
    assert step_of(result.am_state, "worker:0") == STEPS
    assert result.am_state is not None and result.am_state.restarts == []
    assert [a["id"] for a in rm_apps(cluster.rm_url, tag=app_tag)] == [app_id], "resubmitted"


def test_namenode_restart_mid_job_uploads_retry_and_the_job_succeeds(
    tony_client, cluster, hdfs, ckpt_dir, app_tag
) -> None:
    app_id = tony_client.submit(count_job(ckpt_dir, max_restarts=0), extra_tags=[app_tag])
    wait_until(lambda: remote_checkpoints(hdfs, ckpt_dir), 300, "the first checkpoint upload")
    devcluster("stop", "namenode")
    try:
        at_stop = step_of(tony_client.am_state(app_id), "worker:0")
        wait_until(
            lambda: step_of(tony_client.am_state(app_id), "worker:0") >= at_stop + 2 * EVERY,
            180,
            "training to go on without HDFS",
        )
    finally:
        devcluster("up")
    result = tony_client.wait(app_id, poll_interval=1.0)
    assert result.succeeded, result.diagnostics
    assert newest(hdfs, ckpt_dir) == STEPS, "the checkpoints missed during the outage were not uploaded after"
    assert [a["id"] for a in rm_apps(cluster.rm_url, tag=app_tag)] == [app_id]
