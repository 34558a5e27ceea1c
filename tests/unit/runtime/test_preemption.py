"""YARN preemption: a restart of the gang that does not count against ``max_restarts``.

Pure rules (what a preempted container looks like, how restarts are counted,
when the registration clock runs while the new gang waits for capacity), then
the AM's part against a stand-in for skein's application client: a 143 exit
record written while the NodeManager stopped a preempted container is not
judged as the cause.
"""

from __future__ import annotations

import pytest

from airflow_provider_tony.runtime import am as am_module
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.messages import ExitRecord, RestartRecord, StateDocument, TaskState
from airflow_provider_tony.runtime.state import MAX_PREEMPTION_RESTARTS
from airflow_provider_tony.runtime.yarn_exit import PREEMPTED_DIAGNOSTICS, is_preempted
from tests.unit.support.am import PREEMPTED, FakeApp, container, exit_record, preempt, running_am
from tests.unit.support.tracker import T0, WORKERS, failed, lose, make_spec, make_tracker, restart, run_gang


@pytest.mark.parametrize(
    ("message", "preempted"),
    [
        ("Container preempted by scheduler", True),
        (PREEMPTED, True),
        ("container preempted by scheduler\n", True),
        ("Container killed on request. Exit code is 143", False),
        ("Container released on a *lost* node", False),
        ("Container failed during execution, see logs for more information.", False),
        ("", False),
        (None, False),
    ],
)
def test_a_preempted_container_is_known_by_yarns_diagnostics(message: str | None, preempted: bool) -> None:
    assert is_preempted(message) is preempted


def test_a_preemption_restarts_the_gang_even_with_max_restarts_0_and_says_it_is_not_counted() -> None:
    tr = make_tracker(WORKERS, max_restarts=0)
    run_gang(tr, T0 + 1, host="h2")
    preempt(tr, "worker:1", T0 + 50)
    assert tr.tasks["worker:1"].kind is FailureKind.PREEMPTED and tr.tasks["worker:1"].state is TaskState.LOST
    assert tr.check(T0 + 50) is None and tr.verdict is None
    record = tr.restart_pending
    assert record is not None and record.preempted and record.cause == "preempted" and record.failed_task == "worker:1"
    assert PREEMPTED_DIAGNOSTICS in record.reason
    assert any("not counted against max_restarts" in e for e in tr.events)
    # the node is healthy: the new container may go back there
    assert tr.lost_hosts == set()
    doc = StateDocument.from_json(tr.document(T0 + 51, 1.7e9, 1, "app").to_json())
    assert doc.restarts[0].cause == "preempted" and doc.restarts[0].preempted is True
    assert RestartRecord.from_dict({"attempt": 1, "cause": "lost"}).preempted is False


def test_preempted_restarts_leave_max_restarts_for_real_failures() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    run_gang(tr, T0 + 1)
    preempt(tr, "worker:0", T0 + 10)
    tr.check(T0 + 10)
    restart(tr, T0 + 11)
    run_gang(tr, T0 + 20)
    preempt(tr, "chief:0", T0 + 30)
    tr.check(T0 + 30)
    restart(tr, T0 + 31)
    run_gang(tr, T0 + 40)
    lose(tr, "worker:1", T0 + 50)  # a real loss: the one restart max_restarts allows
    assert tr.check(T0 + 50) is None and tr.restart_pending is not None and not tr.restart_pending.preempted
    restart(tr, T0 + 51)
    run_gang(tr, T0 + 60)
    lose(tr, "worker:0", T0 + 70)
    verdict = failed(tr.check(T0 + 70), "worker:0 lost", "after 1 in-application restart(s)", retryable=True)
    assert [r.preempted for r in tr.restarts] == [True, True, False]
    assert verdict.task_id == "worker:0"


