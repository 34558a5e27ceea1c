"""Real distributed TensorFlow survives a lost node: every strategy users run, a node SIGKILLed mid-training.

Under MultiWorkerMirroredStrategy the survivors' collectives fail within
seconds of a peer's loss and they exit 1, before the AM's heartbeat timeout
declares the lost task; the AM must name the lost task as the root cause and
restart the gang (not fail the job as a bug in the training code). Each test
runs ``jobs/strategies.py`` (real TensorFlow, checkpoints every ``EVERY``
steps on HDFS through the executor), waits for the first checkpoint, then
SIGKILLs a worker's NodeManager and its containers (``devcluster stop-nm I
--lose``: a machine failure, the ResourceManager learns of it only at the
node's expiry) and asserts: one application, the restart record names the
lost task as the cause, the new gang resumed no more than one checkpoint
interval behind the last step the old gang reached, the job succeeded and
published its model.
"""

from __future__ import annotations

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.spec import JobSpec
from tests._cluster import devcluster, node_index
from tests._util import rm_apps, wait_until
from tests.chaos._support import (
    tasks_on,
    victim_of,
    wait_resumed,
)
from tests.integration.dags.training_jobs import STRATEGY_EVERY, STRATEGY_MODES, STRATEGY_STEPS, strategy_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

STEPS, EVERY, MODES = STRATEGY_STEPS, STRATEGY_EVERY, STRATEGY_MODES


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_lost_node_restarts_real_training_in_the_same_application(
    mode, tony_client, cluster, hdfs, ckpt_dir, app_tag, stopped_nodes
) -> None:
    uploader, _ = MODES[mode]
    model_dir = f"{ckpt_dir}-model"
    spec = JobSpec.from_dict(
        strategy_job(mode, max_restarts=1, ckpt=ckpt_dir, model_dir=model_dir, name=f"pytest-{mode}")
    )
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    try:
        wait_until(lambda: remote_checkpoints(hdfs, ckpt_dir), 300, "the first checkpoint on HDFS")
        doc = tony_client.am_state(app_id)
        assert doc is not None
        victim, lost_task = victim_of(cluster, app_id, doc, uploader)
        lost_tasks = tasks_on(doc, victim)
        devcluster("stop-nm", str(victim), "--lose")
        stopped_nodes.append(victim)
        doc = wait_resumed(tony_client, app_id)
        record = doc.restarts[0]
        # The root cause is a task of the lost node (the worker, or a ps beside it), not a
        # survivor whose collective failed first.
        assert record.failed_task in lost_tasks and record.cause == "lost", (lost_tasks, record)
        assert node_index(record.host or "") == victim, record
        assert all(node_index(t.host) != victim for t in doc.tasks.values() if t.host), "a task on the lost node"
        # the lost worker's pinned service pointed at the lost node: its new container came from the fallback
        assert lost_task in record.moved and set(record.moved) <= lost_tasks, (lost_tasks, record)
        assert all(node_index(host) == victim for host in record.moved.values()), record
        # Resumed from HDFS, at most one checkpoint interval behind the step the old gang reached.
        # BackupAndRestore numbers its saves (the nth at step n * EVERY); the other modes name them by step.
        assert record.resumed_step is not None, record
        resumed_step = record.resumed_step * EVERY if mode == "keras-fit" else record.resumed_step
        assert record.last_step is not None and 0 <= record.last_step - resumed_step <= EVERY, record
        # The uploader was alive: stopped and flushed (or it ended on its own first, its final flush
        # done, and its exit record says what it left on HDFS); that is what resumed.
        if record.drain_seconds is not None:
            assert record.drained_step == record.resumed_step, record

        result = tony_client.wait(app_id, poll_interval=1.0)
        assert result.succeeded, result.diagnostics
        task = result.am_state.task(uploader) if result.am_state else None
        assert task is not None and task.progress is not None and task.progress.step == STEPS, task
        assert [a["id"] for a in rm_apps(cluster.rm_url, tag=app_tag)] == [app_id], "a second application"
        assert hdfs.status(model_dir, strict=False) is not None, "the model was not published"
        print(
            f"\n{mode}: node {victim} ({lost_task}) lost: restart at {record.at:.1f}s, resumed at "
            f"{record.resumed_at:.1f}s from step {resumed_step} (old gang reached {record.last_step}; "
            f"consequences {record.consequences})"
        )
    finally:
        hdfs.delete(model_dir, recursive=True)
