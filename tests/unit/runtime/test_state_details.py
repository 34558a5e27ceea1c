"""Details of the AM's judgement that a user reads or relies on, one rule per test.

Each test was written against a surviving mutant of ``make mutate`` (the
mutant it kills is named in the test's docstring): the wording that names the
fix, the counts in a heartbeat message, the clocks scaled by
``heartbeat_interval``, the preemption budget beside real restarts.
"""

from __future__ import annotations

from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.messages import Heartbeat, TaskState
from airflow_provider_tony.runtime.state import MAX_PREEMPTION_RESTARTS
from tests.unit.support.am import preempt
from tests.unit.support.tracker import (
    COLLECTIVE,
    T0,
    WORKERS,
    beat,
    failed,
    lose,
    make_tracker,
    register,
    restart,
    run_gang,
    start,
)


def test_a_fresh_job_has_no_uploader_to_wait_for() -> None:
    """The AM's drain waits for ``drain_task`` unless it is None (``""`` would wait for nobody's answer)."""
    assert make_tracker(WORKERS, max_restarts=1, checkpoint={"dir": "/ckpt"}).drain_task is None


def test_a_worker_failure_waits_for_the_running_chief_to_upload() -> None:
    tr = make_tracker(WORKERS, max_restarts=1, checkpoint={"dir": "/ckpt"})
    run_gang(tr, T0 + 1)
    tr.tasks["chief:0"].host = "h2"  # not on the lost node
    lose(tr, "worker:1", T0 + 5)
    tr.check(T0 + 5)
    assert tr.drain_task == "chief:0"


def test_the_registration_timeout_names_the_fix() -> None:
    tr = make_tracker(WORKERS, registration_timeout=30.0)
    verdict = failed(tr.check(T0 + 31), "registration timeout (30s)", "chief:0, worker:0, worker:1 never registered")
    assert "the cluster may be too small for this job: lower instances/memory or use a bigger queue" in (
        verdict.diagnostics
    )


def test_missed_beats_are_counted_in_beats_of_the_jobs_interval() -> None:
    """``silent / heartbeat_interval``: 40 s silent with 4 s beats is ~10 beats."""
    tr = make_tracker({"worker": 2}, heartbeat_interval=4.0, heartbeat_timeout=30.0)
    start(tr, now=T0 + 1)
    tr.heartbeat("worker:1", Heartbeat(seq=2, user_started=True), T0 + 40)
    tr.check(T0 + 41)
    lost = tr.tasks["worker:0"]
    assert lost.state is TaskState.LOST and lost.kind is FailureKind.LOST
    assert "silent for 40.0s (~10 beats of 4s; timeout 30s)" in lost.message


def test_a_peer_blaming_exit_waits_two_beats_of_the_jobs_interval_past_the_timeout() -> None:
    tr = make_tracker(WORKERS, heartbeat_interval=3.0, heartbeat_timeout=20.0)
    run_gang(tr, T0 + 1)
    tr.exited("worker:0", 1, COLLECTIVE, None, T0 + 5)
    assert tr.grace([tr.tasks["worker:0"]], T0 + 5) == 20.0 + 2 * 3.0


def test_a_signal_exit_is_not_said_to_blame_a_peer() -> None:
    """Only a PEER failure's text cites TensorFlow's peer error; a SIGKILLed task's stderr may hold one too."""
    tr = make_tracker({"worker": 1})
    run_gang(tr, T0 + 1)
    tr.exited("worker:0", 137, COLLECTIVE, None, T0 + 5)
    verdict = failed(tr.check(T0 + 20), "worker:0 exited with code 137", retryable=True)
    assert verdict.cause is FailureKind.SIGNAL
    assert "blames a peer" not in verdict.diagnostics


