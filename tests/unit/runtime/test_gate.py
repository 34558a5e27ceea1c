"""The quality gate (``runtime/gate.py``), its operator outcome and its page section, without a cluster.

HDFS is ``test_checkpoint``'s fake over a temporary folder (the ``hdfs.Client``
semantics that matter: rename, status, read/write); the operator runs against
``test_operator``'s fake hook, so these tests check decisions: which model is
published, which is set aside, what the task raises, what the XCom, the asset
event and the page say.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_tony.operators.tony import XCOM_QUALITY_GATE, QualityGateFailed
from airflow_provider_tony.runtime import gate
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.messages import GateResult, JobHistory
from airflow_provider_tony.runtime.page import render_page
from airflow_provider_tony.runtime.spec import JobSpec, QualityGate
from tests.unit.support.gate import MODEL, OTHER_APP, SubmitClient, export, gated_operator, model_bytes, spec
from tests.unit.support.hdfs import FakeHdfs
from tests.unit.support.operator import APP, final_document, succeeded


@pytest.mark.parametrize(
    ("mode", "value", "previous", "passed"),
    [
        ("max", 0.9, None, True),  # first model
        ("max", 0.9, 0.8, True),
        ("max", 0.8, 0.8, True),  # a tie is "at least as good"
        ("max", 0.79, 0.8, False),
        ("min", 0.3, 0.4, True),
        ("min", 0.4, 0.4, True),
        ("min", 0.41, 0.4, False),
        ("max", None, 0.8, False),  # no figure: nothing says it is good
        ("max", None, None, False),
    ],
)
def test_judge_compares_by_mode(mode: str, value: float | None, previous: float | None, passed: bool) -> None:
    ok, reason = gate.judge(QualityGate(metric="m", mode=mode), value, previous)
    assert ok is passed, reason
    assert "m" in reason and (value is None or f"{value:g}" in reason)
    if previous is not None and value is not None:
        assert f"{previous:g}" in reason, "both figures are in the words"


@pytest.mark.parametrize(
    ("mode", "tolerance", "value", "previous", "passed", "within"),
    [
        ("max", 0.01, 0.79, 0.8, True, True),  # 0.01 below: exactly the tolerance passes
        ("max", 0.01, 0.7899, 0.8, False, False),
        ("max", 0.01, 0.85, 0.8, True, False),  # better: not a tolerance case
        ("max", "2%", 0.785, 0.8, True, True),  # 2% of 0.8 = 0.016
        ("max", "2%", 0.78, 0.8, False, False),
        ("min", 0.05, 0.45, 0.4, True, True),
        ("min", 0.05, 0.46, 0.4, False, False),
        ("min", "10%", 0.43, 0.4, True, True),  # 10% of 0.4 = 0.04
        ("min", "10%", 0.45, 0.4, False, False),
        ("max", "10%", 0.9, -1.0, True, False),  # a negative figure: the percentage of its size
        ("max", "10%", -1.05, -1.0, True, True),
        ("max", "10%", -1.2, -1.0, False, False),
        ("max", 0.5, 0.1, None, True, False),  # first model
        ("max", 0.5, None, 0.8, False, False),  # no figure still fails, whatever the tolerance
    ],
)
def test_a_tolerance_lets_a_slightly_worse_model_pass_and_says_so(
    mode: str,
    tolerance: float | str,
    value: float | None,
    previous: float | None,
    passed: bool,
    within: bool,
) -> None:
    rule = QualityGate(metric="m", mode=mode, tolerance=tolerance)
    ok, reason = gate.judge(rule, value, previous)
    assert ok is passed, reason
    assert (ok and gate.within_tolerance(rule, value, previous)) is within
    if ok and within:
        assert "within the tolerance" in reason and str(tolerance) in reason
    elif not ok and value is not None and previous is not None:
        assert "beyond the tolerance" in reason


@pytest.mark.parametrize(
    ("given", "kept"),
    [(0.01, 0.01), ("0.02", 0.02), (" 2.5% ", "2.5%"), (0, 0), (None, None)],
)
def test_the_tolerance_field_takes_a_number_or_a_percentage(given: object, kept: object) -> None:
    assert QualityGate(metric="m", tolerance=given).tolerance == kept


@pytest.mark.parametrize("bad", [-0.1, "x", "-1%", "1 %%", True, math.nan, math.inf, [1]])
def test_a_bad_tolerance_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(SpecError, match=r"tolerance: .* is not a tolerance; give a number >= 0"):
        QualityGate(metric="m", tolerance=bad)


def test_a_model_within_the_tolerance_is_published_and_marked(tmp_path: Path) -> None:
    """Published like any passing model, with ``within_tolerance`` in the verdict (the XCom's ``quality_gate``)."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    lenient = JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"model_dir": MODEL},
            "quality_gate": {"metric": "val_accuracy", "tolerance": 0.02},
        }
    )
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    assert gate.apply(hdfs, lenient, OTHER_APP).within_tolerance is False
    export(hdfs, tmp_path, APP, 0.89)
    verdict = gate.apply(hdfs, lenient, APP)
    assert verdict.passed and verdict.within_tolerance, verdict.reason
    assert model_bytes(hdfs) == APP.encode()
    assert GateResult.from_dict(verdict.to_dict()).within_tolerance is True


