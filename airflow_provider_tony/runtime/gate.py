"""The quality gate: publish a model only when it is at least as good as the last published one.

Nightly retraining publishes whatever the night's data produced unless
something compares it with the model in production. With
``quality_gate.metric`` set, the deciding task's executor uploads the model to
a *candidate* folder beside ``checkpoint.model_dir`` (never to the folder
itself), with ``tony-model.json`` inside it: the script's last reported
metrics, step and application id. After the job succeeded the submitting side
(the operator, ``tony submit``) calls :func:`apply`: it reads the candidate's
figure and the last published model's (from the pointer, see below) and then
either publishes the candidate or moves it aside as
``<model_dir>.rejected-<application id>`` for a person to look at. The
comparison itself (:func:`judge`) is pure.

The published layout (atomic, and safe for two runs at once):

- ``<model_dir>.lock``: held while one gate judges and publishes (``runtime/publish_lock.py``);
- ``<model_dir>.versions/<application id>/``: each published model, never changed once there;
- the pointer, ``quality_gate.record`` or ``<model_dir>.versions/current.json``: the record of
  the published model (application id, figures, ``model_dir`` = its version folder), replaced by
  one atomic rename (WebHDFS RENAME with ``renameoptions=OVERWRITE``). Readers take the path it
  names (or the one in the verdict, the XCom and the asset event) and so read a folder that never
  changes under them; a folder replaced in place cannot be swapped atomically on HDFS (rename
  onto a folder moves *into* it), hence versions and a pointer.

Why on the submitting side: the operator decides the task's outcome and
emits the model asset's event; deciding there keeps the YARN job's status
about training (it did succeed) and the gate's verdict about the model.
"""

from __future__ import annotations

import json
import math
import posixpath
import time
from dataclasses import dataclass
from typing import Any

from airflow_provider_tony.runtime import publish_lock
from airflow_provider_tony.runtime.hdfs_io import hdfs_path, move, replace_file, with_retries
from airflow_provider_tony.runtime.messages import GateResult, Progress
from airflow_provider_tony.runtime.messages_base import finite_number
from airflow_provider_tony.runtime.namenodes import pick
from airflow_provider_tony.runtime.spec import JobSpec, QualityGate

__all__ = [
    "MODEL_METADATA",
    "ModelRecord",
    "apply",
    "candidate_dir",
    "judge",
    "model_record",
    "read_record",
    "rejected_dir",
]

#: The metadata a published model folder carries (and what ``quality_gate.record`` holds).
MODEL_METADATA = "tony-model.json"
#: A record larger than this is not ours.
MAX_RECORD_BYTES = 64 * 1024
#: The pointer's name inside ``<model_dir>.versions`` (when ``quality_gate.record`` is not set).
POINTER_NAME = "current.json"
#: How long a gate waits for another run's publication (each takes seconds: a few renames).
LOCK_WAIT_S = 300.0
#: A lock older than this is a dead gate's (its worker died mid-publish) and is broken.
LOCK_STALE_S = 900.0


@dataclass(frozen=True)
class ModelRecord:
    """What a model folder says about itself: who made it, at which step, with which figures."""

    application_id: str
    step: int | None
    metrics: dict[str, Any]
    model_dir: str = ""
    published_at: float | None = None

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "format": 1,
                "application_id": self.application_id,
                "step": self.step,
                "metrics": self.metrics,
                "model_dir": self.model_dir,
                "published_at": self.published_at,
            },
            indent=1,
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> ModelRecord | None:
        """None for anything that is not a record (too large, not JSON, wrong shape)."""
        if len(raw) > MAX_RECORD_BYTES:
            return None
        try:
            data = json.loads(raw)
            metrics = data.get("metrics") or {}
            if not isinstance(metrics, dict):
                return None
            step = data.get("step")
            return cls(
                application_id=str(data.get("application_id") or ""),
                step=step if isinstance(step, int) and not isinstance(step, bool) else None,
                metrics=metrics,
                model_dir=str(data.get("model_dir") or ""),
                published_at=data.get("published_at") if isinstance(data.get("published_at"), (int, float)) else None,
            )
        except (ValueError, AttributeError, TypeError):
            return None

    def figure(self, metric: str) -> float | None:
        return finite_number(self.metrics.get(metric))


