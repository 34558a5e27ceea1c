"""The median-stopping rule, as pure logic: should a running trial of a sweep stop at this step?

A sweep's trials share a folder on HDFS (``early_stopping.sweep``); each trial
that finished (and was not stopped) leaves its curve there: step -> value of
one metric. A running trial compares its value at each new step with the
median, over the finished trials, of each one's value at that step, and stops
when it is strictly worse: a trial behind most finished ones at the same point
of training is unlikely to beat them, and its containers are better spent on
the next trial (Golovin et al., "Google Vizier", 2017).

Why a module of its own: the rule's boundaries (a tie, too few finished
trials, a trial with no point yet at that step, the grace steps, a value that
is not a number) want table-driven tests without a cluster, and the curves are
read from a folder other users and containers may write: ``parse_curve`` takes
only what it can trust and drops the rest. The AM's side (reading the folder,
writing the curve) is ``runtime/sweep.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import median as median  # of an even count, the mean of the middle two
from typing import Any

from airflow_provider_tony.runtime.messages import EarlyStop, Progress
from airflow_provider_tony.runtime.messages_base import finite_number

#: A curve: step -> the metric's value at that step (finite floats only).
Curve = dict[int, float]

#: The curve file's format; a reader ignores files of another version.
CURVE_VERSION = 1
#: Points kept in one curve, read or written: the AM's history keeps at most a few hundred per task.
MAX_CURVE_POINTS = 2000
#: The most bytes of one curve file a reader takes (more: the file is ignored, not cut).
MAX_CURVE_BYTES = 128 * 1024


@dataclass(frozen=True)
class Rule:
    """The job's ``early_stopping`` as the rule needs it (``spec_data.EarlyStopping`` holds the field docs)."""

    metric: str
    mode: str  # "min": lower is better; "max": higher is better
    min_finished: int = 1
    grace_steps: int = 0


def value_at(curve: Mapping[int, float], step: int) -> float | None:
    """The curve's value at its newest step at or before ``step``; None when it has no such point."""
    best: int | None = None
    for s in curve:
        if s <= step and (best is None or s > best):
            best = s
    return None if best is None else curve[best]


def worse(value: float, than: float, mode: str) -> bool:
    """Strictly worse in the metric's direction: a tie is not worse."""
    return value > than if mode == "min" else value < than


def decide(rule: Rule, step: int, value: float, finished: Iterable[Mapping[int, float]]) -> EarlyStop | None:
    """The stop, if the trial's ``value`` at ``step`` is strictly worse than the finished trials' median.

    No stop before ``grace_steps``, for a value that is not a finite number, or when fewer than
    ``min_finished`` finished trials have a point at or before ``step`` (those without one are left out).
    """
    figure = finite_number(value)
    if step < rule.grace_steps or figure is None:
        return None
    values = [v for v in (value_at(curve, step) for curve in finished) if v is not None]
    if not values or len(values) < rule.min_finished:
        return None
    mid = median(values)
    if not worse(figure, mid, rule.mode):
        return None
    return EarlyStop(step=step, metric=rule.metric, value=figure, median=mid, finished_trials=len(values))


def curve_of(points: Iterable[Progress], metric: str) -> Curve:
    """A task's reports as a curve of ``metric``: the last value reported at each step, finite ones only."""
    curve: Curve = {}
    for point in points:
        value = finite_number(point.metrics.get(metric))
        if point.step is not None and value is not None:
            curve[int(point.step)] = value
    return _bounded(curve)


def curve_document(app_id: str, rule: Rule, curve: Mapping[int, float]) -> bytes:
    """The bytes of a finished trial's curve file (``<sweep>/<application id>.json``)."""
    body = {
        "version": CURVE_VERSION,
        "application_id": app_id,
        "metric": rule.metric,
        "mode": rule.mode,
        "points": [[s, v] for s, v in sorted(_bounded(dict(curve)).items())],
    }
    return json.dumps(body, separators=(",", ":")).encode()


def parse_curve(raw: bytes, rule: Rule) -> Curve | None:
    """A curve file's points, or None when it is not one of this rule's curves.

    The folder is shared and anyone may write it: a file too large, not JSON, of
    another version, metric or mode, or with no usable point is ignored whole;
    a point that is not ``[int step >= 0, finite number]`` is dropped.
    """
    if len(raw) > MAX_CURVE_BYTES:
        return None
    try:
        body: Any = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict) or body.get("version") != CURVE_VERSION:
        return None
    if body.get("metric") != rule.metric or body.get("mode") != rule.mode:
        return None
    points = body.get("points")
    if not isinstance(points, list):
        return None
    curve: Curve = {}
    for point in points[:MAX_CURVE_POINTS]:
        if not isinstance(point, list) or len(point) != 2:
            continue
        step, value = point[0], finite_number(point[1])
        if isinstance(step, bool) or not isinstance(step, int) or step < 0 or value is None:
            continue
        curve[step] = value
    return curve or None


def _bounded(curve: Curve) -> Curve:
    """At most ``MAX_CURVE_POINTS``: every other older point dropped until it fits, the newest kept."""
    steps = sorted(curve)
    while len(steps) > MAX_CURVE_POINTS:
        steps = steps[:-1][::2] + steps[-1:]
    return {s: curve[s] for s in steps}


__all__ = [
    "CURVE_VERSION",
    "MAX_CURVE_BYTES",
    "MAX_CURVE_POINTS",
    "Curve",
    "Rule",
    "curve_document",
    "curve_of",
    "decide",
    "median",
    "parse_curve",
    "value_at",
    "worse",
]
