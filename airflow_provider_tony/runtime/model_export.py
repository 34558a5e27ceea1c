"""The decider's trained model, published to ``checkpoint.model_dir`` on HDFS once its script succeeded.

Why a module of its own: the export is the last thing a job does and decides
its outcome: a model HDFS refuses (quota, permissions) fails the task for
good (77), any other failure is retryable (75), and a job with a quality gate
leaves its model as a candidate beside ``model_dir`` with the metadata
:mod:`~airflow_provider_tony.runtime.gate` judges it by.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import gate, hdfs_io, namenodes
from airflow_provider_tony.runtime import progress as progress_api
from airflow_provider_tony.runtime.executor_kv import report_event
from airflow_provider_tony.runtime.hdfs_refusal import HDFS_REFUSED_EXIT_CODE, refusal, refused_line
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.user_env import MODEL_DIR, PROGRESS_FILE


def export_model(
    app: Any,
    spec: JobSpec,
    workdir: Path,
    env: dict[str, str],
    task_id: str,
    code: int,
    tail: list[str],
    upload_tag: str,
    clients: namenodes.Router | None = None,
) -> tuple[int, list[str]]:
    """Publish the decider's ``$TONY_MODEL_DIR`` to ``checkpoint.model_dir`` on HDFS, on its own NameNode
    (``clients``: the process's, else made from ``env``)."""
    local = workdir / MODEL_DIR
    target = spec.checkpoint.model_dir
    assert target is not None  # called only when the job sets model_dir
    if not local.is_dir() or not any(local.iterdir()):
        report_event(app, task_id, f"{task_id} wrote no model to $TONY_MODEL_DIR; nothing exported")
        return code, tail
    client = namenodes.pick(clients or hdfs_io.Clients(env, kv=app.kv), target)
    if client is None:
        return 1, [*tail, "model_dir is set but the job has no WebHDFS URL to export the model with"]
    app_id = env.get(C.ENV_SKEIN_APPLICATION_ID, "")
    gated = spec.quality_gate.enabled
    # A gated model waits beside model_dir until the submitting side has judged it (runtime/gate.py).
    destination = gate.candidate_dir(target, app_id) if gated else target
    record = gate.model_record(app_id, progress_api.read(workdir / PROGRESS_FILE), hdfs_io.hdfs_path(target))
    (local / gate.MODEL_METADATA).write_bytes(record.to_json())
    try:
        remote = hdfs_io.publish(client, str(local), destination, upload_tag)
    except Exception as exc:  # noqa: BLE001 - becomes the task's failure
        answer = refusal(exc)
        if answer is not None:  # the model folder's quota or permissions: no retry changes them
            return HDFS_REFUSED_EXIT_CODE, [*tail, refused_line(hdfs_io.hdfs_path(destination), answer)]
        return C.TEMPFAIL_EXIT_CODE, [*tail, f"model export to {destination} failed: {exc}"]
    if gated:
        report_event(app, task_id, f"{task_id} exported the model to {remote} for the quality gate to judge")
    else:
        report_event(app, task_id, f"{task_id} exported the model to {remote}")
    return code, tail