def model_record(app_id: str, progress: Progress | None, model_dir: str = "") -> ModelRecord:
    """The metadata the executor writes into the model it exports (from the script's last report)."""
    return ModelRecord(
        application_id=app_id,
        step=progress.step if progress is not None else None,
        metrics=dict(progress.metrics) if progress is not None else {},
        model_dir=model_dir,
    )


def judge(gate: QualityGate, value: float | None, previous: float | None) -> tuple[bool, str]:
    """Whether a model with figure ``value`` may replace one with ``previous``, and why, in words.

    A first model (no previous figure) passes; a model without a figure
    fails, since nothing says it is good; a tie passes ("at least as good").
    """
    metric, mode = gate.metric, gate.mode
    if value is None:
        return False, f"the job reported no numeric {metric!r} in its last progress report, so nothing says it is good"
    if previous is None:
        return True, f"{metric}={value:g}; no published model to compare with (first model)"
    better = value >= previous if mode == "max" else value <= previous
    relation = ("at least" if better else "below") if mode == "max" else ("at most" if better else "above")
    reason = f"{metric}={value:g} is {relation} the published model's {previous:g} ({mode} is better)"
    if better or gate.tolerance is None:
        return better, reason
    slack = gate.allowance(previous)
    worse_by = abs(value - previous)
    within = worse_by <= slack or math.isclose(worse_by, slack, rel_tol=1e-9)  # 0.8 - 0.79 is 0.0100000...09
    verdict = "within" if within else "beyond"
    return within, f"{reason}, worse by {worse_by:g}: {verdict} the tolerance {gate.tolerance} ({slack:g})"


def within_tolerance(gate: QualityGate, value: float | None, previous: float | None) -> bool:
    """Whether a passing model passed only thanks to ``tolerance`` (worse than the published one): a person may
    want to look (the example nightly DAG asks for approval then)."""
    if value is None or previous is None:
        return False
    return value < previous if gate.mode == "max" else value > previous


def candidate_dir(model_dir: str, app_id: str) -> str:
    """Where the executor puts a gated model until the gate is decided."""
    return f"{hdfs_path(model_dir).rstrip('/')}.candidate-{app_id}"


def rejected_dir(model_dir: str, app_id: str) -> str:
    """Where a model that failed the gate stays, unpublished."""
    return f"{hdfs_path(model_dir).rstrip('/')}.rejected-{app_id}"


def versions_dir(model_dir: str) -> str:
    """Where published models live, one never-changing folder per application: ``<model_dir>.versions``."""
    return f"{hdfs_path(model_dir).rstrip('/')}.versions"


def version_dir(model_dir: str, app_id: str) -> str:
    """The published (or about to be published) model of application ``app_id``."""
    return f"{versions_dir(model_dir)}/{app_id}"


def lock_path(model_dir: str) -> str:
    """The file whose creation (``overwrite=false``, atomic on the NameNode) lets one gate publish at a time."""
    return f"{hdfs_path(model_dir).rstrip('/')}.lock"


def record_path(spec: JobSpec) -> str:
    """The pointer: the file naming the published version (and its figures).

    ``quality_gate.record`` when set, else ``<model_dir>.versions/current.json``.
    It is replaced in one atomic rename, so it is the publication itself:
    whatever it names is the published model.
    """
    if spec.quality_gate.record:
        return hdfs_path(spec.quality_gate.record)
    assert spec.checkpoint.model_dir is not None  # the spec refuses a gate without a model_dir
    return f"{versions_dir(spec.checkpoint.model_dir)}/{POINTER_NAME}"


