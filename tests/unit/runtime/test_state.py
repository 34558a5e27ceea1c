"""The application master's failure policy (``runtime/state.py``), driven with explicit clocks.

Every ``JobTracker`` input takes ``now``; these tests pass plain floats, so no
test sleeps and every timeout boundary is exact.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.runtime.constants import RETRYABLE_MARK
from airflow_provider_tony.runtime.failure import crash_signal
from airflow_provider_tony.runtime.messages import (
    ClusterDocument,
    Heartbeat,
    Progress,
    Registration,
    StateDocument,
    Usage,
)
from airflow_provider_tony.runtime.state import (
    JobTracker,
    TaskState,
    Verdict,
    exit_code_retryable,
    final_diagnostics,
    material,
)
from tests.unit.support.tracker import CODE_GRACE, T0, beat, failed, make_tracker, register, start

APP_ID = "application_1700000000000_0042"

# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #


# --------------------------------------------------------------------------- #
# rendezvous and the cluster document
# --------------------------------------------------------------------------- #

FULL = {"chief": 1, "worker": 2, "ps": 1, "evaluator": 1, "tensorboard": 1}


def test_task_ids_tracking_and_initial_state() -> None:
    tr = make_tracker(FULL)
    assert list(tr.tasks) == ["chief:0", "worker:0", "worker:1", "ps:0", "evaluator:0", "tensorboard:0"]
    assert {t: tr.tasks[t].tracked for t in tr.tasks} == {
        "chief:0": True,
        "worker:0": True,
        "worker:1": True,
        "ps:0": False,
        "evaluator:0": True,
        "tensorboard:0": False,
    }
    assert all(t.state is TaskState.PENDING for t in tr.tasks.values())
    assert {t.task_id for t in tr.rendezvous_tasks()} == {"chief:0", "worker:0", "worker:1", "ps:0", "evaluator:0"}


@pytest.mark.parametrize("last", ["chief:0", "worker:0", "worker:1", "ps:0", "evaluator:0"])
def test_rendezvous_waits_for_every_rendezvous_task(last: str) -> None:
    tr = make_tracker(FULL)
    for task_id in ["chief:0", "worker:0", "worker:1", "ps:0", "evaluator:0"]:
        if task_id != last:
            register(tr, task_id)
    assert tr.rendezvous_ready() is False
    register(tr, last)
    # tensorboard is still PENDING: untracked and not a cluster role, so it does not block.
    assert tr.tasks["tensorboard:0"].state is TaskState.PENDING
    assert tr.rendezvous_ready() is True


def test_rendezvous_waits_for_a_tracked_custom_role() -> None:
    tr = make_tracker({"worker": 1, "trainer": 1})
    register(tr, "worker:0")
    assert tr.rendezvous_ready() is False
    register(tr, "trainer:0")
    assert tr.rendezvous_ready() is True


def test_rendezvous_waits_for_an_untracked_evaluator() -> None:
    tr = make_tracker({"worker": 1, "evaluator": 1}, untracked_roles=["evaluator"])
    assert tr.tasks["evaluator:0"].tracked is False
    register(tr, "worker:0")
    assert tr.rendezvous_ready() is False
    register(tr, "evaluator:0")
    assert tr.rendezvous_ready() is True


def test_register_records_address_and_ignores_unknown_or_repeated() -> None:
    tr = make_tracker({"worker": 1})
    register(tr, "worker:0", now=T0 + 3, host="node7", port=4444)
    task = tr.tasks["worker:0"]
    assert (task.state, task.host, task.port, task.registered_at) == (TaskState.REGISTERED, "node7", 4444, T0 + 3)
    register(tr, "worker:0", now=T0 + 9, host="other", port=1)  # a second registration changes nothing
    assert (task.host, task.port, task.registered_at) == ("node7", 4444, T0 + 3)
    tr.register("worker:5", {"host": "x", "port": 1}, T0)  # not a task of this job: ignored
    assert "worker:5" not in tr.tasks


def test_cluster_doc_lists_every_registered_address_and_num_tasks() -> None:
    tr = make_tracker(FULL)
    ports = {"chief:0": 1000, "worker:0": 1001, "worker:1": 1002, "ps:0": 1003, "evaluator:0": 1004}
    for i, (task_id, port) in enumerate(ports.items()):
        register(tr, task_id, host=f"h{i}", port=port)
    doc = tr.cluster_doc(T0 + 2)
    assert doc.addresses == {t: f"h{i}:{p}" for i, (t, p) in enumerate(ports.items())}
    assert doc.num_tasks == {"chief": 1, "worker": 2, "ps": 1, "evaluator": 1, "tensorboard": 1}
    assert doc.gpus == {t: [] for t in ports}
    assert ClusterDocument.from_json(doc.to_json()) == doc
    assert tr.cluster_published_at == T0 + 2

    # A late tensorboard reads a document that includes it; the publish time stays the first one.
    register(tr, "tensorboard:0", host="h9", port=6006)
    late = tr.cluster_doc(T0 + 50)
    assert late.addresses["tensorboard:0"] == "h9:6006"
    assert set(late.addresses) == set(ports) | {"tensorboard:0"}
    assert tr.cluster_published_at == T0 + 2


def test_gpu_grants_are_disjoint_on_one_host() -> None:
    tr = make_tracker({"worker": {"instances": 2, "gpus": 2}, "ps": 1})
    four = ["0", "1", "2", "3"]
    for task_id in tr.tasks:
        register(tr, task_id, host="gpuhost", gpus_local=four)
    doc = tr.cluster_doc(T0 + 2)
    g0, g1 = doc.gpus["worker:0"], doc.gpus["worker:1"]
    assert len(g0) == 2 and len(g1) == 2
    assert not set(g0) & set(g1)
    assert set(g0) | set(g1) == set(four)
    assert doc.gpus["ps:0"] == []
    assert tr.tasks["worker:0"].gpus == g0 and tr.tasks["worker:1"].gpus == g1


def test_gpu_grants_honour_pinned_devices() -> None:
    tr = make_tracker({"worker": {"instances": 2, "gpus": 2}})
    register(tr, "worker:0", host="g", gpus_local=["0", "1", "2", "3"], gpus_pinned=["2", "3"])
    register(tr, "worker:1", host="g", gpus_local=["0", "1", "2", "3"])
    doc = tr.cluster_doc(T0 + 2)
    assert doc.gpus == {"worker:0": ["2", "3"], "worker:1": ["0", "1"]}


# --------------------------------------------------------------------------- #
# heartbeats
# --------------------------------------------------------------------------- #


def test_beat_counts_only_when_seq_changes() -> None:
    tr = make_tracker({"worker": 1}, heartbeat_interval=1, heartbeat_timeout=10)
    start(tr, now=T0 + 1)  # seq 1 at T0+1
    beat(tr, "worker:0", 2, T0 + 5)
    assert tr.tasks["worker:0"].last_heartbeat == T0 + 5
    beat(tr, "worker:0", 2, T0 + 12)  # the same beat read again: not a sign of life
    assert tr.tasks["worker:0"].last_heartbeat == T0 + 5
    assert tr.check(T0 + 15) is None
    failed(tr.check(T0 + 15.5), "worker:0", "missed heartbeats", "10.5s", retryable=True)
    assert tr.tasks["worker:0"].state is TaskState.LOST


def test_changing_seq_keeps_a_task_alive() -> None:
    tr = make_tracker({"worker": 1}, heartbeat_interval=1, heartbeat_timeout=10)
    start(tr, now=T0 + 1)
    for i in range(2, 50):
        now = T0 + 1 + 8 * i
        beat(tr, "worker:0", i, now)
        assert tr.check(now + 9) is None


HEARTBEAT_CASES = {
    # role spec, silent task, fails?
    "tracked-worker": ({"worker": 2}, "worker:1", True),
    "tracked-chief": ({"chief": 1, "worker": 1}, "chief:0", True),
    "tracked-evaluator": ({"worker": 1, "evaluator": 1}, "evaluator:0", True),
    "untracked-ps-in-cluster": ({"worker": 1, "ps": 1}, "ps:0", True),
    "untracked-tensorboard": ({"worker": 1, "tensorboard": 1}, "tensorboard:0", False),
}


@pytest.mark.parametrize(("roles", "silent", "fails"), HEARTBEAT_CASES.values(), ids=HEARTBEAT_CASES)
def test_silent_task(roles: dict[str, int], silent: str, fails: bool) -> None:
    tr = make_tracker(roles, heartbeat_interval=2, heartbeat_timeout=30)
    start(tr, now=T0 + 1)
    # Everyone else keeps beating; `silent` never beats again after T0+1.
    for seq, now in enumerate([T0 + 20, T0 + 40], start=2):
        for task_id in tr.tasks:
            if task_id != silent:
                beat(tr, task_id, seq, now)
    assert tr.check(T0 + 31) is None  # silent for exactly 30 s: not yet
    verdict = tr.check(T0 + 41)
    if fails:
        failed(verdict, silent, "missed heartbeats", "silent for 40.0s", "timeout 30s", "on h1", retryable=True)
        assert tr.tasks[silent].state is TaskState.LOST
        assert "missed heartbeats" in tr.tasks[silent].message
    else:
        assert verdict is None
        assert tr.tasks[silent].state is TaskState.RUNNING


def test_heartbeat_after_finish_is_ignored() -> None:
    tr = make_tracker({"worker": 2})
    start(tr)
    tr.exited("worker:1", 0, [], T0 + 5)
    beat(tr, "worker:1", 9, T0 + 6, step=3)
    assert tr.tasks["worker:1"].state is TaskState.SUCCEEDED
    assert tr.tasks["worker:1"].progress is None
    tr.heartbeat("worker:7", {"seq": 1}, T0 + 6)  # unknown task: ignored, no error


def test_user_started_moves_registered_to_running() -> None:
    tr = make_tracker({"worker": 1})
    register(tr, "worker:0")
    beat(tr, "worker:0", 1, T0 + 2, user_started=False)
    assert tr.tasks["worker:0"].state is TaskState.REGISTERED
    beat(tr, "worker:0", 2, T0 + 3, user_started=True)
    assert tr.tasks["worker:0"].state is TaskState.RUNNING
    assert "worker:0 started user code" in tr.events


# --------------------------------------------------------------------------- #
# exits and lost containers
# --------------------------------------------------------------------------- #

EXIT_CASES = {
    # roles, task, code, stderr, expected None or (fragments, retryable)
    "worker-code-3": (
        {"worker": 2},
        "worker:1",
        3,
        ["Traceback", "ValueError: bad shape", "", "  "],
        (["worker:1", "code 3", "ValueError: bad shape", "on h1"], False),
    ),
    "worker-oom-137": ({"worker": 2}, "worker:1", 137, ["Killed"], (["worker:1", "code 137", "Killed"], True)),
    "worker-sigterm-143": ({"worker": 1}, "worker:0", 143, [], (["code 143", "(no stderr)"], True)),
    "worker-75": ({"worker": 1}, "worker:0", 75, ["tempfail"], (["code 75"], True)),
    "worker-sigsegv-139": ({"worker": 1}, "worker:0", 139, [], (["code 139 (SIGSEGV: it crashed)"], True)),
    "worker-1": ({"worker": 1}, "worker:0", 1, ["boom"], (["code 1", "boom"], False)),
    "chief-2": ({"chief": 1, "worker": 1}, "chief:0", 2, ["usage"], (["chief:0", "code 2", "usage"], False)),
    "ps-nonzero": ({"worker": 1, "ps": 1}, "ps:0", 1, ["grpc died"], (["ps:0", "code 1", "grpc died"], False)),
    "ps-zero": ({"worker": 1, "ps": 1}, "ps:0", 0, [], None),
    "tensorboard-nonzero": ({"worker": 1, "tensorboard": 1}, "tensorboard:0", 1, ["port in use"], None),
    "worker-1-zero-chief-policy": ({"worker": 2}, "worker:1", 0, [], None),
}


@pytest.mark.parametrize(
    ("code", "extra", "retryable"),
    [
        (1, [], False),
        (2, [], False),
        (127, [], False),
        (75, [], True),
        (128, [], True),
        (137, [], True),
        (143, [], True),
        (255, [], True),
        (-9, [], True),
        (None, [], False),
        (1, [1, 3], True),
        (3, [1, 3], True),
        (4, [1, 3], False),
    ],
)
def test_exit_code_classification(code: int | None, extra: list[int], retryable: bool) -> None:
    assert exit_code_retryable(code, extra) is retryable


def test_the_jobs_retryable_exit_codes_make_a_script_failure_retryable() -> None:
    tr = make_tracker({"worker": 1}, retryable_exit_codes=[3])
    start(tr)
    tr.exited("worker:0", 3, ["flaky data source"], T0 + 3)
    failed(tr.check(T0 + 3), "code 3", retryable=True)
    plain = make_tracker({"worker": 1})
    start(plain)
    plain.exited("worker:0", 3, ["flaky data source"], T0 + 3)
    assert plain.check(T0 + 3) is None  # a bug of the script's own: judged after the grace
    failed(plain.check(T0 + 3 + CODE_GRACE), "code 3", retryable=False)


@pytest.mark.parametrize(("roles", "task_id", "code", "stderr", "expected"), EXIT_CASES.values(), ids=EXIT_CASES)
def test_exit(
    roles: dict[str, int], task_id: str, code: int, stderr: list[str], expected: tuple[list[str], bool] | None
) -> None:
    tr = make_tracker(roles)
    start(tr)
    assert tr.check(T0 + 2) is None
    tr.exited(task_id, code, stderr, T0 + 3)
    task = tr.tasks[task_id]
    assert task.exit_code == code
    assert task.state is (TaskState.SUCCEEDED if code == 0 else TaskState.FAILED)
    verdict = tr.check(T0 + 3)
    if expected is None:
        assert verdict is None
        assert tr.check(T0 + 3 + CODE_GRACE) is None
    else:
        fragments, retryable = expected
        if not retryable or crash_signal(code):  # the process's own end, no loss: decided once the grace is over
            assert verdict is None
            assert tr.check(T0 + 3 + CODE_GRACE - 0.01) is None
            verdict = tr.check(T0 + 3 + CODE_GRACE)
        failed(verdict, *fragments, retryable=retryable)


def test_stderr_line_is_the_last_non_empty_one_stripped_and_truncated() -> None:
    tr = make_tracker({"worker": 1})
    start(tr)
    tr.exited("worker:0", 3, ["first", "   " + "x" * 600 + "   ", "", "\t"], T0 + 3)
    diag = failed(tr.check(T0 + 3 + CODE_GRACE)).diagnostics
    assert diag.endswith("last stderr line: " + "x" * 500)
    assert "first" not in diag


def test_second_exit_report_is_ignored() -> None:
    tr = make_tracker({"worker": 1})
    start(tr)
    tr.exited("worker:0", 0, [], T0 + 3)
    tr.exited("worker:0", 1, ["late"], T0 + 4)
    assert tr.tasks["worker:0"].state is TaskState.SUCCEEDED
    assert tr.tasks["worker:0"].exit_code == 0


CONTAINER_ENDED_CASES = {
    "tracked-worker": ({"worker": 2}, "worker:1", True),
    "ps": ({"worker": 1, "ps": 1}, "ps:0", True),
    "tensorboard": ({"worker": 1, "tensorboard": 1}, "tensorboard:0", False),
}


@pytest.mark.parametrize(("roles", "task_id", "fails"), CONTAINER_ENDED_CASES.values(), ids=CONTAINER_ENDED_CASES)
def test_container_ended_without_exit_record(roles: dict[str, int], task_id: str, fails: bool) -> None:
    tr = make_tracker(roles)
    start(tr)
    tr.container_ended(task_id, "container_e01_0007 KILLED: preempted", T0 + 4)
    assert tr.tasks[task_id].state is TaskState.LOST
    verdict = tr.check(T0 + 4)
    if fails:
        failed(verdict, f"{task_id} lost", "preempted", retryable=True)
    else:
        assert verdict is None


def test_container_ended_default_message_and_no_effect_after_exit() -> None:
    tr = make_tracker({"worker": 2})
    start(tr)
    tr.exited("worker:1", 0, [], T0 + 2)
    tr.container_ended("worker:1", "gone", T0 + 3)
    assert tr.tasks["worker:1"].state is TaskState.SUCCEEDED
    tr.container_ended("worker:0", "", T0 + 3)
    failed(tr.check(T0 + 3), "worker:0 lost", "without reporting an exit code", retryable=True)


# --------------------------------------------------------------------------- #
# success policies
# --------------------------------------------------------------------------- #

SUCCESS_CASES = {
    # roles, policy, exits in order, index after which the job succeeds (None: never)
    "chief-decides": ({"chief": 1, "worker": 2}, "chief", ["worker:0", "worker:1", "chief:0"], 2),
    "chief-first-wins": ({"chief": 1, "worker": 2}, "chief", ["chief:0", "worker:0"], 0),
    "worker0-decides-without-chief": ({"worker": 3}, "chief", ["worker:1", "worker:2", "worker:0"], 2),
    "worker1-alone-does-not-decide": ({"worker": 2}, "chief", ["worker:1"], None),
    "all-workers-waits-for-every-tracked": (
        {"chief": 1, "worker": 2},
        "all_workers",
        ["chief:0", "worker:0", "worker:1"],
        2,
    ),
    "all-workers-not-worker0-alone": ({"worker": 2}, "all_workers", ["worker:0"], None),
    "all-workers-ignores-untracked": (
        {"worker": 2, "ps": 1, "tensorboard": 1},
        "all_workers",
        ["worker:1", "worker:0"],
        1,
    ),
}


@pytest.mark.parametrize(("roles", "policy", "order", "decides_at"), SUCCESS_CASES.values(), ids=SUCCESS_CASES)
def test_success_policy(roles: dict[str, int], policy: str, order: list[str], decides_at: int | None) -> None:
    tr = make_tracker(roles, success_policy=policy)
    start(tr)
    for i, task_id in enumerate(order):
        now = T0 + 2 + i
        # keep everyone alive so only the policy can decide
        for other in tr.tasks:
            beat(tr, other, 10 + i, now)
        tr.exited(task_id, 0, [], now)
        verdict = tr.check(now)
        if decides_at is not None and i >= decides_at:
            assert verdict is not None and verdict.succeeded is True, (task_id, verdict)
            assert verdict.retryable is False
            assert verdict.final_status == "SUCCEEDED"
            if policy == "chief":
                assert verdict.diagnostics == f"{tr.spec.decider_task()} succeeded"
            else:
                tracked = sum(t.tracked for t in tr.tasks.values())
                assert verdict.diagnostics == f"all {tracked} tracked tasks succeeded"
        else:
            assert verdict is None, (task_id, verdict)


def test_failure_beats_a_simultaneous_success() -> None:
    tr = make_tracker({"chief": 1, "worker": 1})
    start(tr)
    tr.exited("worker:0", 1, ["crash"], T0 + 2)
    tr.exited("chief:0", 0, [], T0 + 2)
    assert tr.check(T0 + 2) is None  # the success does not win while the failure waits for its cause
    failed(tr.check(T0 + 2 + CODE_GRACE), "worker:0", "code 1")


# --------------------------------------------------------------------------- #
# registration timeout
# --------------------------------------------------------------------------- #

REGISTRATION_CASES = {
    "one-worker-missing": (["chief:0", "worker:0", "ps:0", "evaluator:0"], ["worker:1"]),
    "ps-and-evaluator-missing": (["chief:0", "worker:0", "worker:1"], ["ps:0", "evaluator:0"]),
    "nobody": ([], ["chief:0", "worker:0", "worker:1", "ps:0", "evaluator:0"]),
}


@pytest.mark.parametrize(("registered", "missing"), REGISTRATION_CASES.values(), ids=REGISTRATION_CASES)
def test_registration_timeout_lists_exactly_the_missing(registered: list[str], missing: list[str]) -> None:
    tr = make_tracker(FULL, registration_timeout=60)
    for task_id in registered:
        register(tr, task_id, now=T0 + 5)
        beat(tr, task_id, 1, T0 + 59, user_started=False)
    assert tr.check(T0 + 60) is None  # exactly the timeout: not yet
    verdict = failed(tr.check(T0 + 60.5), "registration timeout (60s)", retryable=False)
    listed = verdict.diagnostics.split("tasks ", 1)[1].split(" never registered", 1)[0]
    assert listed.split(", ") == missing
    assert "tensorboard" not in verdict.diagnostics


def test_no_registration_timeout_after_publishing() -> None:
    tr = make_tracker({"worker": 2, "tensorboard": 1}, registration_timeout=60)
    start(tr, now=T0 + 10, skip=("tensorboard:0",))
    for seq, now in enumerate([T0 + 30, T0 + 55, T0 + 80, T0 + 105], start=2):
        for task_id in ("worker:0", "worker:1"):
            beat(tr, task_id, seq, now)
    assert tr.tasks["tensorboard:0"].state is TaskState.PENDING
    assert tr.check(T0 + 110) is None


# --------------------------------------------------------------------------- #
# progress stall
# --------------------------------------------------------------------------- #


def _stall_tracker(stall: float | None) -> JobTracker:
    options: dict[str, Any] = {"heartbeat_interval": 1, "heartbeat_timeout": 1000}
    if stall is not None:
        options["progress_stall_timeout"] = stall
    tr = make_tracker({"worker": 2}, **options)
    start(tr, now=T0 + 1)
    return tr


def test_progress_stall_fails_a_task_whose_step_stopped() -> None:
    tr = _stall_tracker(100)
    beat(tr, "worker:0", 2, T0 + 20, step=5)
    # Both keep beating (alive), but worker:0's step never moves again.
    for seq in range(3, 13):
        now = T0 + 10 * seq
        beat(tr, "worker:0", seq, now, step=5)
        beat(tr, "worker:1", seq, now)
        assert tr.check(now) is None, now  # at most 120 s - 20 s = 100 s without a new step
    verdict = failed(
        tr.check(T0 + 125),
        "worker:0 progress stalled",
        "no new step for 105.0s",
        "last step 5",
        "progress_stall_timeout 100s",
        retryable=True,
    )
    assert "worker:1" not in verdict.diagnostics
    assert tr.tasks["worker:0"].state is TaskState.RUNNING


def test_progress_stall_boundary_and_moving_steps() -> None:
    tr = _stall_tracker(100)
    beat(tr, "worker:0", 2, T0 + 10, step=5)
    beat(tr, "worker:1", 2, T0 + 10)
    assert tr.check(T0 + 110) is None  # exactly the timeout: not yet
    beat(tr, "worker:0", 3, T0 + 110, step=6)  # moved: clock restarts
    assert tr.check(T0 + 209) is None
    failed(tr.check(T0 + 210.5), "worker:0 progress stalled", "no new step for 100.5s", "last step 6")


def test_progress_stall_ignores_a_task_that_never_reported() -> None:
    tr = _stall_tracker(100)
    for seq in range(2, 10):
        for task_id in tr.tasks:
            beat(tr, task_id, seq, T0 + 100 * seq)
    assert tr.tasks["worker:0"].state is TaskState.RUNNING
    assert tr.check(T0 + 950) is None


def test_progress_stall_off_by_default() -> None:
    tr = _stall_tracker(None)
    beat(tr, "worker:0", 2, T0 + 10, step=5)
    beat(tr, "worker:0", 3, T0 + 900, step=5)
    assert tr.check(T0 + 950) is None


def test_progress_stall_ignores_untracked_tasks() -> None:
    tr = make_tracker({"worker": 1, "ps": 1}, heartbeat_timeout=1000, progress_stall_timeout=50)
    start(tr)
    beat(tr, "ps:0", 2, T0 + 2, step=1)
    beat(tr, "worker:0", 2, T0 + 2, step=1)
    beat(tr, "worker:0", 3, T0 + 100, step=2)
    assert tr.check(T0 + 120) is None


# --------------------------------------------------------------------------- #
# deadline
# --------------------------------------------------------------------------- #


def test_deadline_lists_still_running_tracked_tasks() -> None:
    tr = make_tracker({"chief": 1, "worker": 2, "ps": 1}, deadline=3600, heartbeat_timeout=10_000)
    start(tr)
    tr.exited("worker:0", 0, [], T0 + 100)
    assert tr.check(T0 + 3600) is None
    verdict = failed(tr.check(T0 + 3600.5), "deadline of 3600s exceeded", retryable=False)
    assert verdict.diagnostics.endswith("still running: chief:0, worker:1")


def test_deadline_lists_none_when_nothing_tracked_runs() -> None:
    tr = make_tracker({"worker": 2}, deadline=10, success_policy="all_workers", heartbeat_timeout=1000)
    start(tr)
    tr.exited("worker:0", 0, [], T0 + 2)
    tr.stopped("worker:1")
    failed(tr.check(T0 + 11), "deadline of 10s exceeded; still running: none")


def test_no_deadline_means_no_time_limit() -> None:
    tr = make_tracker({"worker": 1}, heartbeat_timeout=10**9)
    start(tr)
    assert tr.check(T0 + 10**8) is None


# --------------------------------------------------------------------------- #
# stickiness, stopping
# --------------------------------------------------------------------------- #


def test_first_verdict_sticks() -> None:
    tr = make_tracker({"chief": 1, "worker": 1}, deadline=100)
    start(tr)
    tr.exited("worker:0", 3, ["bad"], T0 + 5)
    first = failed(tr.check(T0 + 5 + CODE_GRACE), "worker:0", "code 3")
    tr.exited("chief:0", 0, [], T0 + 11)
    assert tr.check(T0 + 11) is first
    assert tr.check(T0 + 500) is first  # past the deadline, still the same verdict
    assert tr.verdict is first


def test_first_success_sticks() -> None:
    tr = make_tracker({"worker": 2})
    start(tr)
    tr.exited("worker:0", 0, [], T0 + 5)
    first = tr.check(T0 + 5)
    assert first is not None and first.succeeded
    tr.exited("worker:1", 1, ["late crash"], T0 + 6)
    assert tr.check(T0 + 6) is first


def test_to_stop_and_stopped() -> None:
    tr = make_tracker({"worker": 3, "ps": 1, "tensorboard": 1})
    start(tr, skip=("tensorboard:0",))
    tr.exited("worker:0", 0, [], T0 + 5)
    tr.exited("worker:2", 1, [], T0 + 5)
    assert tr.to_stop() == ["worker:1", "ps:0", "tensorboard:0"]
    for task_id in tr.to_stop():
        tr.stopped(task_id)
    assert tr.to_stop() == []
    assert {t: tr.tasks[t].state for t in tr.tasks} == {
        "worker:0": TaskState.SUCCEEDED,
        "worker:1": TaskState.KILLED,
        "worker:2": TaskState.FAILED,
        "ps:0": TaskState.KILLED,
        "tensorboard:0": TaskState.KILLED,
    }
    assert tr.tasks["ps:0"].message == "stopped by the application master: the job failed"
    tr.stopped("worker:0")  # a finished task keeps its state
    assert tr.tasks["worker:0"].state is TaskState.SUCCEEDED


@pytest.mark.parametrize(("policy", "why"), [("chief", "stopped: worker:0 finished"), ("all_workers", None)])
def test_stopped_because_the_job_succeeded_is_no_kill(policy: str, why: str | None) -> None:
    """worker:1 of a successful MWMS job was shown KILLED (a red mark on a good run): it reads STOPPED, and why."""
    tr = make_tracker({"worker": 2, "ps": 1}, success_policy=policy)
    start(tr)
    tr.exited("worker:0", 0, [], T0 + 5)
    if policy == "all_workers":
        tr.exited("worker:1", 0, [], T0 + 5)
        why = "stopped: every tracked task finished"
    verdict = tr.check(T0 + 5)
    assert verdict is not None and verdict.succeeded
    for task_id in tr.to_stop():
        tr.stopped(task_id)
    stopped = ["ps:0"] if policy == "all_workers" else ["worker:1", "ps:0"]
    for task_id in stopped:
        assert (tr.tasks[task_id].state, tr.tasks[task_id].message) == (TaskState.STOPPED, why)
    doc = tr.document(T0 + 6, 1000.0, 1, "app")
    assert doc.tasks["ps:0"].state == "STOPPED" and not doc.tasks["ps:0"].failed


@pytest.mark.parametrize("state", list(TaskState), ids=lambda s: s.value)
def test_task_state_finished(state: TaskState) -> None:
    assert state.finished is (
        state
        in {
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.KILLED,
            TaskState.STOPPED,
            TaskState.LOST,
            TaskState.RESTARTING,
        }
    )


# --------------------------------------------------------------------------- #
# the state document
# --------------------------------------------------------------------------- #


def _doc(tr: JobTracker, now: float) -> StateDocument:
    doc = tr.document(now, 1.7e9, 7, APP_ID)
    assert StateDocument.from_json(doc.to_json()) == doc  # what a client reads is what the AM meant
    return doc


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_document_app_state_lifecycle(outcome: str) -> None:
    tr = make_tracker({"worker": 2, "ps": 1})
    doc = _doc(tr, T0 + 0.5)
    assert doc.app_state == "REGISTERING"
    assert (doc.final, doc.diagnostics, doc.retryable) == (False, "", False)
    assert doc.application_id == APP_ID and doc.seq == 7 and doc.elapsed == 0.5
    assert set(doc.tasks) == {"worker:0", "worker:1", "ps:0"}
    assert doc.tasks["worker:0"].state == "PENDING"

    for task_id in tr.tasks:
        register(tr, task_id)
    assert _doc(tr, T0 + 1).app_state == "REGISTERING"  # registered, cluster not yet published
    tr.cluster_doc(T0 + 2)
    beat(tr, "worker:0", 1, T0 + 2, step=1, total_steps=10)
    doc = _doc(tr, T0 + 3)
    assert doc.app_state == "RUNNING"
    assert doc.tasks["worker:0"].state == "RUNNING"
    assert doc.tasks["worker:0"].seconds_since_heartbeat == 1.0
    assert doc.tasks["worker:0"].progress.step == 1

    if outcome == "success":
        tr.exited("worker:0", 0, [], T0 + 4)
    else:
        tr.exited("worker:1", 137, ["Killed"], T0 + 4)
    verdict = tr.check(T0 + 4)
    assert verdict is not None
    doc = _doc(tr, T0 + 5)
    assert doc.app_state == ("SUCCEEDED" if outcome == "success" else "FAILED")
    assert doc.final is True
    assert doc.diagnostics == verdict.diagnostics
    assert doc.retryable is (outcome == "failure")
    assert doc.progress == 1.0


PROGRESS_CASES = {
    # step, total_steps, expected fraction before the verdict
    "half": (5, 10, 0.5),
    "zero": (0, 10, 0.0),
    "complete-capped": (10, 10, 0.99),
    "overshoot-capped": (15, 10, 0.99),
    "no-total-falls-back": (5, None, 0.0),
    "zero-total-falls-back": (5, 0, 0.0),
}


@pytest.mark.parametrize(("step", "total", "expected"), PROGRESS_CASES.values(), ids=PROGRESS_CASES)
def test_progress_fraction_from_decider(step: int, total: int | None, expected: float) -> None:
    tr = make_tracker({"worker": 2})
    start(tr)
    beat(tr, "worker:0", 2, T0 + 2, step=step, total_steps=total)
    beat(tr, "worker:1", 2, T0 + 2, step=9, total_steps=10)  # not the decider: ignored
    assert _doc(tr, T0 + 3).progress == pytest.approx(expected)


def test_progress_fraction_uses_chief_as_decider() -> None:
    tr = make_tracker({"chief": 1, "worker": 1})
    start(tr)
    beat(tr, "worker:0", 2, T0 + 2, step=9, total_steps=10)
    beat(tr, "chief:0", 2, T0 + 2, step=3, total_steps=10)
    assert tr.progress_fraction() == pytest.approx(0.3)


def test_progress_fraction_falls_back_to_finished_tracked_tasks() -> None:
    tr = make_tracker({"worker": 4, "ps": 1}, success_policy="all_workers")
    start(tr)
    assert tr.progress_fraction() == 0.0
    tr.exited("worker:1", 0, [], T0 + 2)
    assert tr.progress_fraction() == pytest.approx(0.25)
    tr.exited("worker:2", 0, [], T0 + 2)
    tr.exited("worker:3", 0, [], T0 + 2)
    tr.exited("ps:0", 0, [], T0 + 2)  # untracked: not counted
    assert tr.progress_fraction() == pytest.approx(0.75)
    tr.exited("worker:0", 0, [], T0 + 2)
    assert tr.progress_fraction() == 0.99  # all done but no verdict yet
    assert tr.check(T0 + 2) is not None
    assert tr.progress_fraction() == 1.0


# --------------------------------------------------------------------------- #
# final_diagnostics
# --------------------------------------------------------------------------- #

FINAL_CASES = {
    "failed-retryable": (
        Verdict(False, "worker:0 lost: x", retryable=True),
        f"{RETRYABLE_MARK} worker:0 lost: x. Logs: yarn logs -applicationId {APP_ID}",
    ),
    "failed-final": (
        Verdict(False, "deadline of 10s exceeded; still running: none"),
        f"deadline of 10s exceeded; still running: none. Logs: yarn logs -applicationId {APP_ID}",
    ),
    "succeeded": (Verdict(True, "chief:0 succeeded"), "chief:0 succeeded"),
    "succeeded-retryable-flag-ignored": (Verdict(True, "worker:0 succeeded", retryable=True), "worker:0 succeeded"),
}


@pytest.mark.parametrize(("verdict", "expected"), FINAL_CASES.values(), ids=FINAL_CASES)
def test_final_diagnostics(verdict: Verdict, expected: str) -> None:
    text = final_diagnostics(verdict, APP_ID)
    assert text == expected
    assert text.startswith("[retryable]") is (not verdict.succeeded and verdict.retryable)
    assert ("yarn logs -applicationId" in text) is (not verdict.succeeded)


def test_final_diagnostics_of_a_real_verdict() -> None:
    tr = make_tracker({"worker": 2})
    start(tr)
    tr.exited("worker:1", 137, ["Killed"], T0 + 2)
    text = final_diagnostics(failed(tr.check(T0 + 2)), APP_ID)
    assert text.startswith("[retryable] worker:1 exited with code 137")
    assert text.endswith(f"Logs: yarn logs -applicationId {APP_ID}")


# --------------------------------------------------------------------------- #
# regression: grants already published never move
# --------------------------------------------------------------------------- #


def test_late_gpu_task_does_not_take_gpus_already_granted() -> None:
    tr = make_tracker({"worker": {"instances": 1, "gpus": 2}, "tensorboard": {"instances": 1, "gpus": 1}})
    four = ["0", "1", "2", "3"]
    register(tr, "worker:0", host="g", gpus_local=four)
    first = tr.cluster_doc(T0 + 2).gpus["worker:0"]
    assert first == ["0", "1"]
    register(tr, "tensorboard:0", now=T0 + 30, host="g", gpus_local=four)
    late = tr.cluster_doc(T0 + 30).gpus
    assert late["worker:0"] == first  # what the running worker applied as CUDA_VISIBLE_DEVICES
    assert not set(late["tensorboard:0"]) & set(first)


def test_material_view_ignores_clocks_and_progress_but_not_state_changes() -> None:
    """The AM republishes at once only on a material change; clocks and progress ride the interval."""
    tr = make_tracker({"worker": 2})
    start(tr)
    first = material(tr.document(T0 + 2, 1000.0, 1, "app"))
    beat(tr, "worker:0", 2, T0 + 2.5, step=5, total_steps=100)
    later = tr.document(T0 + 3, 1001.2, 2, "app")
    assert material(later) == first, "a moved clock or a progress step alone must not count"
    tr.exited("worker:1", 3, ["boom"], T0 + 3.5)
    assert material(tr.document(T0 + 3.5, 1001.7, 3, "app")) != first, "a task's exit must count"


# --------------------------------------------------------------------------- #
# the state document: every field a client reads
# --------------------------------------------------------------------------- #


def _document_scenario() -> JobTracker:
    """Two GPU workers on two hosts: one reports progress and a restored step, one fails with a
    long stderr; more events than the document keeps."""
    tr = make_tracker({"worker": {"instances": 2, "gpus": 1}})
    tr.register("worker:0", Registration(host="h1", port=2000, container_id="c_1", gpus_local=["0", "1"]), T0 + 1)
    tr.register("worker:1", Registration(host="h2", port=2001, container_id="c_2", gpus_local=["0"]), T0 + 1)
    tr.cluster_doc(T0 + 1)
    progress = Progress(step=7, total_steps=10, time=5.0)
    used = Usage(samples=3, peak_rss_bytes=100 << 20, peak_cpu_cores=0.5)
    tr.heartbeat(
        "worker:0", Heartbeat(seq=1, user_started=True, restored_step=4, progress=progress, usage=used), T0 + 2
    )
    tr.heartbeat("worker:1", Heartbeat(seq=1, user_started=True), T0 + 2.5)
    tr.exited("worker:1", 3, [f"line {i}" for i in range(8)], T0 + 3)
    tr.events.extend(f"filler {i}" for i in range(60))
    for i in range(55):
        tr.note_artefact(f"restart {i}: checkpoint step {i} on HDFS before the gang was stopped")
    return tr


def test_the_state_document_carries_every_field_clients_read() -> None:
    """The document is the contract with the operator, the trigger, the job page and `tony status`:
    each field, its rounding and its bounds (last 5 stderr lines, last 50 events) exactly."""
    doc = _document_scenario().document(T0 + 4.256, 1_700_000_000.1234, 9, APP_ID).to_dict()
    task = {"role": "worker", "tracked": True, "gpus": ["0"], "message": ""}
    assert doc["tasks"] == {
        "worker:0": {
            **task,
            "state": "RUNNING",
            "index": 0,
            "host": "h1",
            "port": 2000,
            "container_id": "c_1",
            "seconds_since_heartbeat": 2.26,
            "exit_code": None,
            "progress": {"step": 7, "epoch": None, "total_steps": 10, "time": 5.0, "metrics": {}},
            "stderr_tail": [],
            "restored_step": 4,
            # The executor's figures, with the role's request from the AM's JobSpec and the note on it.
            "usage": {
                **Usage(samples=3, peak_rss_bytes=100 << 20, peak_cpu_cores=0.5).to_dict(),
                "requested_memory_mib": 1024,
                "requested_vcores": 1,
                "requested_gpus": 1,
                "notes": ["peak memory 100 MiB, under half of the 1024 MiB requested: a smaller request would do"],
            },
        },
        "worker:1": {
            **task,
            "state": "FAILED",
            "index": 1,
            "host": "h2",
            "port": 2001,
            "container_id": "c_2",
            "seconds_since_heartbeat": 1.76,
            "exit_code": 3,
            "progress": None,
            "stderr_tail": ["line 3", "line 4", "line 5", "line 6", "line 7"],
            "restored_step": None,
            "usage": None,
        },
    }
    artefacts = [f"restart {i}: checkpoint step {i} on HDFS before the gang was stopped" for i in range(5, 55)]
    assert doc["events"] == artefacts and doc["artefacts"] == artefacts, "the newest 50, artefacts in both"
    assert {k: v for k, v in doc.items() if k not in ("tasks", "events", "artefacts")} == {
        "application_id": APP_ID,
        "app_state": "RUNNING",
        "am_heartbeat": 1_700_000_000.1234,
        "seq": 9,
        "elapsed": 4.26,
        "final": False,
        "diagnostics": "",
        "retryable": False,
        "progress": 0.7,
        "timeline": {"cluster_published": 1.0, "all_user_started": 2.5},
        "am_started_wall": 1_699_999_995.867,
        "generation": 0,
        "restarts": [],
        "version": 1,
        "failure": None,
        "early_stopped": None,
    }


def test_material_ignores_clocks_and_key_order_but_not_content() -> None:
    tr = _document_scenario()
    first = tr.document(T0 + 4, 1.7e9, 9, APP_ID)
    later = tr.document(T0 + 9, 1.7e9 + 5, 10, APP_ID)
    assert material(first) == material(later), "only clocks and the sequence moved"
    shuffled = StateDocument.from_dict(dict(reversed(list(first.to_dict().items()))))
    assert material(shuffled) == material(first)
    tr.events.append("worker:0 uploaded checkpoint step 10")
    assert material(tr.document(T0 + 9, 1.7e9 + 5, 10, APP_ID)) != material(first)


@pytest.mark.parametrize(("code", "retryable"), [(0, False), (-1, True), (-15, True), (None, False), (1, False)])
def test_zero_is_no_failure_to_retry_and_a_negative_code_is_a_signal(code: int | None, retryable: bool) -> None:
    assert exit_code_retryable(code) is retryable


def test_a_failed_task_without_stderr_says_so() -> None:
    tr = make_tracker({"worker": 1})
    start(tr)
    tr.exited("worker:0", 2, ["", "   "], T0 + 5)
    verdict = failed(tr.check(T0 + 500), retryable=False)  # past the wait for a root cause elsewhere
    assert verdict.task_id == "worker:0" and "last stderr line: (no stderr)" in verdict.diagnostics


def test_the_exit_record_brings_the_final_progress_and_an_event() -> None:
    tr = make_tracker({"worker": 2})
    start(tr)
    beat(tr, "worker:0", 2, T0 + 2, step=5)
    tr.exited("worker:1", 0, [], T0 + 3)  # no progress in the record: the last beat's stays
    tr.exited("worker:0", 0, [], T0 + 3, progress=Progress(step=9, metrics={"acc": 0.9}))
    assert tr.tasks["worker:0"].progress == Progress(step=9, metrics={"acc": 0.9})
    assert tr.tasks["worker:1"].progress is None
    assert tr.events[-2:] == ["worker:1 exited with code 0", "worker:0 exited with code 0"]


def test_missed_heartbeats_name_the_task_and_are_retryable() -> None:
    tr = make_tracker({"worker": 2}, heartbeat_interval=1, heartbeat_timeout=5)
    start(tr)
    beat(tr, "worker:1", 2, T0 + 4)
    verdict = failed(tr.check(T0 + 7), retryable=True)
    assert verdict.task_id == "worker:0" and tr.tasks["worker:0"].state is TaskState.LOST


def test_the_verdicts_time_is_a_milestone_of_the_timeline() -> None:
    tr = make_tracker({"worker": 1})
    start(tr)
    tr.exited("worker:0", 0, [], T0 + 12.34567)
    assert tr.check(T0 + 12.34567) is not None
    assert tr.document(T0 + 13, 1.7e9, 1, APP_ID).timeline["verdict"] == 12.346


def test_a_task_that_finished_stops_beating_without_being_lost() -> None:
    tr = make_tracker({"worker": 2}, heartbeat_interval=1, heartbeat_timeout=5)
    start(tr)
    tr.exited("worker:1", 0, [], T0 + 2)  # not the decider: the job goes on
    for i in range(2, 12):
        beat(tr, "worker:0", i, T0 + i)
    assert tr.check(T0 + 11) is None and tr.tasks["worker:1"].state is TaskState.SUCCEEDED


def test_a_task_that_registers_and_never_beats_is_lost_after_the_timeout() -> None:
    """The silence clock starts at registration, not at a first heartbeat that may never come."""
    tr = make_tracker({"worker": 1}, heartbeat_interval=1, heartbeat_timeout=5)
    register(tr, "worker:0", T0 + 1)
    tr.cluster_doc(T0 + 1)
    verdict = failed(tr.check(T0 + 6.5), retryable=True)
    assert verdict.task_id == "worker:0" and tr.tasks["worker:0"].state is TaskState.LOST


def test_a_stalled_task_is_named_in_the_verdict() -> None:
    tr = make_tracker({"worker": 1}, progress_stall_timeout=30)
    start(tr)
    beat(tr, "worker:0", 2, T0 + 2, step=5)
    for i in range(3, 40):
        beat(tr, "worker:0", i, T0 + i, step=5)
    verdict = failed(tr.check(T0 + 39), retryable=True)
    assert verdict.task_id == "worker:0"


def test_material_sees_a_task_changing_state() -> None:
    tr = make_tracker({"worker": 2})
    start(tr)
    before = material(tr.document(T0 + 2, 1.7e9, 1, APP_ID))
    tr.tasks["worker:1"].state = TaskState.SUCCEEDED  # nothing else changed
    assert material(tr.document(T0 + 2, 1.7e9, 1, APP_ID)) != before


def test_milestones_are_rounded_to_the_millisecond() -> None:
    tr = make_tracker({"worker": 1})
    register(tr, "worker:0", T0 + 1)
    tr.cluster_doc(T0 + 1.23456)
    beat(tr, "worker:0", 1, T0 + 2.56789)
    assert tr.timeline == {"cluster_published": 1.235, "all_user_started": 2.568}


def test_the_summary_says_which_tasks_decide_and_why_a_task_ended() -> None:
    tr = make_tracker({"worker": 1, "ps": 1})
    start(tr)
    tr.container_ended("ps:0", "container c_9 KILLED: node lost", T0 + 3)
    tasks = tr.document(T0 + 4, 1.7e9, 1, APP_ID).tasks
    assert (tasks["ps:0"].tracked, tasks["ps:0"].message) == (False, "container c_9 KILLED: node lost")
    assert (tasks["worker:0"].tracked, tasks["worker:0"].message) == (True, "")
