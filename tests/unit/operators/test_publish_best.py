"""``TonyPublishBestOperator`` and ``TonyOperator(publish=False)``: a sweep publishes its best trial once.

On the in-memory HDFS of the gate tests: each trial's model waits as a candidate (the trials
publish nothing), the best goes through the gate, the others stay where they were.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_tony.assets import model_asset
from airflow_provider_tony.operators.publish_best import TonyPublishBestOperator
from airflow_provider_tony.operators.tony import XCOM_QUALITY_GATE, QualityGateFailed
from airflow_provider_tony.runtime import gate
from tests.unit.support.gate import MODEL, OTHER_APP, export, gated_operator, model_bytes, spec
from tests.unit.support.hdfs import FakeHdfs
from tests.unit.support.operator import APP, FakeTI, OutletEvents

THIRD_APP = "application_1700000000000_0043"


def trial(app: str, accuracy: float, **extra: Any) -> dict[str, Any]:
    return {
        "application_id": app,
        "name": f"trial-{app[-4:]}",
        "final_state": "SUCCEEDED",
        "metrics": {"val_accuracy": accuracy},
        "model_dir": gate.candidate_dir(MODEL, app),
        "candidate": True,
        **extra,
    }


def publisher(hdfs: FakeHdfs, trials: list[Any]) -> tuple[TonyPublishBestOperator, dict[str, Any]]:
    op = TonyPublishBestOperator(
        task_id="publish_best", trials=trials, job=spec().to_dict(), model_asset=model_asset("digits-sweep")
    )
    op._hook = SimpleNamespace(  # type: ignore[assignment]
        webhdfs_for=lambda spec: hdfs, history_dir="/user/airflow/tony/history"
    )
    return op, {"ti": FakeTI(), "outlet_events": OutletEvents()}


def test_the_best_trial_is_published_once_and_the_others_stay_candidates(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    for app, accuracy in ((APP, 0.8), (OTHER_APP, 0.9), (THIRD_APP, 0.95)):
        export(hdfs, tmp_path, app, accuracy)
    stopped = trial(THIRD_APP, 0.95, early_stopped={"step": 10, "metric": "loss", "value": 2.0, "median": 1.0})
    op, ctx = publisher(hdfs, [trial(APP, 0.8), trial(OTHER_APP, 0.9), stopped])
    value = op.execute(ctx)  # type: ignore[arg-type]
    assert value["application_id"] == OTHER_APP and value["model_dir"] == gate.version_dir(MODEL, OTHER_APP)
    assert model_bytes(hdfs) == OTHER_APP.encode(), "the pointer names the best trial's version"
    assert [c["application_id"] for c in value["candidates"]] == [APP]
    assert [s["application_id"] for s in value["stopped"]] == [THIRD_APP]
    assert gate.where_is(hdfs, MODEL, APP) == gate.candidate_dir(MODEL, APP), "the runner-up stays a candidate"
    versions = [p.name for p in (hdfs.root / gate.versions_dir(MODEL).lstrip("/")).iterdir() if p.is_dir()]
    assert versions == [OTHER_APP], "one publication"
    assert ctx["ti"].xcom[XCOM_QUALITY_GATE]["passed"] is True
    (event,) = ctx["outlet_events"].values()
    assert event.extra["model_dir"] == value["model_dir"] and event.extra["application_id"] == OTHER_APP


def test_no_trial_to_publish_fails_without_retry_and_a_worse_best_is_refused(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    op, ctx = publisher(hdfs, [trial(APP, 0.9, final_state="FAILED")])
    with pytest.raises(AirflowFailException, match="no trial of the sweep can be published"):
        op.execute(ctx)  # type: ignore[arg-type]
    export(hdfs, tmp_path, APP, 0.9)
    publisher(hdfs, [trial(APP, 0.9)])[0].execute({"ti": FakeTI(), "outlet_events": OutletEvents()})  # type: ignore[arg-type]
    export(hdfs, tmp_path, OTHER_APP, 0.5)
    op, ctx = publisher(hdfs, [trial(OTHER_APP, 0.5)])
    with pytest.raises(QualityGateFailed):
        op.execute(ctx)  # type: ignore[arg-type]
    assert model_bytes(hdfs) == APP.encode() and not ctx["outlet_events"], "the published model stays, no event"


def test_a_sweep_job_without_a_gate_is_refused_before_anything_is_read(tmp_path: Path) -> None:
    op, ctx = publisher(FakeHdfs(tmp_path), [trial(APP, 0.9)])
    op.job = {"roles": {"worker": {"command": ["true"]}}}
    with pytest.raises(AirflowFailException, match="no quality_gate.metric"):
        op.execute(ctx)  # type: ignore[arg-type]


def test_a_trial_with_publish_false_keeps_its_model_a_candidate(tmp_path: Path) -> None:
    op, _hook, ctx, hdfs = gated_operator(tmp_path, deferrable=False, publish=False)
    export(hdfs, tmp_path, APP, 0.9)
    op._spec = op.build_spec(ctx)
    value = op.get_job_result(APP, ctx)
    assert value["candidate"] is True and value["model_dir"] == gate.candidate_dir(op._spec.checkpoint.model_dir, APP)
    assert XCOM_QUALITY_GATE not in ctx["ti"].xcom and not ctx["outlet_events"], "nothing judged, no event"
    assert gate.published_record(hdfs, spec()) is None


def test_a_model_awaiting_approval_succeeds_unpublished_and_is_published_once_approved(tmp_path: Path) -> None:
    """The example nightly DAG's path: the train task holds a model within tolerance (no event, the task
    succeeds), a person approves, ``publish_approved`` publishes it; without the yes it is held again."""
    op, _hook, ctx, hdfs = gated_operator(tmp_path, deferrable=False)
    op.job["quality_gate"] = {"metric": "val_accuracy", "tolerance": 0.05, "approval": True}
    export(hdfs, tmp_path, OTHER_APP, 0.92)
    gate.apply(hdfs, spec(), OTHER_APP)
    export(hdfs, tmp_path, APP, 0.9)
    op._spec = op.build_spec(ctx)
    held = op.get_job_result(APP, ctx)
    assert held["candidate"] and held["quality_gate"]["awaiting_approval"] and not ctx["outlet_events"]
    job = {**spec().to_dict(), "quality_gate": op.job["quality_gate"]}
    for approved, published in ((False, OTHER_APP), (True, APP)):
        publish = TonyPublishBestOperator(task_id="publish_approved", trials=[held], job=job, approved=approved)
        publish._hook = SimpleNamespace(webhdfs_for=lambda spec: hdfs, history_dir="/h")  # type: ignore[assignment]
        value = publish.execute({"ti": FakeTI(), "outlet_events": OutletEvents()})  # type: ignore[arg-type]
        assert value["quality_gate"]["awaiting_approval"] is not approved
        assert model_bytes(hdfs) == published.encode()