def read_record(client: Any, path: str) -> ModelRecord | None:
    """The record at ``path`` on HDFS, None when there is none (or it is not a record)."""
    if with_retries(f"status {path}", lambda: client.status(path, strict=False)) is None:
        return None

    def read() -> bytes:
        with client.read(path) as reader:
            data: bytes = reader.read(MAX_RECORD_BYTES + 1)
        return data

    return ModelRecord.from_json(with_retries(f"read {path}", read))


def _record_location(spec: JobSpec) -> str:
    """The location whose NameNode holds the pointer: ``quality_gate.record``, else ``model_dir`` (beside it)."""
    location = spec.quality_gate.record or spec.checkpoint.model_dir
    assert location is not None  # the spec refuses a gate without a model_dir
    return location


def published_record(client: Any, spec: JobSpec) -> ModelRecord | None:
    """The last published model's record: the pointer, else (a model published before versions) the
    ``tony-model.json`` inside ``model_dir`` itself, so the first versioned run still compares.
    ``client`` may be a ``namenodes.Router``: the pointer is read from its own NameNode."""
    found = read_record(pick(client, _record_location(spec)), record_path(spec))
    if found is None and not spec.quality_gate.record:
        assert spec.checkpoint.model_dir is not None
        model_fs = pick(client, spec.checkpoint.model_dir)
        found = read_record(model_fs, posixpath.join(hdfs_path(spec.checkpoint.model_dir), MODEL_METADATA))
    return found


def _exists(client: Any, path: str) -> bool:
    return with_retries(f"status {path}", lambda: client.status(path, strict=False)) is not None


def where_is(client: Any, model_dir: str, app_id: str) -> str | None:
    """Where application ``app_id``'s model is now: its version folder (a crash after the move), its
    candidate, its rejected folder, or nowhere (None)."""
    for path in (version_dir(model_dir, app_id), candidate_dir(model_dir, app_id), rejected_dir(model_dir, app_id)):
        if _exists(client, path):
            return path
    return None


def apply(
    client: Any,
    spec: JobSpec,
    app_id: str,
    now: float | None = None,
    *,
    lock_wait_s: float = LOCK_WAIT_S,
    lock_stale_s: float = LOCK_STALE_S,
    approved: bool = False,
) -> GateResult:
    """Judge application ``app_id``'s model and publish it or set it aside; returns the verdict.

    With ``quality_gate.approval`` a model that passes only thanks to ``tolerance`` is held:
    it stays a candidate and the verdict says ``awaiting_approval`` (not passed, nothing
    moved), until a call with ``approved=True`` (a person said yes) publishes it.

    One gate at a time per ``model_dir`` (:mod:`runtime.publish_lock`), so two
    runs never judge against the same previous model. Publishing is two steps,
    each one atomic rename: the candidate becomes ``<model_dir>.versions/<app>``
    (never changed again), then the pointer (:func:`record_path`) is replaced
    by one naming it. A crash between them leaves the old pointer (the last
    good model stays published); the retry finds the version folder and
    finishes. Safe to call again for the same application: nothing moves twice.

    ``client`` is a WebHDFS client or a ``namenodes.Router``: the model's folders are on
    ``model_dir``'s NameNode, the pointer on ``quality_gate.record``'s.
    """
    assert spec.checkpoint.model_dir is not None  # callers check gate.enabled
    model_dir = hdfs_path(spec.checkpoint.model_dir).rstrip("/")
    model_fs = pick(client, spec.checkpoint.model_dir)
    model_fs.makedirs(posixpath.dirname(model_dir) or "/")
    with publish_lock.held(model_fs, lock_path(model_dir), app_id, wait_s=lock_wait_s, stale_s=lock_stale_s):
        when = time.time() if now is None else now
        return _judge_and_publish(client, model_fs, spec, app_id, model_dir, when, approved)