def test_a_stalled_task_restarts_the_gang_with_its_own_cause() -> None:
    tr = make_tracker({"worker": 2}, max_restarts=1, progress_stall_timeout=50, heartbeat_timeout=1000)
    start(tr, now=T0 + 1)
    beat(tr, "worker:0", 2, T0 + 2, step=3)
    beat(tr, "worker:1", 2, T0 + 2)
    assert tr.check(T0 + 60) is None
    record = tr.restart_pending
    assert record is not None and record.cause == FailureKind.STALLED.value == "stalled"
    assert record.failed_task == "worker:0" and not record.preempted


def test_a_preemption_restart_says_the_new_gang_waits_for_capacity() -> None:
    tr = make_tracker(WORKERS, max_restarts=0)
    run_gang(tr, T0 + 1)
    preempt(tr, "worker:1", T0 + 5)
    tr.check(T0 + 5)
    assert any(
        "not counted against max_restarts; the new gang waits for the queue's capacity)" in e for e in tr.events
    ), tr.events


def test_real_restarts_do_not_use_up_the_preemption_budget() -> None:
    """Preemptions are capped by their own count (restarts minus counted ones), not by all restarts."""
    tr = make_tracker(WORKERS, max_restarts=1)
    run_gang(tr, T0 + 1)
    lose(tr, "worker:0", T0 + 2)
    assert tr.check(T0 + 2) is None and tr.restart_pending is not None  # the one counted restart
    now = T0 + 3
    for _ in range(MAX_PREEMPTION_RESTARTS):
        restart(tr, now)
        run_gang(tr, now + 1)
        preempt(tr, "worker:1", now + 2)
        assert tr.check(now + 2) is None and tr.restart_pending is not None, len(tr.restarts)
        now += 10
    assert [r.preempted for r in tr.restarts] == [False] + [True] * MAX_PREEMPTION_RESTARTS


def test_one_unallocated_container_holds_the_registration_clock_and_says_so() -> None:
    tr = make_tracker(WORKERS, max_restarts=0, registration_timeout=30.0)
    run_gang(tr, T0 + 1)
    preempt(tr, "worker:0", T0 + 10)
    tr.check(T0 + 10)
    restart(tr, T0 + 10)
    tr.capacity_pending(1, T0 + 100)
    assert tr.check(T0 + 120) is None  # 30 s counted from T0+100, not from T0+10
    assert any(
        "waits for the queue's capacity: 1 container(s) not allocated yet "
        "(the registration timeout starts once they are)" in e
        for e in tr.events
    ), tr.events


def test_the_placement_clock_starts_when_each_gang_is_asked_for() -> None:
    """``generation_started`` is the AM's clock for placing a spread task elsewhere (PLACEMENT_WAIT_S)."""
    tr = make_tracker(WORKERS, max_restarts=1)
    assert tr.generation_started == T0
    run_gang(tr, T0 + 1)
    lose(tr, "worker:0", T0 + 5)
    tr.check(T0 + 5)
    restart(tr, T0 + 50)
    assert tr.generation_started == T0 + 50


def test_a_tasks_usage_at_exit_is_shown_beside_its_roles_request() -> None:
    """The exit record's usage gets the request from the AM's JobSpec and the notes on it (GPUs included)."""
    from airflow_provider_tony.runtime.messages import Usage

    tr = make_tracker({"worker": {"instances": 1, "memory": "2 GiB", "gpus": 2}})
    register(tr, "worker:0", T0 + 1, gpus_local=["0", "1"])
    tr.cluster_doc(T0 + 1)
    used = Usage(samples=5, peak_rss_bytes=100 << 20, peak_gpu_util=10.0, gpus_seen=2)
    tr.exited("worker:0", 0, [], T0 + 10, usage=used)
    got = tr.tasks["worker:0"].usage
    assert got is used
    assert (got.requested_memory_mib, got.requested_gpus) == (2048, 2)
    assert any("under half of the 2048 MiB requested" in n for n in got.notes), got.notes
    assert any("peak GPU utilisation 10%, under half of the 2 GPU(s) requested" in n for n in got.notes), got.notes
