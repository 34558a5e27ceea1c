"""PyTorch jobs get TensorFlow's guarantees (issue 37): real YARN, real HDFS, real torch (gloo on CPU).

Three applications prove it (each costs half a minute or more, so they are combined):

- a retry resumes: the first try of a 2-worker DDP job (``jobs/torch_ddp.py``) exits 75 on
  rank 0 after its executor uploaded ``ckpt-<step>.pt`` to ``checkpoint.dir``; the second try
  (``attempt=2``, as Airflow's retry submits it) restores it, resumes from that step with every
  rank agreeing on the parameters after each step, publishes its model through the quality gate
  on ``accuracy`` and mirrors its ``torch.utils.tensorboard`` events to HDFS;
- a script's own ValueError fails the job at once, not retryable, even with restarts left.

Memory: ``import torch`` alone is about 0.9 GiB of RSS (YARN's pmem check counts it), and
``torch.utils.tensorboard`` imports TensorFlow when it is installed (about 1.5 GiB), so a worker
asks for 2 GiB.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.conclusion import conclude
from airflow_provider_tony.runtime.checkpoint import MANIFEST, remote_checkpoints, remote_name
from airflow_provider_tony.runtime.spec import JobSpec
from tests.integration._runtime import job

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TORCH_DDP = str(Path(__file__).parent / "jobs" / "torch_ddp.py")
STEPS, EVERY, FAIL_AT = 20, 5, 12
LAST_SAVED = FAIL_AT - FAIL_AT % EVERY  # the newest checkpoint the first try saved before it failed


@pytest.fixture
def hdfs(cluster: Any) -> Any:
    from hdfs import InsecureClient

    return InsecureClient(cluster.webhdfs_url, user=cluster.user)


@pytest.fixture
def base(hdfs: Any) -> Iterator[str]:
    folder = f"/tmp/pytest-torch-{uuid.uuid4().hex[:8]}"
    yield folder
    hdfs.delete(folder, recursive=True)


def ddp_job(python: str, *args: str, **extra: Any) -> JobSpec:
    """Two workers (ranks 0 and 1) running torch_ddp.py with ``args``."""
    worker = {"instances": 2, "memory": "2 GiB", "script": TORCH_DDP, "args": list(args)}
    return job(python, {"worker": worker}, framework="pytorch", heartbeat_timeout=60, **extra)


def wait(client: Any, spec: JobSpec, tag: str, attempt: int) -> Any:
    app_id = client.submit(spec, attempt=attempt, extra_tags=[tag])
    return client.wait(app_id, poll_interval=0.5, emit=lambda line: print(time.strftime("%T"), line, flush=True))


def test_a_ddp_retry_resumes_from_its_torch_checkpoint_and_publishes_a_gated_model(
    tony_client, app_tag, python_exe, hdfs, base
) -> None:
    ckpt, model_dir = f"{base}/ckpt", f"{base}/model"
    spec = ddp_job(
        python_exe,
        *("--steps", str(STEPS), "--every", str(EVERY)),
        *("--fail-rank", "0", "--fail-at", str(FAIL_AT), "--exit-code", "75"),
        checkpoint={"dir": ckpt, "model_dir": model_dir, "poll_interval": 0.5},
        quality_gate={"metric": "accuracy", "mode": "max"},
    )
    # First try: rank 0 exits 75 (retryable) at FAIL_AT; its last checkpoint is on HDFS by then.
    first = wait(tony_client, spec, app_tag, attempt=1)
    assert not first.succeeded
    assert first.failure is not None and first.failure.retryable, first.diagnostics
    assert (first.failure.task_id, first.failure.exit_code) == ("worker:0", 75), first.failure
    assert "[retryable]" in first.diagnostics
    assert remote_checkpoints(hdfs, ckpt)[-1] == LAST_SAVED
    assert sorted(hdfs.list(f"{ckpt}/{remote_name(LAST_SAVED)}")) == sorted([f"ckpt-{LAST_SAVED}.pt", MANIFEST])

    # Second try (Airflow's retry): every rank restored the checkpoint, rank 0's script resumed from it.
    second = wait(tony_client, spec, app_tag, attempt=2)
    assert second.succeeded, second.diagnostics
    tasks = {t: second.am_state.task(t) for t in ("worker:0", "worker:1")}
    metrics = {t: task.progress.metrics for t, task in tasks.items()}
    assert {t: task.restored_step for t, task in tasks.items()} == {"worker:0": LAST_SAVED, "worker:1": LAST_SAVED}
    for task_id, m in metrics.items():
        assert (m["resumed_from"], m["checked"]) == (LAST_SAVED, STEPS - LAST_SAVED), (task_id, m)
    assert metrics["worker:0"]["checksum"] == metrics["worker:1"]["checksum"], metrics
    assert remote_checkpoints(hdfs, ckpt)[-1] == STEPS

    # The model passed the gate on the figure the script reported last, and is published with it.
    concluded = conclude(tony_client, spec, second)
    verdict = concluded.gate
    assert verdict is not None and verdict.passed and concluded.published, verdict
    assert verdict.value == metrics["worker:0"]["accuracy"] > 0.5, verdict
    assert "model.pt" in hdfs.list(verdict.model_dir)
    # TensorBoard events written by torch.utils.tensorboard reached HDFS beside the checkpoints.
    assert any(name.startswith("events.out.tfevents.") for name in hdfs.list(f"{ckpt}/tensorboard"))


def test_a_pytorch_scripts_own_error_fails_at_once_not_retryable(tony_client, app_tag, python_exe) -> None:
    """Rank 1 raises a ValueError at step 3. The bug is the cause: no restart, though one is allowed.
    Rank 0 is either stopped by the AM (the verdict came first) or failed on gloo's closed
    connection and counts as a consequence, never as a cause of its own."""
    spec = ddp_job(python_exe, "--steps", "10", "--every", "0", "--fail-rank", "1", "--fail-at", "3", max_restarts=1)
    result = wait(tony_client, spec, app_tag, attempt=1)
    assert not result.succeeded
    failure = result.failure
    assert failure is not None and failure.kind == "code" and not failure.retryable, result.diagnostics
    assert failure.task_id == "worker:1" and set(failure.consequences) <= {"worker:0"}, failure
    peer = result.am_state.task("worker:0")
    assert peer.state == "KILLED" or failure.consequences == ["worker:0"], peer
    assert "ValueError" in result.diagnostics and "[retryable]" not in result.diagnostics
    assert result.am_state.restarts == []