def test_a_record_without_a_finite_number_has_no_figure() -> None:
    for raw in (math.nan, math.inf, "0.9", True, None):
        assert gate.ModelRecord("a", 1, {"m": raw}).figure("m") is None, raw
    assert gate.ModelRecord.from_json(b"not json") is None
    assert gate.ModelRecord.from_json(b'{"metrics": [1]}') is None
    assert gate.ModelRecord.from_json(b"x" * (gate.MAX_RECORD_BYTES + 1)) is None


def test_first_model_passes_then_a_worse_one_is_set_aside_and_a_better_one_replaces_it(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    first = gate.apply(hdfs, spec(), OTHER_APP, now=100.0)
    v1 = gate.version_dir(MODEL, OTHER_APP)
    assert first.passed and first.previous is None and first.value == 0.9 and first.model_dir == v1
    assert model_bytes(hdfs, v1) == OTHER_APP.encode()
    assert hdfs.status(gate.candidate_dir(MODEL, OTHER_APP), strict=False) is None, "the candidate became the version"
    meta = json.loads((hdfs.root / v1.lstrip("/") / gate.MODEL_METADATA).read_bytes())
    assert meta["application_id"] == OTHER_APP and meta["published_at"] == 100.0 and meta["model_dir"] == v1
    pointer = gate.read_record(hdfs, f"{MODEL}.versions/current.json")
    assert pointer is not None and (pointer.application_id, pointer.model_dir) == (OTHER_APP, v1)
    assert hdfs.status(gate.lock_path(MODEL), strict=False) is None, "the lock is released"

    export(hdfs, tmp_path, APP, 0.5)
    worse = gate.apply(hdfs, spec(), APP)
    assert not worse.passed and (worse.value, worse.previous) == (0.5, 0.9)
    assert worse.previous_application_id == OTHER_APP and worse.previous_model_dir == v1
    assert worse.model_dir == gate.rejected_dir(MODEL, APP)
    assert model_bytes(hdfs, v1) == OTHER_APP.encode(), "the published model is untouched"
    assert model_bytes(hdfs, gate.rejected_dir(MODEL, APP)) == APP.encode(), "the rejected one is kept to look at"
    again = gate.apply(hdfs, spec(), APP)
    assert not again.passed and again.model_dir == gate.rejected_dir(MODEL, APP), "judged again: still rejected"

    third = "application_1700000000000_0043"
    export(hdfs, tmp_path, third, 0.95)
    better = gate.apply(hdfs, spec(), third)
    v3 = gate.version_dir(MODEL, third)
    assert better.passed and (better.value, better.previous) == (0.95, 0.9) and better.model_dir == v3
    assert model_bytes(hdfs, v3) == third.encode() and model_bytes(hdfs, v1) == OTHER_APP.encode(), "versions stay"
    assert gate.apply(hdfs, spec(), third).passed, "judged again after promotion: still published"
    assert gate.published_record(hdfs, spec()).application_id == third  # type: ignore[union-attr]


def test_min_mode_and_a_separate_record_for_per_run_model_folders(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    record = "/user/airflow/models/digits-published.json"
    export(hdfs, tmp_path, OTHER_APP, 0.3)
    assert gate.apply(hdfs, spec(mode="min", record=record), OTHER_APP).passed
    assert json.loads((hdfs.root / record.lstrip("/")).read_bytes())["metrics"] == {"val_accuracy": 0.3}
    export(hdfs, tmp_path, APP, 0.4)
    verdict = gate.apply(hdfs, spec(mode="min", record=record), APP)
    assert not verdict.passed and verdict.previous == 0.3, "a higher loss fails under min"


def test_no_model_or_no_figure_fails_the_gate(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    nothing = gate.apply(hdfs, spec(), APP)
    assert not nothing.passed and "$TONY_MODEL_DIR" in nothing.reason
    export(hdfs, tmp_path, APP, None)
    unreported = gate.apply(hdfs, spec(), APP)
    assert not unreported.passed and "reported no numeric 'val_accuracy'" in unreported.reason
    assert hdfs.status(MODEL, strict=False) is None, "nothing was published"


def test_the_verdict_is_added_to_the_stored_history_and_shown_on_the_page(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    path = f"/user/airflow/tony/history/{APP}.json"
    hdfs.write(path, JobHistory(state=final_document(), name="digits").to_json())
    verdict = GateResult(
        metric="val_accuracy", value=0.5, previous=0.9, passed=False, model_dir="/m.rejected", reason="worse"
    )
    assert gate.annotate_history(hdfs, [path, "/nowhere.json"], verdict) == [path]
    stored = JobHistory.from_json((hdfs.root / path.lstrip("/")).read_bytes())
    assert stored.gate == verdict and stored.state is not None
    page = render_page(stored, refresh_s=None)
    assert 'id="quality-gate"' in page and "failed" in page and "0.5<" in page and "0.9<" in page
    assert "Quality gate" not in render_page(JobHistory(state=final_document()), refresh_s=None)


def test_the_spec_refuses_a_gate_without_a_model_and_best_n_without_a_metric() -> None:
    with pytest.raises(SpecError, match="quality_gate.metric"):
        JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "quality_gate": {"metric": "acc"}})
    with pytest.raises(SpecError, match="checkpoint.keep_best"):
        JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "checkpoint": {"keep_best": 2}})
    with pytest.raises(SpecError, match="mode"):
        QualityGate(metric="acc", mode="up")
    round_trip = JobSpec.from_dict(spec(mode="min", record="/r.json").to_dict())
    assert round_trip.quality_gate == QualityGate(metric="val_accuracy", mode="min", record="/r.json")


