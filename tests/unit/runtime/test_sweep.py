"""The AM's side of early_stopping (runtime/sweep.py, ApplicationMaster.check_early_stop/record_curve):
the sweep folder read within bounds, a losing trial stopped as a success with the stop in its state
document, a finished trial's curve written whole, and HDFS trouble never deciding the job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_tony.runtime import sweep as sweep_module
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.median_stop import Rule, curve_document
from airflow_provider_tony.runtime.messages import Progress, TaskState
from airflow_provider_tony.runtime.state import Verdict
from tests.unit.support.am import FakeApp
from tests.unit.support.hdfs import FakeHdfs
from tests.unit.support.tracker import T0, make_spec, run_gang

SWEEP = "/user/alice/sweeps/s1"
APP = "application_1_0002"
LOSS = Rule("loss", "min")


def _am(hdfs: FakeHdfs, **stopping: object) -> ApplicationMaster:
    spec = make_spec(
        {"chief": 1, "worker": 1},
        early_stopping={"rule": "median", "metric": "loss", "sweep": SWEEP, **stopping},
    )
    am = ApplicationMaster(FakeApp(), spec, APP)
    am.hdfs = lambda: hdfs  # type: ignore[method-assign]
    run_gang(am.tracker, T0 + 1)
    return am


def _report(am: ApplicationMaster, task_id: str, *points: tuple[int, float]) -> None:
    am.keep_points(task_id, [Progress(step=s, time=float(s), metrics={"loss": v}) for s, v in points])


def _finished(hdfs: FakeHdfs, app_id: str, curve: dict[int, float]) -> None:
    hdfs.write(f"{SWEEP}/{app_id}.json", curve_document(app_id, LOSS, curve))


def test_a_trial_worse_than_the_finished_ones_is_stopped_as_a_success(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    _finished(hdfs, "application_1_0001", {0: 0.0, 100: 0.0})
    am = _am(hdfs)
    _report(am, "chief:0", (1, 0.0), (2, 0.5))
    verdict = am.check_early_stop(T0 + 2)
    assert verdict is not None and verdict.succeeded
    assert verdict.early_stopped is not None
    assert verdict.early_stopped.to_dict() == {
        "step": 2,
        "metric": "loss",
        "value": 0.5,
        "median": 0.0,
        "finished_trials": 1,
    }
    assert "stopped early by the median rule at step 2" in verdict.diagnostics
    am.stop_remaining()
    doc = am.tracker.document(T0 + 3, 0.0, 1, APP)
    assert doc.app_state == "SUCCEEDED" and doc.final
    assert doc.early_stopped == verdict.early_stopped
    assert all(t.state == TaskState.STOPPED.value for t in doc.tasks.values())
    assert "median rule" in doc.tasks["chief:0"].message
    assert any("stopped early" in line for line in doc.artefacts)


def test_a_tie_or_a_better_trial_runs_on(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    _finished(hdfs, "application_1_0001", {0: 1.0})
    am = _am(hdfs)
    _report(am, "chief:0", (1, 1.0), (2, 0.9))
    assert am.check_early_stop(T0 + 2) is None
    assert am.tracker.verdict is None


def test_nothing_is_judged_before_the_gang_runs_and_a_step_is_judged_once(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    am = _am(hdfs)
    _report(am, "chief:0", (1, 5.0))
    assert am.check_early_stop(T0 + 2) is None  # no finished trial yet: step 1 judged, not stopped
    _finished(hdfs, "application_1_0001", {0: 0.0})
    assert am.check_early_stop(T0 + 2 + sweep_module.READ_EVERY_S) is None  # step 1 is not judged again
    _report(am, "chief:0", (2, 5.0))
    verdict = am.check_early_stop(T0 + 3 + sweep_module.READ_EVERY_S)
    assert verdict is not None and verdict.early_stopped is not None and verdict.early_stopped.step == 2


def test_the_folder_is_read_every_few_seconds_not_every_tick(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    hdfs.makedirs(SWEEP)
    am = _am(hdfs)
    am.check_early_stop(T0 + 2)
    am.check_early_stop(T0 + 2 + sweep_module.READ_EVERY_S - 0.01)
    assert hdfs.count("list") == 1
    am.check_early_stop(T0 + 2 + sweep_module.READ_EVERY_S)
    assert hdfs.count("list") == 2


def test_the_grace_steps_and_min_finished_hold_the_rule_back(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    _finished(hdfs, "application_1_0001", {0: 0.0})
    am = _am(hdfs, grace_steps=3, min_finished=2)
    _report(am, "chief:0", (2, 9.0), (3, 9.0))
    assert am.check_early_stop(T0 + 2) is None  # step 2 in grace, step 3 has one finished trial of 2
    _finished(hdfs, "application_1_0003", {0: 0.0})
    _report(am, "chief:0", (4, 9.0))
    verdict = am.check_early_stop(T0 + 2 + sweep_module.READ_EVERY_S)
    assert verdict is not None and verdict.early_stopped is not None
    assert (verdict.early_stopped.step, verdict.early_stopped.finished_trials) == (4, 2)


def test_the_first_role_reporting_the_metric_is_judged_when_the_chief_does_not(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    _finished(hdfs, "application_1_0001", {0: 0.0})
    am = _am(hdfs)
    am.keep_points("chief:0", [Progress(step=1, time=1.0, metrics={"accuracy": 0.1})])
    _report(am, "worker:0", (1, 3.0))
    verdict = am.check_early_stop(T0 + 2)
    assert verdict is not None and verdict.early_stopped is not None and verdict.early_stopped.value == 3.0


def test_untrusted_files_are_ignored_and_reads_are_bounded(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    hdfs.write(f"{SWEEP}/garbage.json", b"{not json")
    hdfs.write(f"{SWEEP}/huge.json", b" " * (sweep_module.MAX_CURVE_BYTES + 1))
    hdfs.write(f"{SWEEP}/.half-written.json", curve_document("x", LOSS, {0: 0.0}))  # a temporary name
    hdfs.write(f"{SWEEP}/notes.txt", curve_document("x", LOSS, {0: 0.0}))
    hdfs.write(f"{SWEEP}/{APP}.json", curve_document(APP, LOSS, {0: 0.0}))  # this trial's own name
    hdfs.makedirs(f"{SWEEP}/folder.json")
    am = _am(hdfs)
    _report(am, "chief:0", (1, 5.0))
    assert am.check_early_stop(T0 + 2) is None
    assert am.sweep is not None and am.sweep.curves == {}
    read = {path for name, path in hdfs.calls if name == "read"}
    assert read == {f"{SWEEP}/garbage.json"}  # the oversized file not even opened


def test_at_most_a_few_new_files_are_read_per_look_and_each_only_once(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    count = sweep_module.MAX_READS_PER_LOOK + 5
    for i in range(count):
        _finished(hdfs, f"application_1_{1000 + i}", {0: 0.0})
    am = _am(hdfs)
    assert am.sweep is not None
    am.sweep.look(T0)
    assert hdfs.count("read") == sweep_module.MAX_READS_PER_LOOK
    am.sweep.look(T0 + sweep_module.READ_EVERY_S)
    assert hdfs.count("read") == count and len(am.sweep.curves) == count
    am.sweep.look(T0 + 2 * sweep_module.READ_EVERY_S)
    assert hdfs.count("read") == count


def test_hdfs_trouble_stops_nothing_and_keeps_the_curves_read(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    hdfs = FakeHdfs(tmp_path)
    _finished(hdfs, "application_1_0001", {0: 0.0})
    am = _am(hdfs)
    assert am.sweep is not None
    am.sweep.look(T0)
    hdfs.broken.add("list")
    am.sweep.look(T0 + sweep_module.READ_EVERY_S)
    assert "could not read the sweep folder" in caplog.text
    assert len(am.sweep.curves) == 1
    hdfs.broken.add("status")
    _report(am, "chief:0", (1, 0.0))
    assert am.check_early_stop(T0 + 2 * sweep_module.READ_EVERY_S) is None  # no error raised


def test_a_finished_trial_writes_its_curve_under_a_temporary_name_then_renames_it(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    am = _am(hdfs)
    _report(am, "chief:0", (1, 2.0), (2, 1.0))
    am.keep_points("chief:0", [Progress(step=3, time=3.0, metrics={"loss": None})])  # a NaN: left out
    am.record_curve(Verdict(True, "chief:0 succeeded"))
    path = f"{SWEEP}/{APP}.json"
    body = json.loads(hdfs.tree(SWEEP)[f"{APP}.json"])
    assert body["points"] == [[1, 2.0], [2, 1.0]] and body["metric"] == "loss" and body["mode"] == "min"
    assert ("write", f"{SWEEP}/.{APP}.json.tmp") in hdfs.calls and ("write", path) not in hdfs.calls
    assert set(hdfs.tree(SWEEP)) == {f"{APP}.json"}
    assert any(path in line for line in am.tracker.artefacts)


@pytest.mark.parametrize("early", [True, False])
def test_a_stopped_or_failed_trial_writes_no_curve(tmp_path: Path, early: bool) -> None:
    hdfs = FakeHdfs(tmp_path)
    _finished(hdfs, "application_1_0001", {0: 0.0})
    am = _am(hdfs)
    _report(am, "chief:0", (1, 2.0))
    verdict = am.check_early_stop(T0 + 2) if early else Verdict(False, "chief:0 failed")
    assert verdict is not None
    am.record_curve(verdict)
    assert set(hdfs.tree(SWEEP)) == {"application_1_0001.json"}


def test_a_curve_that_cannot_be_written_leaves_the_verdict_and_an_event(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    hdfs.broken.add("write")
    am = _am(hdfs)
    _report(am, "chief:0", (1, 2.0))
    am.record_curve(Verdict(True, "chief:0 succeeded"))
    assert any("could not write the curve" in e for e in am.tracker.events)


def test_a_job_without_early_stopping_neither_reads_nor_writes(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path)
    am = ApplicationMaster(FakeApp(), make_spec({"worker": 1}), APP)
    am.hdfs = lambda: hdfs  # type: ignore[method-assign]
    run_gang(am.tracker, T0 + 1)
    assert am.sweep is None and am.check_early_stop(T0 + 2) is None
    am.record_curve(Verdict(True, "worker:0 succeeded"))
    assert hdfs.calls == []
