"""Retries resume from HDFS checkpoints: real cluster, real HDFS, real TensorFlow."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints, remote_name
from airflow_provider_tony.runtime.spec import JobSpec
from tests._airflow import (
    dags_test,
    result_of,
    run_state,
)
from tests._util import wait_until
from tests.integration.dags.training_jobs import RESUME_EVERY, RESUME_FAIL_AT, RESUME_STEPS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
JOBS = Path(__file__).parent / "jobs"
TEST_DAGS = Path(__file__).parent / "dags" / "tony_test_dags.py"
DEVCLUSTER = [sys.executable, str(REPO / "devcluster" / "devcluster.py")]


@pytest.fixture
def hdfs(cluster) -> Any:
    from hdfs import InsecureClient

    return InsecureClient(cluster.webhdfs_url, user=cluster.user)


@pytest.fixture
def ckpt_dir(hdfs) -> Any:
    path = f"/tmp/pytest-ckpt-{uuid.uuid4().hex[:8]}"
    yield path
    hdfs.delete(path, recursive=True)


def count_job(python: str, ckpt: str, *args: str, **checkpoint: Any) -> JobSpec:
    return JobSpec.from_dict(
        {
            "name": "pytest-checkpoints",
            "roles": {"worker": {"memory": "1 GiB", "script": str(JOBS / "count_steps.py"), "args": list(args)}},
            "python": {"interpreter": python},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 60,
            "checkpoint": {"dir": ckpt, "poll_interval": 0.5, **checkpoint},
        }
    )


def test_retry_resumes_from_the_last_checkpoint(airflow_env, kill_dag_apps) -> None:
    """S steps, a checkpoint every C, the first try exits (retryable) after K (training_jobs.RESUME_*)."""
    kill_dag_apps.append("tony_test_resume")
    out = dags_test(airflow_env, "tony_test_resume", dagfile=TEST_DAGS)
    assert run_state(out) == "success", out[-4000:]
    assert out.count("submitted application_") == 2, "expected exactly one retry"
    # First try, from the AM state the operator logged (a summary line per poll, a line per task
    # state change): it trained up to K and failed.
    first_try = out[: out.index("submitted application_", out.index("submitted application_") + 1)]
    assert re.search(r"worker:0 (\w+ -> )?FAILED", first_try), first_try[-4000:]
    first = re.findall(r"\| worker:0 step (\d+) .*?trained=(\d+)", first_try)
    assert first and first[-1] == (str(RESUME_FAIL_AT), str(RESUME_FAIL_AT)), first
    assert "[retryable] worker:0 exited with code 75" in out
    # Second try: restored by the executor (not by trusting the script) from >= K - C.
    result = result_of(out)
    restored = result["tasks"]["worker:0"]["restored_step"]
    assert restored is not None and RESUME_FAIL_AT - RESUME_EVERY <= restored <= RESUME_FAIL_AT, restored
    assert any(f"restored checkpoint step {restored}" in e for e in result["events"]), result["events"]
    assert result["step"] == RESUME_STEPS and result["metrics"]["start_step"] == restored
    total = RESUME_FAIL_AT + result["metrics"]["trained"]
    assert total <= RESUME_STEPS + RESUME_EVERY, f"{total} steps trained over both tries"
    assert (
        result["checkpoint_dir"].startswith("/user/")
        and "/checkpoints/tony_test_resume/train/" in result["checkpoint_dir"]
    )


def test_interrupted_upload_is_never_restored(tony_client, app_tag, python_exe, hdfs, ckpt_dir) -> None:
    # A complete checkpoint at step 10, made by a real run...
    first = tony_client.wait(
        tony_client.submit(count_job(python_exe, ckpt_dir, "--steps", "10", "--every", "10"), extra_tags=[app_tag]),
        poll_interval=0.5,
    )
    assert first.succeeded, first.diagnostics
    assert remote_checkpoints(hdfs, ckpt_dir) == [10]
    # ...and a half-uploaded one at step 50, as an uploader killed mid-file leaves it.
    partial = f"{ckpt_dir}/.tmp-{remote_name(50)}-killed"
    hdfs.write(f"{partial}/checkpoint", data=b'model_checkpoint_path: "ckpt-50"\n')
    hdfs.write(f"{partial}/ckpt-50.index", data=b"\x00" * 10)
    result = tony_client.wait(
        tony_client.submit(count_job(python_exe, ckpt_dir, "--steps", "20", "--every", "10"), extra_tags=[app_tag]),
        poll_interval=0.5,
    )
    assert result.succeeded, result.diagnostics
    worker = result.am_state.tasks["worker:0"]
    assert worker.restored_step == 10
    assert worker.progress.metrics["start_step"] == 10
    assert remote_checkpoints(hdfs, ckpt_dir) == [10, 20]


def test_bad_newest_checkpoint_is_skipped_and_the_older_one_restored(
    tony_client, app_tag, python_exe, hdfs, ckpt_dir
) -> None:
    # Two whole checkpoints (steps 10 and 20) made by a real run...
    first = tony_client.wait(
        tony_client.submit(count_job(python_exe, ckpt_dir, "--steps", "20", "--every", "10"), extra_tags=[app_tag]),
        poll_interval=0.5,
    )
    assert first.succeeded, first.diagnostics
    assert remote_checkpoints(hdfs, ckpt_dir) == [10, 20]
    # ...then the newest one's data shard is cut short on HDFS (TensorFlow would fail reading it).
    newest = f"{ckpt_dir}/{remote_name(20)}"
    shard = next(name for name in hdfs.list(newest) if ".data-" in name)
    with hdfs.read(f"{newest}/{shard}") as reader:
        whole = reader.read()
    hdfs.write(f"{newest}/{shard}", data=whole[: len(whole) // 2], overwrite=True)
    result = tony_client.wait(
        tony_client.submit(count_job(python_exe, ckpt_dir, "--steps", "30", "--every", "10"), extra_tags=[app_tag]),
        poll_interval=0.5,
    )
    assert result.succeeded, result.diagnostics
    worker = result.am_state.task("worker:0")
    assert worker.restored_step == 10
    assert worker.progress.metrics["start_step"] == 10
    events = result.am_state.events
    skipped = [e for e in events if f"skipped checkpoint {newest}:" in e]
    assert skipped and f"{shard} is {len(whole) // 2} bytes" in skipped[0], events
    assert any("restored checkpoint step 10 " in e for e in events), events
    # The retrained step 20 took the name; the bad copy was moved aside, not deleted.
    assert remote_checkpoints(hdfs, ckpt_dir) == [10, 20, 30]
    aside = [name for name in hdfs.list(ckpt_dir) if name.startswith(f"{remote_name(20)}.damaged-")]
    assert len(aside) == 1, hdfs.list(ckpt_dir)
    assert hdfs.status(f"{ckpt_dir}/{aside[0]}/{shard}")["length"] == len(whole) // 2
    assert hdfs.status(f"{newest}/{shard}")["length"] > len(whole) // 2


def _step(client, app_id: str, task_id: str) -> int:
    """The step ``task_id`` last reported (0 before it has)."""
    doc = client.am_state(app_id)
    task = doc.task(task_id) if doc is not None else None
    if task is None or task.progress is None:
        return 0
    return task.progress.step or 0


def _namenode(action: str) -> None:
    cmd = [*DEVCLUSTER, "stop", "namenode"] if action == "stop" else [*DEVCLUSTER, "up"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"devcluster {action} failed: {proc.stderr[-3000:]}"


@pytest.mark.whole_cluster  # stops the NameNode under every test: the other lane waits
def test_short_hdfs_outage_is_bridged(tony_client, app_tag, python_exe, hdfs, ckpt_dir) -> None:
    spec = count_job(
        python_exe, ckpt_dir, "--steps", "60", "--every", "10", "--sleep", "0.4", upload_failure_window=120, keep=10
    )
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    wait_until(lambda: remote_checkpoints(hdfs, ckpt_dir), 120, "the first checkpoint upload")
    _namenode("stop")
    try:
        wait_until(lambda: _step(tony_client, app_id, "worker:0") >= 45, 120, "training to go on without HDFS")
    finally:
        _namenode("up")
    result = tony_client.wait(app_id, poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    steps = remote_checkpoints(hdfs, ckpt_dir)
    assert steps[-1] == 60, f"the missed checkpoints were not uploaded after HDFS came back: {steps}"


@pytest.mark.whole_cluster  # stops the NameNode under every test: the other lane waits
def test_long_hdfs_outage_fails_as_retryable(tony_client, app_tag, python_exe, hdfs, ckpt_dir) -> None:
    spec = count_job(python_exe, ckpt_dir, "--steps", "400", "--every", "10", "--sleep", "0.2", upload_failure_window=8)
    app_id = tony_client.submit(spec, extra_tags=[app_tag])
    wait_until(lambda: remote_checkpoints(hdfs, ckpt_dir), 120, "the first checkpoint upload")
    _namenode("stop")
    try:
        state = wait_until(
            lambda: (doc := tony_client.am_state(app_id)) and doc.final and doc, 120, "the job to give up"
        )
    finally:
        _namenode("up")
    result = tony_client.wait(app_id, poll_interval=0.5)
    assert not result.succeeded
    assert "upload_failure_window" in state.diagnostics and state.retryable, state.diagnostics
    assert "[retryable]" in result.diagnostics


def test_final_model_loads_back_with_the_same_predictions(
    tony_client, app_tag, python_exe, hdfs, ckpt_dir, tmp_path: Path
) -> None:
    model_dir = f"{ckpt_dir}/model"
    spec = JobSpec.from_dict(
        {
            "name": "pytest-model-export",
            "roles": {
                "worker": {
                    "instances": 2,
                    "memory": "1 GiB",
                    "script": str(REPO / "dags/training/digits_mwms.py"),
                    "args": ["--epochs", "2", "--steps-per-epoch", "10", "--partition", "model-test"],
                }
            },
            "python": {"interpreter": python_exe},
            "heartbeat_timeout": 60,
            "checkpoint": {"dir": f"{ckpt_dir}/ckpt", "model_dir": model_dir},
        }
    )
    result = tony_client.wait(tony_client.submit(spec, extra_tags=[app_tag]), poll_interval=0.5)
    assert result.succeeded, result.diagnostics
    reported = result.am_state.tasks["worker:0"].progress.metrics
    hdfs.download(f"{model_dir}/model.keras", str(tmp_path / "model.keras"))
    code = (
        "import json, os, sys\n"
        "os.environ['TF_USE_LEGACY_KERAS'] = '1'\n"
        f"sys.path.insert(0, {str(REPO / 'dags' / 'training')!r})\n"
        "import tf_keras\n"
        "from digits_mwms import load_partition\n"
        "x, y = load_partition('model-test')\n"
        "split = int(len(x) * 0.8)\n"
        f"model = tf_keras.models.load_model({str(tmp_path / 'model.keras')!r})\n"
        "probs = model.predict(x[split:split + 20], verbose=0)\n"
        "print(json.dumps({'pred_head': ','.join(str(int(i)) for i in probs.argmax(axis=1)),\n"
        "                  'prob_mean': float(probs.max(axis=1).mean())}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    fresh = json.loads(out.stdout.strip().splitlines()[-1])
    assert fresh["pred_head"] == reported["pred_head"]
    assert abs(fresh["prob_mean"] - reported["prob_mean"]) < 1e-5