# --------------------------------------------------------------------------- the operator


@pytest.mark.parametrize("deferrable", [False, True])
def test_operator_publishes_a_passing_model_and_fails_a_worse_one_without_retries(
    tmp_path: Path, deferrable: bool
) -> None:
    from airflow_provider_tony.assets import model_asset
    from airflow_provider_tony.yarn.follower import TonyEvent

    asset = model_asset("digits")
    op, _hook, ctx, hdfs = gated_operator(tmp_path, deferrable=deferrable, model_asset=asset)
    export(hdfs, tmp_path, OTHER_APP, 0.95)
    assert gate.apply(hdfs, spec(), OTHER_APP).passed  # yesterday's model

    def run() -> Any:
        if deferrable:
            return op.execute_complete(ctx, TonyEvent.done(succeeded()).to_dict())
        return op.execute(ctx)

    export(hdfs, tmp_path, APP, 0.91)  # final_document() reports val_accuracy 0.91 too
    with pytest.raises(QualityGateFailed) as info:
        run()
    assert isinstance(info.value, AirflowFailException), "a failed gate is not retried"
    assert "0.91" in str(info.value) and "0.95" in str(info.value), "both figures in the message"
    verdict = ctx["ti"].xcom[XCOM_QUALITY_GATE]
    assert verdict["passed"] is False and (verdict["value"], verdict["previous"]) == (0.91, 0.95)
    assert dict(ctx["outlet_events"]) == {}, "no asset event for a model that was not published"
    assert model_bytes(hdfs) == OTHER_APP.encode()


def test_operator_passes_a_first_model_into_the_xcom_and_the_asset_event(tmp_path: Path) -> None:
    from airflow_provider_tony.assets import model_asset

    asset = model_asset("digits")
    op, _hook, ctx, hdfs = gated_operator(tmp_path, deferrable=False, model_asset=asset)
    export(hdfs, tmp_path, APP, 0.91)
    value = op.execute(ctx)
    assert value[XCOM_QUALITY_GATE]["passed"] is True and value["model_dir"] == gate.version_dir(MODEL, APP)
    assert ctx["ti"].xcom[XCOM_QUALITY_GATE] == value[XCOM_QUALITY_GATE]
    extra = ctx["outlet_events"][asset].extra
    assert extra["model_dir"] == gate.version_dir(MODEL, APP) and extra[XCOM_QUALITY_GATE]["value"] == 0.91
    assert model_bytes(hdfs) == APP.encode()