def _judge_and_publish(
    clients: Any, client: Any, spec: JobSpec, app_id: str, model_dir: str, now: float, approved: bool
) -> GateResult:
    gate = spec.quality_gate
    assert gate.metric is not None
    record_file = record_path(spec)
    previous = published_record(clients, spec)
    if previous is not None and previous.application_id == app_id:  # published by an earlier look
        return GateResult(
            metric=gate.metric,
            mode=gate.mode,
            value=previous.figure(gate.metric),
            passed=True,
            model_dir=previous.model_dir or version_dir(model_dir, app_id),
            reason="already published by this application",
        )
    candidate, rejected, version = (
        candidate_dir(model_dir, app_id),
        rejected_dir(model_dir, app_id),
        version_dir(model_dir, app_id),
    )
    where = where_is(client, model_dir, app_id)
    if where is None:
        return GateResult(
            metric=gate.metric,
            mode=gate.mode,
            passed=False,
            reason=f"the job left no model at {candidate}: the script wrote nothing to $TONY_MODEL_DIR",
        )
    mine = read_record(client, posixpath.join(where, MODEL_METADATA))
    value = mine.figure(gate.metric) if mine is not None else None
    before = previous.figure(gate.metric) if previous is not None else None
    if previous is not None and before is None:
        value_passes, reason = (
            False,
            (
                f"the published model's record {record_file} has no numeric {gate.metric!r}; "
                "fix or remove the record to publish again"
            ),
        )
    else:
        value_passes, reason = judge(gate, value, before)
    result = GateResult(
        metric=gate.metric,
        mode=gate.mode,
        value=value,
        previous=before,
        within_tolerance=value_passes and within_tolerance(gate, value, before),
        previous_model_dir=previous.model_dir if previous is not None else "",
        previous_application_id=previous.application_id if previous is not None else "",
        passed=value_passes,
        reason=reason,
    )
    if result.within_tolerance and gate.approval and not approved and where == candidate:
        result.passed, result.awaiting_approval, result.model_dir = False, True, candidate
        result.reason += "; held for a person's approval (quality_gate.approval)"
        return result
    if where == rejected or not value_passes:  # a rejected model stays rejected
        if where != rejected:
            move(client, where, rejected)
        result.passed = False
        result.model_dir = rejected
        return result
    assert mine is not None  # value came from it
    published = ModelRecord(mine.application_id or app_id, mine.step, mine.metrics, version, now)
    if where == candidate:  # its metadata says where it is published, then it never changes again
        client.write(posixpath.join(candidate, MODEL_METADATA), data=published.to_json(), overwrite=True)
        client.makedirs(versions_dir(model_dir))
        move(client, candidate, version)
    # The pointer is replaced in one rename (WebHDFS RENAME OVERWRITE): readers see the old record or this one.
    replace_file(pick(clients, _record_location(spec)), record_file, published.to_json(), f"{record_file}.tmp-{app_id}")
    result.model_dir = version
    return result


def annotate_history(client: Any, paths: list[str], result: GateResult) -> list[str]:
    """Add the verdict to the job's stored history files, so the job page shows both figures.

    The AM wrote them when the job ended, before the gate was decided; a path
    with no history (the AM could not write it) is skipped. Returns the paths written. ``client``
    may be a ``namenodes.Router``: the copy beside the checkpoints is on their NameNode.
    """
    from airflow_provider_tony.runtime.messages import MAX_HISTORY_BYTES, JobHistory

    written = []
    for location in paths:
        fs, path = pick(client, location), hdfs_path(location)
        if fs.status(path, strict=False) is None:
            continue
        with fs.read(path) as reader:
            raw = reader.read(MAX_HISTORY_BYTES + 1)
        history = JobHistory.from_json(raw, max_bytes=MAX_HISTORY_BYTES)
        history.gate = result
        fs.write(path, data=history.to_json(), overwrite=True)
        written.append(path)
    return written
