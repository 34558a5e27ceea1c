"""Details of how a job's end travels and is judged, one rule per test.

Written against surviving mutants of ``make mutate``: a failure that crossed a
serialisation boundary (a trigger event) comes back typed, a restarted
follower keeps the AM's last-heard clock, a checkpoint's figure counts only
when it is a real number, and the uploader's best-N policy is applied through
the thread the executor runs, not only by ``upload``.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from airflow_provider_tony.runtime.checkpoint import BestOf, CheckpointSync, remote_checkpoints
from airflow_provider_tony.runtime.messages import Failure
from airflow_provider_tony.yarn.follower import Action, JobResult
from tests.unit.support.follower import APP, STALE, T0, report
from tests.unit.support.hdfs import REMOTE, FakeHdfs, write_ckpt


def test_a_failure_read_back_from_its_dict_form_is_typed() -> None:
    failure = Failure(kind="lost", retryable=True, task_id="worker:1", message="worker:1 lost")
    result = JobResult(APP, "FINISHED", "FAILED", "worker:1 lost", None, None, failure)
    back = JobResult(**dataclasses.asdict(result))  # as the trigger's event carries it
    assert isinstance(back.failure, Failure) and back.failure == failure
    assert back.retryable


def test_a_restarted_follower_counts_the_stale_am_from_when_the_am_was_last_heard() -> None:
    from airflow_provider_tony.yarn.follower import Follower

    f = Follower(APP, startup_timeout=60, am_stale_timeout=STALE, heard_at=T0)
    # the first look after the restart, STALE + 1 s after the AM was last heard, with nothing new
    step = f.observe(report("RUNNING"), None, T0 + STALE + 1)
    assert step.action is Action.KILL_HUNG_AM, step


@pytest.mark.parametrize(
    ("value", "score"),
    [(0.9, 0.9), (3, 3.0), (True, None), (math.nan, None), (math.inf, None), ("0.9", None), (None, None)],
)
def test_only_a_finite_number_scores_a_checkpoint(value: object, score: float | None) -> None:
    assert BestOf(1, "acc", "max").score({"acc": value}) == score


def test_the_uploader_thread_keeps_the_best_checkpoint_by_the_scripts_latest_figures(tmp_path: Path) -> None:
    fake = FakeHdfs(tmp_path / "hdfs")
    local = tmp_path / "ckpt"
    figures = {10: 0.5, 20: 0.9, 30: 0.6, 40: 0.7}
    current: dict[str, float] = {}
    events: list[str] = []
    sync = CheckpointSync(
        fake,
        local,
        REMOTE,
        keep=1,
        poll_interval=3600,
        window=60.0,
        tag="t",
        on_event=events.append,
        on_fatal=lambda _m: None,
        best=BestOf(1, "val_accuracy", "max"),
        metrics=lambda: dict(current),
    )
    for step, acc in figures.items():
        write_ckpt(local, step)
        current["val_accuracy"] = acc
        assert sync.sync_once()
    assert remote_checkpoints(fake, REMOTE) == [20, 40], "the newest and the best (20: 0.9)"
    assert sync.scores.get(20) == 0.9
    assert any("40" in e for e in events), events


def test_a_fresh_uploader_reads_the_figures_of_every_older_checkpoint(tmp_path: Path) -> None:
    """After a restart the scores come from the manifests on HDFS: all the older ones, not the first ``keep``."""
    from airflow_provider_tony.runtime.checkpoint import find_local, upload

    fake = FakeHdfs(tmp_path / "hdfs")
    local = tmp_path / "ckpt"
    best = BestOf(2, "acc", "max")
    scores: dict[int, float | None] = {}
    for step, acc in {10: 0.5, 20: 0.9, 30: 0.8, 40: 0.3, 50: 0.2}.items():
        write_ckpt(local, step)
        found = find_local(local)
        assert found is not None
        fresh = step == 50  # the last upload comes from a new process: nothing cached
        upload(
            fake, found, local, REMOTE, keep=1, tag="t", metrics={"acc": acc}, best=best, scores={} if fresh else scores
        )
    # before the last upload HDFS holds 20, 30 (the best two) and 40 (the newest): all three are scored again
    assert remote_checkpoints(fake, REMOTE) == [20, 30, 50], "the newest and the two best of all the older ones"
