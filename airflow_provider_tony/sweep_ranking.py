"""A sweep's trials, from their tasks' XCom results: which one is best, which stay candidates, which stopped.

A sweep maps one ``TonyOperator`` (``publish=False``) over its parameters; each trial's model
waits as a candidate (``<model_dir>.candidate-<application id>``). One task after the sweep
(``operators/publish_best.py``) reads the trials' results, ranks them here and sends only the
best through the quality gate: one publication per sweep, whatever the number of trials. The
ranking is pure (no Airflow, no cluster) so its edges are unit-tested.

What a result says is the trial's own report (its script's metrics): a trial that wrote text
or NaN for the metric has no figure and cannot win; a trial stopped by the median rule
(``early_stopped``) or that did not succeed has no model to publish.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_tony.runtime.messages_base import finite_number

__all__ = ["Trial", "Ranking", "rank"]


@dataclass(frozen=True)
class Trial:
    """One trial as its result tells it: position in the sweep, name, application, figure, why it is out."""

    index: int
    name: str
    application_id: str
    value: float | None
    model_dir: str
    out: str = ""  # why it cannot be published ("" = it can)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "application_id": self.application_id,
            "value": self.value,
            "model_dir": self.model_dir,
            **({"out": self.out} if self.out else {}),
        }


@dataclass(frozen=True)
class Ranking:
    """The best trial (None: no trial can be published), the other candidates best first, and the rest."""

    best: Trial | None
    candidates: tuple[Trial, ...]
    out: tuple[Trial, ...]

    @property
    def stopped(self) -> tuple[Trial, ...]:
        return tuple(t for t in self.out if t.out.startswith("stopped early"))


def _trial(index: int, result: Any, metric: str) -> Trial:
    if not isinstance(result, Mapping):
        return Trial(index, f"trial {index}", "", None, "", "no result (the task did not return one)")
    metrics = result.get("metrics") if isinstance(result.get("metrics"), Mapping) else {}
    assert isinstance(metrics, Mapping)
    value = finite_number(metrics.get(metric))
    verdict = result.get("quality_gate")
    if value is None and isinstance(verdict, Mapping) and verdict.get("metric") == metric:
        value = finite_number(verdict.get("value"))  # a held model's figure, as the gate read it from the model
    name = str(result.get("name") or f"trial {index}")
    app = str(result.get("application_id") or "")
    model_dir = str(result.get("model_dir") or "")
    stopped = result.get("early_stopped")
    if isinstance(stopped, Mapping):
        out = f"stopped early at step {stopped.get('step')} (median rule)"
    elif result.get("final_state") != "SUCCEEDED":
        out = f"did not succeed ({result.get('final_state')})"
    elif not result.get("candidate"):
        out = "its model is no candidate (run the trials with publish=False and a quality_gate)"
    elif value is None:
        out = f"reported no numeric {metric!r}"
    else:
        out = ""
    return Trial(index, name, app, value, model_dir, out)


def rank(results: Iterable[Any], metric: str, mode: str) -> Ranking:
    """The trials ranked by ``metric`` (``mode`` ``max`` or ``min``); a tie goes to the earlier trial."""
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', not {mode!r}")
    trials = [_trial(i, r, metric) for i, r in enumerate(results)]
    eligible = [t for t in trials if not t.out]
    sign = -1.0 if mode == "max" else 1.0
    eligible.sort(key=lambda t: (sign * (t.value or 0.0), t.index))
    if not eligible:
        return Ranking(None, (), tuple(trials))
    return Ranking(eligible[0], tuple(eligible[1:]), tuple(t for t in trials if t.out))