def test_without_preemption_max_restarts_0_still_fails_at_once() -> None:
    tr = make_tracker(WORKERS, max_restarts=0)
    run_gang(tr, T0 + 1)
    tr.container_ended("worker:0", "container FAILED: Container killed on request. Exit code is 143", T0 + 5)
    failed(tr.check(T0 + 5), "worker:0 lost", retryable=True)
    assert tr.restarts == []


def test_endless_preemption_ends_as_retryable_for_airflow() -> None:
    tr = make_tracker(WORKERS, max_restarts=0)
    now = T0
    for _ in range(MAX_PREEMPTION_RESTARTS):
        run_gang(tr, now + 1)
        preempt(tr, "worker:0", now + 2)
        assert tr.check(now + 2) is None
        restart(tr, now + 3)
        now += 10
    run_gang(tr, now + 1)
    preempt(tr, "worker:0", now + 2)
    failed(tr.check(now + 2), "worker:0 lost", PREEMPTED_DIAGNOSTICS, retryable=True)
    assert len(tr.restarts) == MAX_PREEMPTION_RESTARTS


def test_after_a_preemption_the_registration_clock_starts_when_the_last_container_is_allocated() -> None:
    tr = make_tracker(WORKERS, max_restarts=0, registration_timeout=30.0)
    run_gang(tr, T0 + 1)
    preempt(tr, "worker:0", T0 + 10)
    tr.check(T0 + 10)
    assert not tr.waiting_for_capacity()  # the restart is not carried out yet
    restart(tr, T0 + 10)
    assert tr.waiting_for_capacity()
    # the queue's capacity is taken for minutes: containers stay unallocated, no timeout
    for t in range(15, 300, 5):
        tr.capacity_pending(2, T0 + t)
        assert tr.check(T0 + t) is None, t
    assert sum("not allocated yet" in e for e in tr.events) == 1
    # the last container is allocated at T0+295 (the last look that saw one waiting): 30 s from then
    tr.capacity_pending(0, T0 + 300)
    assert tr.check(T0 + 325) is None
    failed(tr.check(T0 + 325.01), "registration timeout", retryable=False)


def test_a_restart_for_a_lost_node_keeps_its_registration_timeout() -> None:
    tr = make_tracker(WORKERS, max_restarts=1, registration_timeout=30.0)
    run_gang(tr, T0 + 1)
    lose(tr, "worker:0", T0 + 10)
    tr.check(T0 + 10)
    restart(tr, T0 + 10)
    assert not tr.waiting_for_capacity()
    tr.capacity_pending(2, T0 + 39)  # no effect: not a preemption
    failed(tr.check(T0 + 40.01), "registration timeout")


def test_the_registration_clock_is_held_only_until_the_gang_registered() -> None:
    tr = make_tracker(WORKERS, max_restarts=0, registration_timeout=30.0)
    run_gang(tr, T0 + 1)
    preempt(tr, "worker:0", T0 + 10)
    tr.check(T0 + 10)
    restart(tr, T0 + 10)
    run_gang(tr, T0 + 20)
    assert not tr.waiting_for_capacity()


# --------------------------------------------------------------------------- #
# the AM: YARN's word on a container before the executor's 143
# --------------------------------------------------------------------------- #


def test_a_143_of_a_preempted_container_is_a_preemption_not_a_signal_exit() -> None:
    am, app = running_am(max_restarts=0)
    exit_record(am, app, "worker:1", 143, T0 + 10)
    assert am.tracker.tasks["worker:1"].state is TaskState.RUNNING, "held until YARN says why"
    am.check_containers(T0 + 10.5)  # YARN has not reported the container yet
    assert am.tracker.tasks["worker:1"].state is TaskState.RUNNING
    app.containers = [container("worker_1", "FAILED", PREEMPTED_DIAGNOSTICS)]
    am.check_containers(T0 + 11)  # held records make the AM look every tick
    task = am.tracker.tasks["worker:1"]
    assert task.state is TaskState.LOST and task.kind is FailureKind.PREEMPTED and task.exit_code is None
    assert am.held_exits == {}
    assert am.tracker.check(T0 + 11) is None
    assert am.tracker.restart_pending is not None and am.tracker.restart_pending.preempted


