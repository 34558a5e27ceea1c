"""YARN preemption on the local cluster: the capacity scheduler takes a TonY job's nodes for a
higher-priority queue, and the job restarts in the same application without spending
``max_restarts``, waits for the capacity and resumes from its HDFS checkpoint.

The cluster's ``default`` queue is guaranteed half of it and ``urgent`` a quarter, and the
ResourceManager's preemption monitor runs every second (devcluster). The TonY job, in
``default``, fills the whole cluster but for room for one small application master; a plain
skein application in ``urgent`` then asks for a container within ``urgent``'s guarantee, so
YARN preempts one of the job's workers. The job runs with ``max_restarts: 0`` and a short
registration timeout: the restart must not count, and the new gang, which YARN cannot
place while ``urgent`` holds its share, must wait past that timeout without failing, then
resume once the other application ends.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.messages import AppState, StateDocument
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.yarn_exit import PREEMPTED_DIAGNOSTICS
from tests._util import get_json, rm_apps, wait_until
from tests.integration.dags.training_jobs import count_steps_job

# It fills the cluster and needs its own containers to be the ones YARN preempts: no test of the
# other lane of make test-open runs beside it (tests/_lanes.py).
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.whole_cluster]

# STEPS * SLEEP keeps the job training well past the preemption, which comes some 20 s after the
# first checkpoint (the urgent application starts, the monitor acts, the container is killed).
STEPS, EVERY, SLEEP = 400, 10, 0.2
REGISTRATION_TIMEOUT = 30.0
AM_MB = 512  # the TonY job's AM (JobSpec's default) and the urgent application's skein AM
MAX_CONTAINER_MB = 8192  # devcluster's maximum allocation
URGENT_SHARE = 0.25  # queue urgent's guaranteed capacity (devcluster/conf/capacity-scheduler.xml)


@pytest.fixture
def hdfs(cluster: Any) -> Any:
    from hdfs import InsecureClient

    return InsecureClient(cluster.webhdfs_url, user=cluster.user)


@pytest.fixture
def ckpt_dir(hdfs: Any) -> Iterator[str]:
    path = f"/tmp/pytest-preempt-{uuid.uuid4().hex[:8]}"
    yield path
    hdfs.delete(path, recursive=True)


def sizes(total_mb: int) -> tuple[int, int, int]:
    """(workers, worker MiB, urgent container MiB): the job leaves room for the urgent AM only."""
    room = total_mb - 2 * AM_MB
    workers = -(-room // MAX_CONTAINER_MB)
    worker_mb = room // workers // 128 * 128
    urgent_mb = min(2048, int(total_mb * URGENT_SHARE) - AM_MB) // 128 * 128
    free = total_mb - AM_MB - workers * worker_mb - AM_MB  # left once both AMs run
    assert urgent_mb > free, (total_mb, workers, worker_mb, urgent_mb)
    return workers, worker_mb, urgent_mb


def urgent_app(tag: str, memory_mb: int) -> Any:
    import skein

    return skein.ApplicationSpec(
        name="pytest-urgent",
        queue="urgent",
        tags=[tag],
        master=skein.Master(resources=skein.Resources(memory=AM_MB, vcores=1)),
        services={
            "hog": skein.Service(resources=skein.Resources(memory=memory_mb, vcores=1), script="sleep 900"),
        },
    )


def test_a_preempted_job_restarts_without_spending_max_restarts_and_resumes_when_capacity_returns(
    tony_client: Any, skein_client: Any, cluster: Any, hdfs: Any, ckpt_dir: str, app_tag: str
) -> None:
    total = int(get_json(f"{cluster.rm_url}/ws/v1/cluster/metrics")["clusterMetrics"]["totalMB"])
    workers, worker_mb, urgent_mb = sizes(total)
    spec = JobSpec.from_dict(
        count_steps_job(
            ["--steps", str(STEPS), "--every", str(EVERY), "--sleep", str(SLEEP)],
            instances=workers,
            memory=f"{worker_mb} MiB",
            heartbeat_interval=1.0,
            heartbeat_timeout=30,
            checkpoint={"dir": ckpt_dir, "poll_interval": 0.5, "keep": 50},
            name="pytest-preempted",
            queue="default",
            max_restarts=0,
            registration_timeout=REGISTRATION_TIMEOUT,
            plain=True,  # what is under test is YARN's preemption and the AM's restart, not TensorFlow
        )
    )
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    wait_until(lambda: remote_checkpoints(hdfs, ckpt_dir), 300, "the first checkpoint upload")

    urgent = skein_client.submit(urgent_app(app_tag, urgent_mb))

    def restarting() -> StateDocument | None:
        doc = tony_client.am_state(app_id)
        assert doc is None or not doc.final, f"the job ended instead of restarting: {doc and doc.diagnostics}"
        return doc if doc is not None and doc.restarts else None

    doc = wait_until(restarting, 180, "a worker preempted and the gang restarted")
    record = doc.restarts[0]
    assert record.preempted, record
    assert PREEMPTED_DIAGNOSTICS in record.reason, record

    # urgent keeps its share: the new gang waits for capacity past the registration timeout
    def waited_past_timeout() -> StateDocument | None:
        doc = tony_client.am_state(app_id)
        assert doc is not None and not doc.final, f"the waiting gang was failed: {doc and doc.diagnostics}"
        return doc if doc.elapsed > record.at + REGISTRATION_TIMEOUT + 10 else None

    doc = wait_until(waited_past_timeout, REGISTRATION_TIMEOUT + 120, "the wait for capacity past the timeout")
    assert doc.app_state == AppState.RESTARTING.value and doc.generation == 1, doc.app_state
    assert any("not allocated yet" in e for e in doc.events), doc.events[-10:]
    assert skein_client.application_report(urgent).state == "RUNNING"

    skein_client.kill_application(urgent)
    capacity_back = time.time()
    result = tony_client.wait(app_id, poll_interval=1.0)
    assert result.succeeded, result.diagnostics
    final = result.am_state
    assert final is not None and final.generation == 1 and len(final.restarts) == 1
    record = final.restarts[0]
    assert record.preempted and record.resumed_step is not None and record.resumed_step >= EVERY, record
    assert record.resumed_step % EVERY == 0, record
    worker0 = final.task("worker:0")
    assert worker0 is not None and worker0.progress is not None and worker0.progress.step == STEPS
    # trained from the checkpoint on, not from scratch
    assert worker0.progress.metrics.get("start_step") == record.resumed_step, worker0.progress
    mine = [a["id"] for a in rm_apps(cluster.rm_url, tag=app_tag) if a["name"] == spec.name]
    assert mine == [app_id], "a second application"

    assert record.at_wall is not None and record.resumed_at is not None
    resumed_wall = record.at_wall + (record.resumed_at - record.at)
    redone = (record.last_step or 0) - record.resumed_step
    print(
        f"\npreempted at {record.at:.1f}s (step {record.last_step}); new gang resumed at "
        f"{record.resumed_at:.1f}s from step {record.resumed_step} ({max(redone, 0)} steps redone), "
        f"{resumed_wall - capacity_back:.1f}s after the urgent application was killed; "
        f"drained step {record.drained_step} in {record.drain_seconds}s"
    )
