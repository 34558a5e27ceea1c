"""``conclusion.conclude``: what follows a job's end, once, for the operator and ``tony submit`` alike.

Against a stand-in cluster and the in-memory HDFS of ``test_checkpoint``: the final cost, the
quality gate (decided, failed, undecided), the history note, retention, and what each path of
the operator does with the conclusion (judged and pruned once, the re-used application's
verdict in the XCom).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException

from airflow_provider_tony.conclusion import Conclusion, TaskRuns, conclude
from airflow_provider_tony.operators.tony import XCOM_QUALITY_GATE
from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.messages import Cost, JobHistory
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.follower import AppReport
from tests.unit.support.gate import MODEL, OTHER_APP, export, gated_operator, model_bytes, spec
from tests.unit.support.hdfs import FakeHdfs
from tests.unit.support.operator import APP, failed, final_document, succeeded

HISTORY = "/user/airflow/tony/history"


class Cluster:
    """What ``conclude`` asks of ``YarnHook`` / ``TonyClient``, with what it was asked."""

    base_path = "/user/airflow/tony"
    history_dir = HISTORY

    def __init__(self, hdfs: FakeHdfs, cost: Cost | None = None) -> None:
        self._hdfs, self.cost = hdfs, cost
        self.asked: list[str] = []

    def final_cost(self, app_id: str) -> Cost | None:
        self.asked.append(f"cost {app_id}")
        return self.cost

    def webhdfs_for(self, spec: JobSpec) -> FakeHdfs:
        self.asked.append("webhdfs_for")
        return self._hdfs

    def webhdfs(self) -> FakeHdfs:
        return self._hdfs

    def find_by_tags(self, tags: list[str]) -> list[AppReport]:
        return []


class NoHistory(FakeHdfs):
    """An HDFS where the job's history cannot be written (the gate's note fails; the rest works)."""

    def write(self, hdfs_path: str, data: bytes, overwrite: bool = False, **kwargs: Any) -> None:
        if "/history/" in hdfs_path:
            raise PermissionError("history is read-only")
        super().write(hdfs_path, data, overwrite, **kwargs)


def test_a_failed_job_is_only_costed(tmp_path: Path) -> None:
    cluster = Cluster(FakeHdfs(tmp_path), Cost(vcore_seconds=3, memory_mb_seconds=30, final=True))
    done = conclude(cluster, spec(), failed("worker:0 exited with code 1"))
    assert cluster.asked == [f"cost {APP}"], "no gate for a failed job"
    assert done == Conclusion(done.result) and done.result.cost == cluster.cost and not done.published


def test_a_final_cost_is_kept_and_an_unanswered_one_changes_nothing(tmp_path: Path) -> None:
    ended = succeeded()
    ended.cost = Cost(vcore_seconds=1, memory_mb_seconds=10, final=False)
    cluster = Cluster(FakeHdfs(tmp_path))
    assert conclude(cluster, None, ended).result.cost == ended.cost, "YARN forgot it: the ending count stays"
    final = Cost(vcore_seconds=2, memory_mb_seconds=20, final=True)
    ended.cost = final
    assert conclude(cluster, None, ended).result.cost is final and cluster.asked == [f"cost {APP}"]

    def unreachable(app_id: str) -> None:
        raise ClusterError("the ResourceManager does not answer")

    cluster.final_cost = unreachable  # type: ignore[assignment,method-assign]
    ended.cost = None
    done = conclude(cluster, None, ended)
    assert isinstance(done.cost_error, ClusterError) and done.result.cost is None and done.published is False


def test_the_gate_publishes_notes_the_history_and_a_worse_model_stays_a_candidate(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    hdfs.write(f"{HISTORY}/{APP}.json", JobHistory(state=final_document()).to_json())
    export(hdfs, tmp_path, APP, 0.91)
    done = conclude(Cluster(hdfs), spec(), succeeded())
    assert done.gate is not None and done.gate.passed and done.published and done.history_error is None
    assert JobHistory.from_json((hdfs.root / HISTORY.lstrip("/") / f"{APP}.json").read_bytes()).gate == done.gate
    export(hdfs, tmp_path, OTHER_APP, 0.5)
    worse = succeeded()
    worse.app_id = OTHER_APP
    done = conclude(Cluster(hdfs), spec(), worse)
    assert done.gate is not None and not done.gate.passed and not done.published
    assert model_bytes(hdfs) == APP.encode(), "the published model stays"


def test_an_hdfs_error_leaves_the_gate_undecided_and_a_lost_history_note_is_only_noted(tmp_path: Path) -> None:
    class Down(FakeHdfs):
        def status(self, path: str, strict: bool = True) -> Any:
            raise ConnectionError("NameNode down")

    done = conclude(Cluster(Down(tmp_path / "down")), spec(), succeeded())
    assert isinstance(done.undecided, ConnectionError) and done.gate is None and not done.published

    hdfs = NoHistory(tmp_path / "hdfs")
    FakeHdfs.write(hdfs, f"{HISTORY}/{APP}.json", JobHistory(state=final_document()).to_json())
    export(hdfs, tmp_path, APP, 0.9)
    done = conclude(Cluster(hdfs), spec(), succeeded())
    assert done.published and isinstance(done.history_error, PermissionError)


def test_retention_runs_only_where_the_model_stands(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    runs = "/user/airflow/tony/checkpoints/nightly/train"
    for run in ("scheduled__1", "scheduled__2"):
        hdfs.write(f"{runs}/{run}/ckpt-000000000010/ckpt-10.index", b"x")
    task = TaskRuns(Cluster(hdfs), runs)
    gated = JobSpec.from_dict({**spec().to_dict(), "retention": {"keep_runs": 1}})
    rejected = conclude(Cluster(hdfs), gated, succeeded(), runs=task)  # the script wrote no model: gate failed
    assert rejected.gate is not None and not rejected.gate.passed and rejected.pruned == ()
    plain = JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "retention": {"keep_runs": 1}})
    assert conclude(Cluster(hdfs), plain, succeeded()).pruned == (), "no task folder given: nothing pruned"
    done = conclude(Cluster(hdfs), plain, succeeded(), runs=task)
    assert [path.rsplit("/", 1)[-1] for path, _why in done.pruned] == ["scheduled__1"], done.pruned
    assert done.retention_error is None and not done.published, "no model_dir: nothing published"
    assert sorted(p.name for p in (hdfs.root / runs.lstrip("/")).iterdir()) == ["scheduled__2"]


def test_the_reused_application_s_verdict_is_in_the_xcom_and_judged_once(tmp_path: Path) -> None:
    """A retry after the job ended re-uses the succeeded application: it is judged there, once."""
    op, hook, ctx, hdfs = gated_operator(tmp_path, deferrable=False)
    op._spec = op.build_spec(ctx)
    hook.client.stored = JobHistory(state=final_document())
    export(hdfs, tmp_path, APP, 0.91)
    judged: list[str] = []
    webhdfs_for = hook.webhdfs_for
    hook.webhdfs_for = lambda s: judged.append("gate") or webhdfs_for(s)
    value = op.get_job_result(APP, ctx)
    assert value[XCOM_QUALITY_GATE]["passed"] is True and ctx["ti"].xcom[XCOM_QUALITY_GATE] == value[XCOM_QUALITY_GATE]
    assert op.get_job_result(APP, ctx) is value and judged == ["gate"]


def test_an_undecided_gate_fails_the_try_as_retryable_after_saying_how_the_job_ended(tmp_path: Path) -> None:
    op, hook, ctx, _hdfs = gated_operator(tmp_path, deferrable=False)

    def down(spec: JobSpec) -> None:
        raise ConnectionError("NameNode down")

    hook.webhdfs_for = down
    with pytest.raises(AirflowException) as info:
        op.execute(ctx)
    assert str(info.value) == f"quality gate of {APP} not decided: ConnectionError: NameNode down"
    assert op._result is not None and op._result.succeeded, "lineage still knows the ended job"
    assert MODEL not in str(ctx["ti"].xcom.get(XCOM_QUALITY_GATE, "")), "no verdict pushed"


def test_tony_submit_says_the_same_conclusion_and_warns_of_what_it_could_not_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, an RM that did not answer for the final cost, or a history it could not annotate, ended
    ``tony submit`` in an error after the model was published; the operator only warned."""
    import yaml

    from airflow_provider_tony import cli
    from tests.unit.support.gate import SubmitClient

    class Client(SubmitClient):
        def final_cost(self, app_id: str) -> None:
            raise ClusterError("the ResourceManager does not answer")

    hdfs = NoHistory(tmp_path / "hdfs")
    FakeHdfs.write(hdfs, f"{HISTORY}/{APP}.json", JobHistory(state=final_document()).to_json())
    export(hdfs, tmp_path, APP, 0.9)
    monkeypatch.setattr(cli, "_client", lambda: Client(hdfs))
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(spec().to_dict()))
    assert cli.main(["submit", str(job)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == APP and "quality gate passed: published at" in out and "cost:" not in out
    assert f"warning: no final cost for {APP}: the ResourceManager does not answer" in err
    assert "warning: could not add the gate's verdict to the job's history: " in err


class NoCost(Cluster):
    """The ResourceManager does not answer for the final cost; the rest of the cluster works."""

    def __init__(self, hdfs: FakeHdfs) -> None:
        super().__init__(hdfs)
        self.specs: list[Any] = []

    def final_cost(self, app_id: str) -> Cost | None:
        raise ClusterError("the ResourceManager does not answer")

    def webhdfs_for(self, spec: JobSpec) -> FakeHdfs:
        self.specs.append(spec)
        return super().webhdfs_for(spec)


def test_a_lost_cost_and_a_lost_history_note_are_said_on_every_way_a_job_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The best-effort errors travel with every conclusion, whatever the gate decided, and the gate
    reads the model's NameNode for this job's spec."""
    from airflow_provider_tony.runtime import hdfs_io

    monkeypatch.setattr(hdfs_io.time, "sleep", lambda _s: None)  # the NameNode stays down: no waiting between tries
    down = NoCost(FakeHdfs(tmp_path / "unused"))
    assert isinstance(conclude(down, spec(), failed("worker:0 exited")).cost_error, ClusterError)

    class Down(FakeHdfs):
        def status(self, path: str, strict: bool = True) -> Any:
            raise ConnectionError("NameNode down")

    undecided = conclude(NoCost(Down(tmp_path / "down")), spec(), succeeded())
    assert isinstance(undecided.undecided, ConnectionError) and isinstance(undecided.cost_error, ClusterError)

    hdfs = NoHistory(tmp_path / "hdfs")
    FakeHdfs.write(hdfs, f"{HISTORY}/{APP}.json", JobHistory(state=final_document()).to_json())
    export(hdfs, tmp_path, APP, 0.9)
    cluster = NoCost(hdfs)
    the_spec = spec()
    passed = conclude(cluster, the_spec, succeeded())
    assert passed.published and cluster.specs == [the_spec]
    assert isinstance(passed.cost_error, ClusterError) and isinstance(passed.history_error, PermissionError)
    export(hdfs, tmp_path, OTHER_APP, 0.5)
    FakeHdfs.write(hdfs, f"{HISTORY}/{OTHER_APP}.json", JobHistory(state=final_document()).to_json())
    worse = succeeded()
    worse.app_id = OTHER_APP
    refused = conclude(NoCost(hdfs), spec(), worse)
    assert refused.gate is not None and not refused.gate.passed
    assert isinstance(refused.cost_error, ClusterError) and isinstance(refused.history_error, PermissionError)


def test_retention_that_fails_midway_says_so_and_the_job_still_stands(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    runs = "/user/airflow/tony/checkpoints/nightly/train"
    for run in ("scheduled__1", "scheduled__2"):
        hdfs.write(f"{runs}/{run}/ckpt-000000000010/ckpt-10.index", b"x")

    class Busy(Cluster):
        def find_by_tags(self, tags: list[str]) -> list[AppReport]:
            raise ClusterError("the ResourceManager does not answer")

    plain = JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "retention": {"max_age_days": 7}})
    done = conclude(Cluster(hdfs), plain, succeeded(), runs=TaskRuns(Busy(hdfs), runs))
    assert isinstance(done.retention_error, ClusterError) and done.pruned == ()
    assert sorted(p.name for p in (hdfs.root / runs.lstrip("/")).iterdir()) == ["scheduled__1", "scheduled__2"]
    aged = conclude(Cluster(hdfs), plain, succeeded(), runs=TaskRuns(Cluster(hdfs), runs))
    # FakeHdfs's folders are as old as its clock's epoch; the newest run is never pruned (retention.plan)
    assert aged.retention_error is None and [path.rsplit("/", 1)[-1] for path, _ in aged.pruned] == ["scheduled__1"]
    assert "(max_age_days 7)" in aged.pruned[0][1], aged.pruned


def _stopped() -> Any:
    """A trial the sweep's median rule stopped: it succeeded, with no model exported."""
    from airflow_provider_tony.runtime.messages import EarlyStop

    ended = succeeded()
    assert ended.am_state is not None
    ended.am_state.early_stopped = EarlyStop(step=40, metric="loss", value=0.9, median=0.2, finished_trials=3)
    ended.diagnostics = ended.am_state.early_stopped.line()
    return ended


def test_a_stopped_trial_skips_the_gate_and_retention(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    runs = "/user/airflow/tony/checkpoints/nightly/train"
    for run in ("scheduled__1", "scheduled__2"):
        hdfs.write(f"{runs}/{run}/ckpt-000000000010/ckpt-10.index", b"x")
    gated = JobSpec.from_dict({**spec().to_dict(), "retention": {"keep_runs": 1}})
    cluster = Cluster(hdfs)
    done = conclude(cluster, gated, _stopped(), runs=TaskRuns(cluster, runs))
    assert done.early_stopped is not None and done.early_stopped.step == 40
    assert done.gate is None and done.undecided is None and not done.published and done.pruned == ()
    assert "webhdfs_for" not in cluster.asked


def test_the_operator_tells_a_stopped_trial_without_failing_its_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.unit.support.operator import log_lines

    op, hook, ctx, _hdfs = gated_operator(tmp_path, deferrable=False)
    hook.client.result = _stopped()
    lines = log_lines(op, monkeypatch)
    value = op.execute(ctx)  # no QualityGateFailed: the gate found no candidate and was not asked
    assert value["early_stopped"] == {"step": 40, "metric": "loss", "value": 0.9, "median": 0.2, "finished_trials": 3}
    assert XCOM_QUALITY_GATE not in value and XCOM_QUALITY_GATE not in ctx["ti"].xcom
    assert "info: quality gate skipped: the trial was stopped early and has no model to judge" in lines
    assert lines[-1] == (
        f"info: {APP} stopped early by the median rule at step 40: loss 0.9 is worse than the median 0.2 "
        "of 3 finished trial(s) at that step"
    )


def test_an_unstopped_trial_s_xcom_says_so() -> None:
    from airflow_provider_tony.operators.outcome import full_result

    assert full_result(succeeded(), spec())["early_stopped"] is None
