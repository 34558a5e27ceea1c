"""Real PyTorch DDP survives a lost node: a rank's machine SIGKILLed mid-training, four-node cluster.

Three DDP ranks (``jobs/torch_ddp.py``: gloo, a checksum of the parameters
all-gathered after every step, rank 0 saving ``ckpt-<step>.pt`` every
``TORCH_EVERY`` steps) are spread one per unlabelled node. Past the first
checkpoint the test SIGKILLs the NodeManager of a rank that is neither rank 0
(worker:0, whose executor uploads the checkpoints) nor beside the AM, with its
containers (``devcluster stop-nm I --lose``). The survivors' collectives fail
within seconds with gloo's ``Connection closed by peer`` (a consequence,
``runtime/failure.py``), long before the heartbeat timeout declares the lost
rank; the AM must still name the lost rank as the root cause:

- ``max_restarts: 1``: the AM restarts the gang in the same application and
  it resumes at most one checkpoint interval behind (the shape of
  ``test_strategies.py`` for TensorFlow);
- ``max_restarts: 0`` under Airflow with ``retries: 1``: the try fails as
  retryable and the retry resumes from the checkpoint in one new application
  (``test_airflow_reattach.py``'s scenario, shared with TensorFlow's).
"""

from __future__ import annotations

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.spec import JobSpec
from tests._cluster import devcluster, node_index
from tests._util import rm_apps, step_of, wait_until
from tests.chaos._support import (
    retry_resumes_in_one_new_application,
    tasks_on,
    victim_of,
    wait_resumed,
)
from tests.integration.dags.training_jobs import TORCH_EVERY as EVERY
from tests.integration.dags.training_jobs import TORCH_STEPS as STEPS
from tests.integration.dags.training_jobs import torch_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

UPLOADER = "worker:0"  # rank 0: it saves the checkpoints, its executor uploads them


def test_a_lost_node_restarts_ddp_in_the_same_application(
    tony_client, cluster, hdfs, ckpt_dir, app_tag, stopped_nodes
) -> None:
    model_dir = f"{ckpt_dir}-model"
    spec = JobSpec.from_dict(torch_job(max_restarts=1, ckpt=ckpt_dir, model_dir=model_dir, name="pytest-torch-ddp"))
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    try:
        wait_until(lambda: remote_checkpoints(hdfs, ckpt_dir), 300, "the first checkpoint on HDFS")
        doc = tony_client.am_state(app_id)
        assert doc is not None
        victim, lost_task = victim_of(cluster, app_id, doc, UPLOADER)
        lost_tasks, lost_at = tasks_on(doc, victim), step_of(doc, UPLOADER)
        devcluster("stop-nm", str(victim), "--lose")
        stopped_nodes.append(victim)
        doc = wait_resumed(tony_client, app_id)
        record = doc.restarts[0]
        # The lost rank is the root cause; the survivors whose gloo collectives failed first are its
        # consequences, not the cause (nor a bug in the training code that fails the job). One still
        # inside a collective when the verdict came is stopped with the gang and is not listed.
        assert record.failed_task == lost_task and record.cause == "lost", record
        assert record.consequences and set(record.consequences) <= set(doc.tasks) - lost_tasks, record
        assert node_index(record.host or "") == victim, record
        assert all(node_index(t.host) != victim for t in doc.tasks.values() if t.host), "a rank on the lost node"
        assert set(record.moved) == {lost_task} and node_index(record.moved[lost_task]) == victim, record
        # Resumed from HDFS, at most one checkpoint interval behind the step rank 0 had reached.
        assert record.resumed_step is not None and record.resumed_step % EVERY == 0, record
        assert record.resumed_step >= lost_at - EVERY, f"resumed at {record.resumed_step}, lost at {lost_at}"
        assert record.last_step is not None and record.last_step - record.resumed_step <= EVERY, record

        result = tony_client.wait(app_id, poll_interval=1.0)
        # Success means every rank agreed on the parameters' checksum after every step (else exit 3).
        assert result.succeeded, result.diagnostics
        uploader = result.am_state.task(UPLOADER) if result.am_state else None
        assert uploader is not None and uploader.restored_step == record.resumed_step, uploader
        # rank 0 trained on from the checkpoint the executor restored, not from scratch
        assert uploader.progress is not None and uploader.progress.step == STEPS, uploader
        assert uploader.progress.metrics.get("checked") == STEPS - record.resumed_step, uploader.progress
        assert [a["id"] for a in rm_apps(cluster.rm_url, tag=app_tag)] == [app_id], "a second application"
        assert hdfs.status(f"{model_dir}/model.pt", strict=False) is not None, "the model was not published"
        print(
            f"\nDDP: node {victim} ({lost_task}) lost at step {lost_at}: restart at {record.at:.1f}s, resumed at "
            f"{record.resumed_at:.1f}s from step {record.resumed_step} (old gang reached {record.last_step}; "
            f"consequences {record.consequences}; {record.reason})"
        )
    finally:
        hdfs.delete(model_dir, recursive=True)


def test_without_restarts_airflows_retry_resumes_ddp(airflow_env, cluster, stopped_nodes) -> None:
    """``max_restarts: 0``, ``retries: 1``: gloo's survivors fail at once, yet the try fails as
    retryable naming the lost rank, and the retry resumes from the checkpoint in one new application."""
    result, _ = retry_resumes_in_one_new_application(
        airflow_env, cluster, stopped_nodes, "tony_chaos_torch_retry", EVERY
    )
    # the retry trained to the end from its checkpoint, every rank agreeing on the checksum at each step
    assert (
        result["step"] == STEPS
        and result["metrics"].get("checked") == STEPS - result["tasks"][UPLOADER]["restored_step"]
    ), result
