"""The small API training scripts call to report progress (optional).

    from airflow_provider_tony.runtime import progress
    progress.report(step=120, epoch=2, loss=0.31, accuracy=0.9)

It writes one small JSON file that the task executor reads with each
heartbeat, so user code needs neither skein nor a network connection, and a
script that never calls it still works. Outside a TonY container (no
``TONY_PROGRESS_FILE``) it does nothing, so the same script runs locally.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime.constants import ENV_PROGRESS_FILE
from airflow_provider_tony.runtime.messages import (
    MAX_METRICS,
    MAX_NAME_CHARS,
    MAX_PROGRESS_BYTES,
    MAX_VALUE_CHARS,
    Progress,
    _int_or_none,
)


def _clean(value: Any) -> Any:
    """Numbers as floats/ints (NaN/inf as strings: JSON has no such numbers)."""
    if hasattr(value, "item"):  # numpy / tensor scalars
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
    tmp = Path(path + ".tmp")
    tmp.write_bytes(doc.to_json())
    os.replace(tmp, path)  # readers never see half a file
    return True


def read(path: str | os.PathLike[str]) -> Progress | None:
    """What the executor forwards to the AM; None until the script reports."""
    try:
        with open(path, "rb") as fh:  # the script may write this file itself: read a bounded amount
            return Progress.from_json(fh.read(MAX_PROGRESS_BYTES + 1), max_bytes=MAX_PROGRESS_BYTES)
    except (OSError, ValueError):  # not yet written, or too large (SpecError is a ValueError)
        return None


def keras_callback(every_n_steps: int = 10, total_steps: int | None = None) -> Any:
    """A tf-keras callback reporting step, epoch and logs; imports tf_keras lazily."""
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
                report(step=self.step, epoch=self.epoch, total_steps=total_steps, **(logs or {}))

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            report(step=self.step, epoch=epoch + 1, total_steps=total_steps, **(logs or {}))

    return TonyProgress()
