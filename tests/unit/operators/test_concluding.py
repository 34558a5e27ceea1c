"""What the task log says when a job is concluded: each step in its own words, once per operator.

``Concluding._concluded`` is driven with a made-up ``Conclusion`` (``conclude`` replaced: its own
logic is tested in tests/unit/test_conclusion.py), so every best-effort step that failed, the
folders retention removed and the published model are all in one log. The words are a contract:
``make demo`` and the nightly tests read the "model ... published" line.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from airflow_provider_tony.assets import model_asset
from airflow_provider_tony.conclusion import Conclusion
from airflow_provider_tony.operators import concluding, identity
from airflow_provider_tony.runtime.messages import Cost
from airflow_provider_tony.runtime.spec import JobSpec
from tests.unit.support.operator import APP, OutletEvents, log_lines, operator, succeeded

COST = Cost(vcore_seconds=120, memory_mb_seconds=245760, final=True)


def test_each_step_of_the_conclusion_is_told_once_in_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    asset = model_asset("digits")
    op, _hook, ctx = operator(succeeded(), model_asset=asset)
    op._spec = JobSpec.from_dict(op.job)
    ctx["outlet_events"] = OutletEvents()
    ended = dataclasses.replace(succeeded(), cost=COST)
    done = Conclusion(
        ended,
        published=True,
        pruned=(("/runs/old-1", "older than 7 days"),),
        cost_error=OSError("RM gone"),
        history_error=OSError("history unwritable"),
        retention_error=OSError("quota"),
    )
    asked: list[Any] = []

    def conclude(hook: Any, spec: Any, result: Any, *, runs: Any, publish: bool) -> Conclusion:
        asked.append((result.app_id, runs.folder))
        return done

    monkeypatch.setattr(concluding, "conclude", conclude)
    lines = log_lines(op, monkeypatch)
    value = op._concluded(succeeded(), ctx)
    folder = identity.task_folder(op.hook.base_path, ctx["ti"])
    assert asked == [(APP, folder)], "retention's scope is the task's own folder"
    told = [line for line in lines if not line.startswith("info: result: ")]
    assert told == [
        f"warning: no final cost for {APP}: RM gone",
        f"info: cost of {APP}: {COST.line()}",
        f"info: {APP} SUCCEEDED: worker:0 succeeded",
        "warning: could not add the gate's verdict to the job's history: history unwritable",
        "info: retention: removing /runs/old-1 (older than 7 days)",
        f"warning: retention: could not prune {folder}: quota",
        f"info: model {value['model_dir']} published: asset {asset.uri}",
    ]
    assert ctx["outlet_events"][asset].extra["application_id"] == APP
    # Asked again for the same application (the mixin does, after polling returned): the same XCom, nothing twice.
    assert op._concluded(succeeded(), ctx) is value and len(asked) == 1 and len(told) == 7


def test_nothing_failed_says_nothing_of_it(monkeypatch: pytest.MonkeyPatch) -> None:
    op, _hook, ctx = operator(succeeded())
    op._spec = JobSpec.from_dict(op.job)
    monkeypatch.setattr(concluding, "conclude", lambda hook, spec, result, *, runs, publish: Conclusion(result))
    lines = log_lines(op, monkeypatch)
    op._concluded(succeeded(), ctx)
    assert [line for line in lines if not line.startswith("info: result: ")] == [
        f"info: {APP} SUCCEEDED: worker:0 succeeded"
    ]


def test_another_application_is_concluded_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    op, _hook, ctx = operator(succeeded())
    op._spec = JobSpec.from_dict(op.job)
    asked: list[str] = []

    def conclude(hook: Any, spec: Any, result: Any, *, runs: Any, publish: bool) -> Conclusion:
        asked.append(result.app_id)
        return Conclusion(result)

    monkeypatch.setattr(concluding, "conclude", conclude)
    first = op._concluded(succeeded(), ctx)
    other = dataclasses.replace(succeeded(), app_id="application_1700000000000_0043")
    second = op._concluded(other, ctx)
    assert asked == [APP, other.app_id] and second["application_id"] == other.app_id != first["application_id"]