# --------------------------------------------------------------------------- the executor's side


class FakeApp:
    """The executor's skein ApplicationClient: only the key-value store (events go there)."""

    def __init__(self) -> None:
        self.kv: dict[str, bytes] = {}


@pytest.mark.parametrize("gated", [True, False])
def test_the_executor_exports_a_gated_model_as_a_candidate_with_its_metadata(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gated: bool
) -> None:
    from airflow_provider_tony.runtime import executor, hdfs_io
    from airflow_provider_tony.runtime import progress as progress_api

    hdfs = FakeHdfs(tmp_path / "hdfs")
    monkeypatch.setattr(hdfs_io, "client_from_env", lambda env, kv=None: hdfs)
    workdir = tmp_path / "work"
    (workdir / executor.MODEL_DIR).mkdir(parents=True)
    (workdir / executor.MODEL_DIR / "saved_model.pb").write_bytes(b"model")
    monkeypatch.setenv("TONY_PROGRESS_FILE", str(workdir / executor.PROGRESS_FILE))
    assert progress_api.report(step=7, val_accuracy=0.93)
    job = (
        spec()
        if gated
        else JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "checkpoint": {"model_dir": MODEL}})
    )
    env = {"SKEIN_APPLICATION_ID": APP}
    code, _tail = executor.export_model(FakeApp(), job, workdir, env, "worker:0", 0, [], "1-1-1")
    assert code == 0
    where = gate.candidate_dir(MODEL, APP) if gated else MODEL
    assert model_bytes(hdfs, where) == b"model"
    assert (hdfs.status(MODEL, strict=False) is None) is gated, "a gated model is not published by the executor"
    meta = json.loads((hdfs.root / where.lstrip("/") / gate.MODEL_METADATA).read_bytes())
    assert meta["application_id"] == APP and meta["step"] == 7 and meta["metrics"] == {"val_accuracy": 0.93}


def test_the_uploader_ranks_checkpoints_by_the_gates_metric(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_tony.runtime import checkpoint, executor
    from airflow_provider_tony.runtime import progress as progress_api

    job = JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"model_dir": MODEL, "keep_best": 2},
            "quality_gate": {"metric": "val_loss", "mode": "min"},
        }
    )
    assert executor.best_of(job) == checkpoint.BestOf(2, "val_loss", "min")
    assert executor.best_of(spec()) is None, "keep_best 0: only the newest are kept"
    progress_file = tmp_path / "progress.json"
    assert executor.latest_metrics(progress_file) is None
    monkeypatch.setenv("TONY_PROGRESS_FILE", str(progress_file))
    assert progress_api.report(step=3, val_loss=0.25)
    assert executor.latest_metrics(progress_file) == {"val_loss": 0.25}


# --------------------------------------------------------------------------- tony submit


def test_tony_submit_judges_the_model_and_exits_3_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    from airflow_provider_tony import cli

    hdfs = FakeHdfs(tmp_path / "hdfs")
    monkeypatch.setattr(cli, "_client", lambda: SubmitClient(hdfs))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(spec().to_dict()))
    export(hdfs, tmp_path, OTHER_APP, 0.95)
    assert gate.apply(hdfs, spec(), OTHER_APP).passed
    export(hdfs, tmp_path, APP, 0.5)
    assert cli.main(["submit", str(job)]) == cli.EXIT_GATE_FAILED
    out = capsys.readouterr().out
    assert "quality gate FAILED" in out and "this run 0.5, published model 0.95" in out
    assert model_bytes(hdfs) == OTHER_APP.encode()