def test_a_143_whose_container_yarn_did_not_preempt_is_judged_as_an_exit_code() -> None:
    am, app = running_am(max_restarts=0)
    exit_record(am, app, "worker:1", 143, T0 + 10)
    app.containers = [container("worker_1", "FAILED", "Container killed on request. Exit code is 143")]
    am.check_containers(T0 + 11)
    assert am.tracker.tasks["worker:1"].state is TaskState.FAILED and am.tracker.tasks["worker:1"].exit_code == 143
    failed(am.tracker.check(T0 + 11), "worker:1 exited with code 143", retryable=True)


def test_a_held_signal_exit_is_judged_when_yarn_says_nothing_in_time() -> None:
    am, app = running_am()
    exit_record(am, app, "worker:1", 137, T0 + 10)
    record = ExitRecord.from_json(app.kv[C.kv_exit("worker:1")])
    am.apply_exit("worker:1", record, T0 + 10 + am_module.SIGNAL_EXIT_HOLD_S - 0.01)
    assert am.tracker.tasks["worker:1"].state is TaskState.RUNNING
    am.apply_exit("worker:1", record, T0 + 10 + am_module.SIGNAL_EXIT_HOLD_S)
    assert am.tracker.tasks["worker:1"].exit_code == 137 and am.held_exits == {}


@pytest.mark.parametrize("code", [0, 1, 75])
def test_other_exit_codes_are_not_held(code: int) -> None:
    am, app = running_am()
    exit_record(am, app, "worker:1", code, T0 + 10)
    assert am.tracker.tasks["worker:1"].exit_code == code and am.held_exits == {}


def test_a_preempted_container_without_an_exit_record_is_a_preemption() -> None:
    am, app = running_am()
    app.containers = [container("worker_0", "FAILED", PREEMPTED_DIAGNOSTICS)]
    am.check_containers(T0 + 10)
    assert am.tracker.tasks["worker:0"].kind is FailureKind.PREEMPTED


def test_the_am_holds_the_registration_clock_while_yarn_has_not_allocated_the_new_gang() -> None:
    spec = make_spec(WORKERS, max_restarts=0, registration_timeout=30.0)
    app = FakeApp()
    am = ApplicationMaster(app, spec, "application_1_0001")
    run_gang(am.tracker, T0 + 1)
    app.containers = [container("worker_0", "FAILED", PREEMPTED_DIAGNOSTICS)]
    am.check_containers(T0 + 10)
    am.tracker.check(T0 + 10)
    restart(am.tracker, T0 + 10)  # the new gang: chief_10, worker_10, worker_11
    new = sorted(am.tracker.slots)
    app.containers = [container(new[0], "RUNNING"), container(new[1], "REQUESTED"), container(new[2], "REQUESTED")]
    am.check_containers(T0 + 100)
    assert ("WAITING", "REQUESTED") in app.calls
    assert am.tracker.check(T0 + 129) is None  # 119 s after the restart, 29 s after the last look
    app.containers = [container(c, "RUNNING") for c in new]
    am.check_containers(T0 + 120)
    failed(am.tracker.check(T0 + 130.01), "registration timeout")


def test_the_log_says_which_restarts_count() -> None:
    tr = make_tracker(WORKERS, max_restarts=2)
    run_gang(tr, T0 + 1)
    preempt(tr, "worker:0", T0 + 10)
    tr.check(T0 + 10)
    restart(tr, T0 + 11)
    run_gang(tr, T0 + 20)
    lose(tr, "worker:1", T0 + 30)
    tr.check(T0 + 30)
    said = [e for e in tr.events if e.startswith("restart") and "replacing every task" in e]
    assert said[0].startswith("restart 1 (after a preemption, not counted against max_restarts;"), said
    assert said[1].startswith("restart 2 (1 of max_restarts 2): worker:1 lost"), said
