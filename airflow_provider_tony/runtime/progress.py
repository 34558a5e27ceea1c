"""The small API training scripts call to report progress (optional).

    from airflow_provider_tony.runtime import progress
    progress.report(step=120, epoch=2, loss=0.31, accuracy=0.9)

It writes one small JSON file that the task executor reads with each
heartbeat, so user code needs neither skein nor a network connection, and a
script that never calls it still works. The file holds the latest report and,
under ``recent``, the last ``RECENT_POINTS`` reports (at most ``RECENT_BYTES``
of JSON): the executor forwards that window with every beat and the AM keeps
each point it has not seen, so a script reporting several times between two
heartbeats loses none of its points on the job page and in the history. Outside a TonY container (no
``TONY_PROGRESS_FILE``) it does nothing, so the same script runs locally.
"""

from __future__ import annotations

import collections
import json
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime.constants import ENV_PROGRESS_FILE
from airflow_provider_tony.runtime.messages import (
    MAX_BEAT_POINTS,
    MAX_METRICS,
    MAX_NAME_CHARS,
    MAX_PROGRESS_BYTES,
    MAX_VALUE_CHARS,
    Progress,
    _int_or_none,
)

#: Reports kept in the progress file for the executor to forward (the window a heartbeat carries).
RECENT_POINTS = MAX_BEAT_POINTS
#: Bytes of JSON that window may hold: a report with many long metrics leaves fewer points in it.
RECENT_BYTES = 32 << 10

#: The window, each point kept as the JSON it is written as: a report encodes its own point once,
#: not the whole window again (a script may report every step, tens of times a second).
_recent: collections.deque[str] = collections.deque()


def _remember(encoded: str) -> str:
    """Add a point (its JSON) to the window, drop the oldest past ``RECENT_POINTS`` or ``RECENT_BYTES``;
    the window as a JSON array."""
    _recent.append(encoded)
    size = sum(len(e) for e in _recent)
    while _recent and (len(_recent) > RECENT_POINTS or size > RECENT_BYTES):
        size -= len(_recent.popleft())
    return "[" + ",".join(_recent) + "]"


def _clean(value: Any) -> Any:
    """Numbers as floats/ints (NaN/inf as strings: JSON has no such numbers)."""
    if hasattr(value, "numpy"):  # a TensorFlow tensor (what Keras's own metrics return)
        value = value.numpy()
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


_warned: set[str] = set()


def _warn_once(what: str) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"tony progress.report: {what}", stacklevel=3)


def report(step: int | None = None, epoch: int | None = None, total_steps: int | None = None, **metrics: Any) -> bool:
    """Record the latest step/epoch/metrics; returns False outside TonY.

    What travels to the AM is bounded (``MAX_METRICS`` metrics, names of
    ``MAX_NAME_CHARS`` and text values of ``MAX_VALUE_CHARS`` characters,
    integer step/epoch): the rest is dropped or cut with a warning, so a
    report can never grow the executor's messages past what skein carries.
    """
    path = os.environ.get(ENV_PROGRESS_FILE)
    if not path:
        return False
    if len(metrics) > MAX_METRICS:
        _warn_once(f"{len(metrics)} metrics reported, only the first {MAX_METRICS} are kept")
    cleaned = {k: _clean(v) for k, v in list(metrics.items())[:MAX_METRICS]}
    if any(len(k) > MAX_NAME_CHARS or (isinstance(v, str) and len(v) > MAX_VALUE_CHARS) for k, v in cleaned.items()):
        _warn_once(f"metric names over {MAX_NAME_CHARS} or values over {MAX_VALUE_CHARS} characters are cut short")
    for name, value in (("step", step), ("epoch", epoch), ("total_steps", total_steps)):
        if value is not None and _int_or_none(_clean(value)) is None:
            _warn_once(f"{name}={value!r} is not an integer: reported as none")
    doc = Progress(
        step=_clean(step),
        epoch=_clean(epoch),
        total_steps=_clean(total_steps),
        time=time.time(),
        metrics=cleaned,
    )
    latest = json.dumps(doc.to_dict(), separators=(",", ":"))  # "{...}", never empty: every field is there
    body = f'{latest[:-1]},"recent":{_remember(latest)}}}'
    # Per process: several processes of one container (nproc_per_node) reporting at once must not
    # move each other's half-written file; the last complete report wins.
    tmp = Path(f"{path}.{os.getpid()}.tmp")
    tmp.write_text(body)
    os.replace(tmp, path)  # readers never see half a file
    return True


def read(path: str | os.PathLike[str]) -> Progress | None:
    """The latest report; None until the script reports."""
    return read_all(path)[0]


def read_all(path: str | os.PathLike[str]) -> tuple[Progress | None, list[Progress]]:
    """What the executor forwards to the AM: the latest report and the recent window, oldest first.

    The script may write this file itself: a bounded amount is read, the window
    is cut to ``RECENT_POINTS`` and a malformed window is dropped (the latest
    report still counts).
    """
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_PROGRESS_BYTES + 1)
        latest = Progress.from_json(raw, max_bytes=MAX_PROGRESS_BYTES)
    except (OSError, ValueError):  # not yet written, or too large (SpecError is a ValueError)
        return None, []
    try:
        window = json.loads(raw).get("recent") or []
        recent = [Progress.from_dict(p, "recent") for p in window[-RECENT_POINTS:]] if isinstance(window, list) else []
    except (ValueError, TypeError, AttributeError):
        recent = []
    return latest, recent


def keras_metrics(model: Any, logs: dict[str, Any] | None) -> dict[str, Any]:
    """The figures Keras itself shows for ``logs``: its metrics' running means.

    At a batch end tf-keras hands callbacks the step function's outputs reduced
    across replicas with ``SUM`` (its ``distribute_reduction_method`` "auto"
    on any strategy but TPU), so under ``MultiWorkerMirroredStrategy`` with two
    workers the batch-end ``accuracy`` reads about twice the real one. At an
    epoch end Keras replaces those logs by ``model.get_metrics_result()`` (its
    private ``_validate_and_get_metrics_result``): what its progress bar and
    ``History`` show. This does the same at every report, and keeps ``logs``
    when the model's metrics do not name the same keys (a custom
    ``train_step`` returning its own dict).
    """
    logs = dict(logs or {})
    try:
        result = {k: _clean(v) for k, v in model.get_metrics_result().items()}
    except (AttributeError, TypeError, ValueError):  # no compiled model, or metrics not built yet
        return logs
    if not result or set(result) != set(logs):
        return logs
    return result


def keras_callback(every_n_steps: int = 10, total_steps: int | None = None) -> Any:
    """A tf-keras callback reporting step, epoch and the metrics Keras shows; imports tf_keras lazily.

    The figures are Keras's own (``keras_metrics``): the running means of the
    epoch so far, equal at an epoch end to what ``fit`` prints and returns.
    """
    import tf_keras

    # tf_keras has no type information: the base class is Any to mypy.
    class TonyProgress(tf_keras.callbacks.Callback):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.step = 0
            self.epoch = 0

        def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            self.epoch = epoch

        def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
            self.step += 1
            if self.step % every_n_steps == 0:
                report(step=self.step, epoch=self.epoch, total_steps=total_steps, **keras_metrics(self.model, logs))

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            report(step=self.step, epoch=epoch + 1, total_steps=total_steps, **(logs or {}))

    return TonyProgress()