def test_a_passing_verdict_and_its_publication_are_logged_once(tmp_path: Path) -> None:
    """The mixin asks for the result after polling returned it: the verdict is not said twice."""
    from airflow_provider_tony.assets import model_asset

    asset = model_asset("digits")
    op, _hook, ctx, hdfs = gated_operator(tmp_path, deferrable=False, model_asset=asset)
    export(hdfs, tmp_path, APP, 0.91)
    said: list[str] = []
    real_info = op.log.info
    op.log.info = lambda msg, *args, **kw: said.append(msg % args if args else msg) or real_info(msg, *args, **kw)  # type: ignore[method-assign]
    op.execute(ctx)
    assert sum("quality gate passed" in line for line in said) == 1, said
    assert sum("published: asset" in line for line in said) == 1, said


# --------------------------------------------------------------------------- publishing: atomic, one at a time


class CrashingHdfs(FakeHdfs):
    """Dies on the second rename of a publication (``rename`` or ``move``, whichever the gate uses)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.crash_at: int | None = None
        self.renames = 0

    def _maybe_crash(self, src: str, dst: str) -> None:
        self.renames += 1
        if self.renames == self.crash_at:
            self.crash_at = None
            raise RuntimeError(f"worker died renaming {src} to {dst}")

    def rename(self, src: str, dst: str) -> None:
        self._maybe_crash(src, dst)
        super().rename(src, dst)

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        self._maybe_crash(src, dst)
        super().move(src, dst, overwrite)


def test_a_crash_between_the_two_steps_keeps_the_last_good_model_and_the_retry_finishes(tmp_path: Path) -> None:
    """Issue 35, point 5: before, a worker dying between ``model_dir -> .previous`` and ``candidate -> model_dir``
    left nothing at the model's path; the retry then judged "first model, no comparison"."""
    hdfs = CrashingHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    assert gate.apply(hdfs, spec(), OTHER_APP).passed
    export(hdfs, tmp_path, APP, 0.95)
    hdfs.renames, hdfs.crash_at = 0, 2
    with pytest.raises(Exception, match="worker died"):
        gate.apply(hdfs, spec(), APP)
    assert model_bytes(hdfs) == OTHER_APP.encode(), "between the steps the last good model is still published"
    retry = gate.apply(hdfs, spec(), APP)
    assert retry.passed and (retry.value, retry.previous) == (0.95, 0.9), "compared with the last good model"
    assert retry.previous_application_id == OTHER_APP
    assert model_bytes(hdfs) == APP.encode()
    assert gate.published_record(hdfs, spec()).application_id == APP  # type: ignore[union-attr]


