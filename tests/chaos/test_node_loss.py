"""A NodeManager that runs a task stops mid-training: real daemons, real HDFS, real checkpoints.

The workers count steps in TensorFlow's checkpoint layout without importing it
(``count_steps.py --plain``): what is under test is the AM's restart of the gang;
real TensorFlow strategies through a lost node are ``test_strategies.py``.

With ``max_restarts`` the AM replaces the whole gang inside the same YARN
application and every task resumes from the latest complete checkpoint. (With
``max_restarts: 0`` the job fails as retryable and Airflow's retry resumes it in
one new application: ``test_airflow_reattach.py``, through Airflow itself.)
Each test is bounded by its waits, a NodeManager it stopped is started again
before the next test (``every_daemon_up``), and its applications are killed by
the ``app_tag`` fixture.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.spec import JobSpec
from tests._cluster import devcluster, node_index
from tests._util import rm_apps, step_of, wait_until
from tests.chaos._support import (
    count_job,
    pick_victim,
    wait_resumed,
)
from tests.integration.dags.training_jobs import CHAOS_EVERY as EVERY
from tests.integration.dags.training_jobs import CHAOS_STEPS as STEPS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def start_and_pick_victim(
    tony_client: Any, cluster: Any, hdfs: Any, spec: JobSpec, ckpt: str, app_tag: str
) -> tuple[str, int, str]:
    """Submit, wait for a checkpoint on HDFS, and choose the node to lose."""
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    wait_until(lambda: remote_checkpoints(hdfs, ckpt), 300, "the first checkpoint upload")
    doc = tony_client.am_state(app_id)
    assert doc is not None
    return app_id, *pick_victim(cluster, app_id, doc)


def test_node_loss_restarts_the_gang_in_the_same_application(
    tony_client, cluster, hdfs, ckpt_dir, app_tag, stopped_nodes
) -> None:
    spec = count_job(ckpt_dir, max_restarts=2)
    app_id, victim, task_id = start_and_pick_victim(tony_client, cluster, hdfs, spec, ckpt_dir, app_tag)
    devcluster("stop-nm", str(victim))
    stopped_nodes.append(victim)

    # the AM notices, replaces the gang, and the new gang runs user code again
    doc = wait_resumed(tony_client, app_id)
    record = doc.restarts[0]
    assert doc.generation == 1 and record.failed_task in doc.tasks
    assert node_index(record.host or "") == victim, record
    assert all(node_index(t.host) != victim for t in doc.tasks.values() if t.host), "a task on the lost node"
    # the lost node's task came from the role's fallback service, not its own (pinned to the lost node)
    assert set(record.moved) == {task_id} and node_index(record.moved[task_id]) == victim, record
    assert record.resumed_step is not None and record.resumed_step % EVERY == 0, record
    # The AM let worker:0 finish uploading before it stopped the gang: the step it drained is the one resumed.
    assert record.drained_step == record.resumed_step, record
    # last_step is worker:0's step as the AM last heard it, and the script saves before it reports a
    # step: the newest checkpoint on HDFS is then at most one interval behind it. A negative difference
    # means worker:0 saved a newer one after the AM last heard from it, not that steps were skipped.
    assert record.last_step is not None
    redone = record.last_step - record.resumed_step
    assert redone < EVERY, f"{redone} steps redone: more than one checkpoint interval ({EVERY}): {record}"

    result = tony_client.wait(app_id, poll_interval=1.0)
    assert result.succeeded, result.diagnostics
    assert step_of(result.am_state, "worker:0") == STEPS
    assert [a["id"] for a in rm_apps(cluster.rm_url, tag=app_tag)] == [app_id], "a second application"
    print(
        f"\nnode {victim} lost: restart at {record.at:.1f}s, resumed at {record.resumed_at:.1f}s "
        f"({record.resumed_at - record.at:.1f}s later, {record.drain_seconds}s waiting for the upload) "
        f"from step {record.resumed_step}, {max(redone, 0)} steps redone"
    )
