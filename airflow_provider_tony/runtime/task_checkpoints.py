"""A task's checkpoints as the executor handles them, around :mod:`~airflow_provider_tony.runtime.checkpoint`.

Why a module of its own: these decide what a task starts from and what its
exit means for its checkpoints: which whole checkpoint it resumes from (this
job's, else the warm start's), which uploads the best-N retention keeps, and
what a last upload that never reached HDFS makes of a clean exit
(:func:`after_final_flush`). The uploader threads themselves are
``checkpoint.py``'s; the executor starts them in its phases.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import checkpoint, hdfs_io
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import progress as progress_api
from airflow_provider_tony.runtime.executor_kv import report_event
from airflow_provider_tony.runtime.hdfs_refusal import HDFS_REFUSED_EXIT_CODE
from airflow_provider_tony.runtime.spec import JobSpec

RESTORING_ROLES = frozenset({"chief", "worker"})


def after_final_flush(
    flushed: bool,
    code: int,
    tail: list[str],
    checkpoint_dir: str | None,
    error: str | None,
    refused: str | None = None,
) -> tuple[int, list[str]]:
    """The task's exit after its last checkpoint upload: a script that ended well but whose last
    checkpoint never reached HDFS did not succeed. 75 (retryable): the retry resumes from what is
    on HDFS and saves again; 77 when HDFS refused the folder (``refused``: its line), which a retry
    cannot change; a failed script keeps its own code."""
    if flushed or code != 0:
        return code, tail
    if refused:
        return HDFS_REFUSED_EXIT_CODE, [*tail, refused]
    return C.TEMPFAIL_EXIT_CODE, [*tail, f"the last checkpoint could not be uploaded to {checkpoint_dir}: {error}"]


def restore(
    app: Any, spec: JobSpec, hdfs: Any, role: str, task_id: str, ckpt_dir: Path, user_env: dict[str, str]
) -> int | None:
    """Bring back the newest whole checkpoint (this job's, else the warm start's); each one skipped
    as not whole is an event, so the Airflow log says why the job resumed from an older step."""
    user_env[C.ENV_RESTORED_STEP] = ""
    user_env[C.ENV_RESTORED_FROM] = ""
    user_env[C.ENV_RESTORED_KIND] = ""
    if hdfs is None or spec.checkpoint.dir is None or role not in RESTORING_ROLES and role not in spec.tracked_roles():
        return None
    sources = [spec.checkpoint.dir] + ([spec.checkpoint.warm_start_from] if spec.checkpoint.warm_start_from else [])
    started = time.monotonic()
    found = checkpoint.restore_latest(
        hdfs, sources, ckpt_dir, on_event=lambda msg: report_event(app, task_id, f"{task_id} {msg}")
    )
    if found is None:
        report_event(app, task_id, f"{task_id} found no whole checkpoint in {', '.join(sources)}: starting fresh")
        return None
    step, source = found
    user_env[C.ENV_RESTORED_STEP] = str(step)
    user_env[C.ENV_RESTORED_FROM] = source
    own = hdfs_io.hdfs_path(spec.checkpoint.dir).rstrip("/") + "/"
    user_env[C.ENV_RESTORED_KIND] = "resume" if source.startswith(own) else "warm_start"
    report_event(
        app, task_id, f"{task_id} restored checkpoint step {step} from {source} in {time.monotonic() - started:.2f}s"
    )
    return step


def best_of(spec: JobSpec) -> checkpoint.BestOf | None:
    """Best-N checkpoint retention as the job asks for it (``checkpoint.keep_best`` by the gate's metric)."""
    metric = spec.quality_gate.metric
    if spec.checkpoint.keep_best <= 0 or metric is None:
        return None
    return checkpoint.BestOf(spec.checkpoint.keep_best, metric, spec.quality_gate.mode)


def latest_metrics(progress_file: Path) -> dict[str, Any] | None:
    """The metrics of the script's latest report, to be kept with the checkpoint uploaded now."""
    latest = progress_api.read(progress_file)
    return dict(latest.metrics) if latest is not None else None