def test_a_pointer_from_before_versions_is_compared_with(tmp_path: Path) -> None:
    """A model published by an older release (``tony-model.json`` inside ``model_dir``) is the previous one."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    hdfs.write(f"{MODEL}/{gate.MODEL_METADATA}", gate.ModelRecord(OTHER_APP, 5, {"val_accuracy": 0.9}, MODEL).to_json())
    export(hdfs, tmp_path, APP, 0.8)
    verdict = gate.apply(hdfs, spec(), APP)
    assert not verdict.passed and verdict.previous == 0.9 and verdict.previous_model_dir == MODEL


def test_a_record_file_is_the_pointer_and_names_the_version(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    record = "/user/airflow/models/digits-published.json"
    export(hdfs, tmp_path, APP, 0.9)
    assert gate.apply(hdfs, spec(record=record), APP).passed
    published = gate.read_record(hdfs, record)
    assert published is not None and published.model_dir == gate.version_dir(MODEL, APP)
    assert hdfs.status(f"{MODEL}.versions/current.json", strict=False) is None, "one pointer, not two"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class TimedHdfs(FakeHdfs):
    """Status with a modification time (what the stale-lock rule reads), from a clock."""

    def __init__(self, root: Path, clock: Clock) -> None:
        super().__init__(root)
        self.clock = clock
        self.mtimes: dict[str, float] = {}

    def write(self, hdfs_path: str, data: bytes, overwrite: bool = False, **kwargs: Any) -> None:
        super().write(hdfs_path, data, overwrite, **kwargs)
        self.mtimes[hdfs_path] = self.clock.now

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        found = super().status(path, strict)
        if found is not None and path in self.mtimes:
            found["modificationTime"] = int(self.mtimes[path] * 1000)
        return found


def test_the_publish_lock_waits_for_a_live_holder_breaks_a_stale_one_and_reenters_its_own(tmp_path: Path) -> None:
    from airflow_provider_tony.runtime import publish_lock

    clock = Clock()
    hdfs = TimedHdfs(tmp_path / "hdfs", clock)
    lock = gate.lock_path(MODEL)
    kw: dict[str, Any] = {"clock": clock, "sleep": clock.sleep}
    publish_lock.take(hdfs, lock, OTHER_APP, wait_s=30, stale_s=600, **kw)
    with pytest.raises(publish_lock.LockBusy, match=rf"held by {OTHER_APP}.*hdfs dfs -rm {lock}"):
        publish_lock.take(hdfs, lock, APP, wait_s=30, stale_s=600, **kw)
    publish_lock.release(hdfs, lock, APP)
    assert hdfs.status(lock, strict=False) is not None, "only its holder releases a lock"
    publish_lock.take(hdfs, lock, OTHER_APP, wait_s=0, stale_s=600, **kw)  # its own retry carries on
    clock.now += 601
    publish_lock.take(hdfs, lock, APP, wait_s=0, stale_s=600, **kw)
    holder = publish_lock.LockHolder.from_json((hdfs.root / lock.lstrip("/")).read_bytes())
    assert holder is not None and holder.application_id == APP, "a dead gate's lock is broken"
    publish_lock.release(hdfs, lock, APP)
    assert hdfs.status(lock, strict=False) is None


def test_a_gate_waits_while_another_run_publishes(tmp_path: Path) -> None:
    from airflow_provider_tony.runtime import publish_lock

    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, APP, 0.9)
    hdfs.write(gate.lock_path(MODEL), publish_lock.LockHolder(OTHER_APP, "node7", 42).to_json())
    with pytest.raises(publish_lock.LockBusy, match="node7"):
        gate.apply(hdfs, spec(), APP, lock_wait_s=0)
    assert gate.where_is(hdfs, MODEL, APP) == gate.candidate_dir(MODEL, APP), "nothing moved"


def approving(tolerance: float = 0.02) -> JobSpec:
    return JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"model_dir": MODEL},
            "quality_gate": {"metric": "val_accuracy", "tolerance": tolerance, "approval": True},
        }
    )


THIRD_APP = "application_1700000000000_0043"


@pytest.mark.parametrize("value, held", [(0.91, False), (0.9, False), (0.89, True), (0.88, True), (0.87, False)])
def test_approval_holds_only_a_model_that_passes_thanks_to_the_tolerance(
    tmp_path: Path, value: float, held: bool
) -> None:
    """At least as good: published at once; within the tolerance (0.88 is its edge): held, nothing moved;
    beyond it: refused as without approval."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    assert gate.apply(hdfs, approving(), OTHER_APP).passed
    export(hdfs, tmp_path, APP, value)
    verdict = gate.apply(hdfs, approving(), APP)
    assert verdict.awaiting_approval is held and (verdict.passed is (value >= 0.9)), verdict.reason
    if held:
        assert verdict.model_dir == gate.candidate_dir(MODEL, APP) == gate.where_is(hdfs, MODEL, APP)
        assert "held for a person's approval" in verdict.reason
        assert model_bytes(hdfs) == OTHER_APP.encode(), "the published model stays until approved"
        assert GateResult.from_dict(verdict.to_dict()).awaiting_approval is True


def test_an_approved_model_is_published_and_approval_never_saves_one_beyond_the_tolerance(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    gate.apply(hdfs, approving(), OTHER_APP)
    export(hdfs, tmp_path, APP, 0.89)
    assert gate.apply(hdfs, approving(), APP).awaiting_approval
    again = gate.apply(hdfs, approving(), APP)  # asking again without the yes holds it again
    assert again.awaiting_approval and gate.where_is(hdfs, MODEL, APP) == gate.candidate_dir(MODEL, APP)
    verdict = gate.apply(hdfs, approving(), APP, approved=True)
    assert verdict.passed and not verdict.awaiting_approval and verdict.within_tolerance
    assert model_bytes(hdfs) == APP.encode()
    export(hdfs, tmp_path, THIRD_APP, 0.5)
    refused = gate.apply(hdfs, approving(), THIRD_APP, approved=True)
    assert (
        not refused.passed
        and not refused.awaiting_approval
        and refused.model_dir == gate.rejected_dir(MODEL, THIRD_APP)
    )


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_approval_must_be_true_or_false(bad: object) -> None:
    with pytest.raises(SpecError, match=r"approval: .* is not true or false"):
        QualityGate(metric="m", approval=bad)
