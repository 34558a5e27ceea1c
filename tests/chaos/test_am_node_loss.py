"""The AM's own node dies: the follow names the lost node, retryable, not a hung AM.

A NodeManager SIGKILLed with its containers (``devcluster stop-nm I --lose``)
takes the AM with it, and the ResourceManager notices only when the node's
liveness expires (60 s here, ten minutes on a production cluster). Until then
YARN says RUNNING and the AM's document simply stops: only the follower's
unreachable-AM rule (``yarn/am_node.py``) tells this from a hung AM. The
stale-AM timeout is set far above that rule's 15 s here, so a verdict of
``am_node_lost`` cannot have come from the stale rule. A resubmission of the
same job (what Airflow's retry does) then resumes from the checkpoint the lost
application left on HDFS.
"""

from __future__ import annotations

import time

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.yarn.follower import KIND_AM_NODE_LOST, Follower
from tests._cluster import devcluster
from tests._util import wait_until
from tests.chaos._support import (
    am_node,
    count_job,
)
from tests.integration.dags.training_jobs import CHAOS_EVERY, CHAOS_STEPS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: Far above the unreachable-AM rule (15 s by default): a hung-AM verdict would mean the rule missed.
STALE_S = 300.0


def test_the_ams_node_lost_is_named_retryable_and_a_resubmission_resumes_from_the_checkpoint(
    tony_client, cluster, hdfs, ckpt_dir, app_tag, stopped_nodes
) -> None:
    spec = count_job(ckpt_dir, max_restarts=0)
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    lines: list[str] = []
    follower = Follower(app_id, startup_timeout=600.0, am_stale_timeout=STALE_S)

    def first_checkpoint() -> object:
        assert tony_client.poll(follower, emit=lines.append) is None, lines  # followed all along
        return remote_checkpoints(hdfs, ckpt_dir)

    wait_until(first_checkpoint, 300, "the first checkpoint upload", interval=2.0)
    victim = am_node(cluster, app_id)
    devcluster("stop-nm", str(victim), "--lose")
    stopped_nodes.append(victim)
    lost_at = time.monotonic()

    result = wait_until(lambda: tony_client.poll(follower, emit=lines.append), 240, "the follow's verdict", 2.0)
    took = time.monotonic() - lost_at
    failure = result.failure
    assert failure is not None and failure.kind == KIND_AM_NODE_LOST, (result.diagnostics, lines[-5:])
    assert failure.retryable and result.retryable
    node_id = failure.message.split("node ", 1)[1].split(" ", 1)[0]
    port_of_victim = "localhost" if victim == 0 else f"127.0.0.{victim + 1}"
    assert node_id.startswith(port_of_victim + ":"), failure.message
    assert result.yarn_state == "KILLED"

    # What Airflow's retry does: the same job again, resuming from the lost application's checkpoint.
    again = tony_client.submit(spec, extra_tags=[app_tag])
    second = tony_client.wait(again, poll_interval=2.0)
    assert second.succeeded, second.diagnostics
    worker = second.am_state.task("worker:0") if second.am_state is not None else None
    assert worker is not None and worker.restored_step is not None, second.am_state
    assert worker.restored_step >= CHAOS_EVERY and worker.restored_step % CHAOS_EVERY == 0, worker
    assert worker.progress is not None and worker.progress.step == CHAOS_STEPS, worker
    print(f"\nAM node {victim} lost: verdict {took:.1f}s later ({failure.message}); resumed at {worker.restored_step}")
