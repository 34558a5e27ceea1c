"""The AM judges a gang's failures together: the root cause, not the first exit code.

Pure tracker logic on a fake clock (the same ``JobTracker`` the AM drives);
the real thing, with MultiWorkerMirroredStrategy and a node SIGKILLed, is
``tests/chaos/test_strategies.py``.
"""

from __future__ import annotations

import pytest

from airflow_provider_tony.runtime.failure import FailureKind, classify_exit, peer_failure
from airflow_provider_tony.runtime.messages import Heartbeat, TaskState
from tests.unit.support.tracker import CODE_GRACE, COLLECTIVE, FULL_GRACE, HB, T0, alive, failed, make_tracker, start

PS_LOST = ["tensorflow.python.framework.errors_impl.UnavailableError: Socket closed"]
COORDINATION = ["The coordination service has stopped: Task /job:worker/replica:0/task:1 heartbeat timeout."]
TRACEBACK = ["Traceback (most recent call last):", "ValueError: shapes (32, 10) and (64,) are incompatible"]
ABORTED = "terminate called without an active exception"
GLOO_CLOSED = "RuntimeError: [gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.3]:1"


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        (COLLECTIVE, "a collective"),
        (["[[{{node CollectiveReduceV2}}]] [Op:__inference_train_1]"], "a collective op failed"),
        (PS_LOST, "a peer is unavailable"),
        (COORDINATION, "coordination service"),
        (["tensorflow.python.distribute.coordinator.cluster_coordinator.PSUnavailableError: ps:0"], "unavailable"),
        (TRACEBACK, None),
        ([], None),
        (["KeyError: 'label'"], None),
    ],
)
def test_peer_failure_is_read_from_tensorflows_own_errors(stderr: list[str], expected: str | None) -> None:
    found = peer_failure(stderr)
    if expected is None:
        assert found is None
    else:
        assert found is not None and expected in found


# What PyTorch prints when a process group's peer or its store goes away (gloo's TCP pairs, NCCL's
# watchdog and remote errors, the c10d store, the elastic rendezvous), and two failures of its own.
TORCH_PEER = [
    (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
        "[127.0.0.3]:43185",
        "a PyTorch process group lost a peer",
    ),
    (
        "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
        "1800000ms for recv operation to complete",
        "a PyTorch process group lost a peer",
    ),
    (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970,"
        " remote process exited or there was a network error, NCCL version 2.21.5",
        "a PyTorch process group lost a peer",
    ),
    (
        "[rank1]:[E ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.",
        "a PyTorch process group lost a peer",
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
        "PyTorch's store or rendezvous lost a peer",
    ),
    ("torch.distributed.elastic.rendezvous.api.RendezvousClosedError", "PyTorch's store or rendezvous lost a peer"),
]
TORCH_OWN = [
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (32x10 and 64x10)",
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
]


@pytest.mark.parametrize(("line", "meaning"), TORCH_PEER)
def test_pytorchs_peer_errors_are_consequences_not_code_bugs(line: str, meaning: str) -> None:
    """A DDP survivor's error about its lost peer is PEER (retryable, a consequence), named for what it says."""
    found = peer_failure(["Traceback (most recent call last):", line])
    assert found is not None and found.startswith(f"{meaning}: "), found
    assert classify_exit(1, [line]) is FailureKind.PEER


@pytest.mark.parametrize("line", TORCH_OWN)
def test_a_pytorch_scripts_own_error_stays_its_own(line: str) -> None:
    assert peer_failure([line]) is None
    assert classify_exit(1, ["Traceback (most recent call last):", line]) is FailureKind.CODE


@pytest.mark.parametrize(
    ("code", "stderr", "extra", "kind"),
    [
        (1, TRACEBACK, (), FailureKind.CODE),
        (1, COLLECTIVE, (), FailureKind.PEER),
        (137, TRACEBACK, (), FailureKind.SIGNAL),
        (143, [], (), FailureKind.SIGNAL),
        (-9, [], (), FailureKind.SIGNAL),
        (75, [], (), FailureKind.RETRYABLE_EXIT),
        (3, TRACEBACK, (3,), FailureKind.RETRYABLE_EXIT),
        (2, [], (), FailureKind.CODE),
        # A crash is the process's own end, no loss: SIGABRT (134), SIGSEGV (139), Python's -6.
        (134, [ABORTED], (), FailureKind.CRASH),
        (134, [GLOO_CLOSED, ABORTED], (), FailureKind.PEER),
        (139, [], (), FailureKind.CRASH),
        (-6, [], (), FailureKind.CRASH),
        (139, [], (139,), FailureKind.RETRYABLE_EXIT),
        (129, [], (), FailureKind.SIGNAL),  # SIGHUP: sent from outside
    ],
)
def test_an_exit_is_classified_by_code_then_stderr(code: int, stderr: list[str], extra: tuple[int, ...], kind) -> None:
    assert classify_exit(code, stderr, extra) is kind
    assert kind.retryable is (kind is not FailureKind.CODE)


def test_mwms_survivors_failing_on_a_lost_peer_wait_for_it_and_name_it_the_cause() -> None:
    """The issue's case: worker:1's node dies; worker:0 and worker:2's collectives fail in seconds."""
    tr = make_tracker({"worker": 3}, **HB)
    start(tr)
    alive(tr, T0 + 20)  # last beat of worker:1; its node dies right after
    alive(tr, T0 + 22, "worker:0", "worker:2")
    tr.exited("worker:0", 1, COLLECTIVE, T0 + 23)
    tr.exited("worker:2", 1, COLLECTIVE, T0 + 23.5)
    # TensorFlow blames a peer: no verdict while worker:1 may still be declared lost
    assert tr.check(T0 + 23.5) is None
    assert tr.check(T0 + 30) is None and tr.verdict is None
    assert tr.check(T0 + 30.01) is not None  # worker:1 silent > 10 s: lost, and the cause
    verdict = failed(tr.verdict, "worker:1 lost", "missed heartbeats", "consequences: worker:0", retryable=True)
    assert verdict.task_id == "worker:1" and verdict.cause is FailureKind.LOST
    assert verdict.consequences == ["worker:0", "worker:2"]
    doc = tr.document(T0 + 31, 1.7e9, 1, "application_1_0001")
    assert doc.failure is not None and doc.failure.kind == "lost" and doc.failure.task_id == "worker:1"
    assert doc.failure.retryable and doc.failure.consequences == ["worker:0", "worker:2"]
    assert doc.retryable and doc.tasks["worker:1"].state == TaskState.LOST.value


def test_a_survivor_that_aborts_when_its_peer_is_lost_is_a_consequence_not_the_cause() -> None:
    """gloo can abort a DDP survivor (134, "terminate called ...") before its peer's loss is declared:
    a crash of its own, so it waits for the lost peer like any survivor and is listed as a consequence."""
    tr = make_tracker({"worker": 3}, **HB)
    start(tr)
    alive(tr, T0 + 20)  # last beat of worker:1; its node dies right after
    alive(tr, T0 + 22, "worker:0", "worker:2")
    tr.exited("worker:2", 134, [ABORTED], T0 + 23)
    tr.exited("worker:0", 1, [GLOO_CLOSED], T0 + 23.5)
    assert tr.check(T0 + 23.5) is None and tr.check(T0 + 30) is None
    verdict = failed(tr.check(T0 + 30.01), "worker:1 lost", "missed heartbeats", retryable=True)
    assert verdict.task_id == "worker:1" and verdict.consequences == ["worker:0", "worker:2"]


def test_a_crash_with_no_peer_lost_is_the_cause_named_by_its_signal_and_retryable() -> None:
    """As Kubeflow's policy has it, 128-255 is worth a retry; a crash only waits the grace of an own exit."""
    tr = make_tracker({"worker": 2}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:0", 139, ["Fatal Python error: Segmentation fault"], T0 + 10)
    assert tr.check(T0 + 10) is None
    alive(tr, T0 + 15, "worker:1")
    verdict = failed(tr.check(T0 + 15), "worker:0 exited with code 139 (SIGSEGV: it crashed)", retryable=True)
    assert verdict.cause is FailureKind.CRASH


def test_with_restarts_left_the_lost_peer_is_the_restarts_cause_and_its_host_is_avoided() -> None:
    tr = make_tracker({"worker": 3}, max_restarts=1, **HB)
    start(tr)
    tr.tasks["worker:1"].host = "127.0.0.3"
    alive(tr, T0 + 20)
    alive(tr, T0 + 25, "worker:0", "worker:2")
    tr.exited("worker:0", 1, COLLECTIVE, T0 + 25)
    assert tr.check(T0 + 26) is None and tr.restart_pending is None
    assert tr.check(T0 + 31) is None  # lost now: a restart, not a verdict
    record = tr.restart_pending
    assert record is not None and record.failed_task == "worker:1" and record.cause == "lost"
    assert record.consequences == ["worker:0"]
    assert tr.lost_hosts == {"127.0.0.3"}


def test_a_script_that_raises_on_its_own_fails_after_a_short_grace_not_retryable() -> None:
    tr = make_tracker({"worker": 3}, max_restarts=2)  # defaults: heartbeat_interval 5 s
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:1", 1, TRACEBACK, T0 + 10)
    assert tr.check(T0 + 10 + CODE_GRACE - 0.01) is None
    verdict = failed(tr.check(T0 + 10 + CODE_GRACE), "worker:1 exited with code 1", "ValueError", retryable=False)
    assert verdict.cause is FailureKind.CODE and verdict.consequences == []
    assert tr.restarts == []  # restarts left do not help a bug


def test_a_bug_on_one_worker_is_the_cause_of_its_peers_collective_errors() -> None:
    tr = make_tracker({"worker": 3}, max_restarts=2, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:2", 1, COLLECTIVE, T0 + 10.5)  # its peer raised: its collective aborted
    tr.exited("worker:1", 1, TRACEBACK, T0 + 11)
    tr.exited("worker:0", 1, COLLECTIVE, T0 + 11)
    alive(tr, T0 + 12)  # nobody left running: no beat, nothing lost
    assert tr.check(T0 + 10.5 + FULL_GRACE - 0.01) is None
    verdict = failed(tr.check(T0 + 10.5 + FULL_GRACE), "worker:1 exited with code 1", "ValueError", retryable=False)
    assert verdict.task_id == "worker:1" and verdict.cause is FailureKind.CODE
    assert sorted(verdict.consequences) == ["worker:0", "worker:2"]
    assert tr.restarts == []


def test_a_peer_blamed_but_never_seen_lost_is_retryable_after_the_grace() -> None:
    tr = make_tracker({"worker": 2}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:0", 1, PS_LOST, T0 + 10)
    tr.exited("worker:1", 1, COLLECTIVE, T0 + 10.2)
    assert tr.check(T0 + 21.99) is None
    verdict = failed(tr.check(T0 + 22), "worker:0", "its framework blames a peer", retryable=True)
    assert verdict.cause is FailureKind.PEER and verdict.consequences == ["worker:1"]


def test_a_code_exit_while_a_peer_has_gone_silent_waits_for_that_peer() -> None:
    """A script that catches the collective error and exits with its own message is still a consequence."""
    tr = make_tracker({"worker": 3}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    alive(tr, T0 + 13, "worker:0", "worker:2")  # worker:1 silent since T0+10
    tr.exited("worker:0", 1, ["RuntimeError: training failed"], T0 + 13)
    assert tr.check(T0 + 14.5) is None  # worker:1 missed two beats: suspect, so wait
    alive(tr, T0 + 19, "worker:2")
    assert tr.check(T0 + 20) is None
    failed(tr.check(T0 + 20.01), "worker:1 lost", retryable=True)
    assert tr.verdict is not None and tr.verdict.consequences == ["worker:0"]


def test_a_code_exit_with_every_peer_beating_is_not_held_for_the_full_grace() -> None:
    tr = make_tracker({"worker": 3}, **HB)
    start(tr)
    alive(tr, T0 + 13)
    tr.exited("worker:0", 1, ["RuntimeError: training failed"], T0 + 13)
    assert tr.check(T0 + 13.99) is None
    alive(tr, T0 + 14, "worker:1", "worker:2")
    failed(tr.check(T0 + 14), "worker:0 exited with code 1", retryable=False)


@pytest.mark.parametrize(("code", "kind"), [(137, FailureKind.SIGNAL), (75, FailureKind.RETRYABLE_EXIT)])
def test_a_retryable_exit_is_a_cause_at_once_and_later_failures_are_its_consequences(
    code: int, kind: FailureKind
) -> None:
    tr = make_tracker({"worker": 3}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:2", code, ["Killed"], T0 + 10)
    tr.exited("worker:0", 1, COLLECTIVE, T0 + 10)
    verdict = failed(tr.check(T0 + 10), f"worker:2 exited with code {code}", retryable=True)
    assert verdict.cause is kind and verdict.consequences == ["worker:0"]


def test_a_lost_container_beats_an_earlier_code_exit() -> None:
    """A loss at about the same time makes the others' failures its consequences, whatever came first."""
    tr = make_tracker({"worker": 2}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:0", 1, ["RuntimeError: lost my peer"], T0 + 10)
    tr.container_ended("worker:1", "Container released on a *lost* node", T0 + 11)
    verdict = failed(tr.check(T0 + 11), "worker:1 lost", "lost* node", retryable=True)
    assert verdict.cause is FailureKind.LOST and verdict.consequences == ["worker:0"]


def test_the_drain_answer_moves_the_restarts_last_step_to_where_training_stopped() -> None:
    tr = make_tracker({"worker": 2}, max_restarts=1, checkpoint={"dir": "/ckpt"}, **HB)
    start(tr)
    tr.tasks["worker:1"].host = "h2"  # lost on another node than the uploader's
    tr.heartbeat("worker:0", Heartbeat(seq=2, user_started=True), T0 + 5)
    tr.container_ended("worker:1", "node lost", T0 + 5)
    assert tr.check(T0 + 5) is None
    record = tr.restart_pending
    assert record is not None and tr.drain_task == "worker:0"
    record.last_step = 80
    tr.drained(90, 2.0, last_step=97)
    assert record.last_step == 97 and record.drained_step == 90
    tr.drained(90, 2.0, last_step=50)  # never moves back
    assert record.last_step == 97


def test_the_verdict_text_names_cause_and_each_consequence_exactly() -> None:
    tr = make_tracker({"worker": 3}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:2", 1, COLLECTIVE, T0 + 10)
    tr.container_ended("worker:0", "", T0 + 10.5)  # never registered its exit: lost
    tr.tasks["worker:0"].host = None
    tr.container_ended("worker:1", "node gone", T0 + 11)
    verdict = tr.check(T0 + 11)
    assert verdict is not None
    assert verdict.diagnostics == (
        "worker:0 lost: container ended without reporting an exit code; consequences: worker:1 lost, worker:2 exited 1"
    )
    failure = verdict.failure()
    assert failure is not None
    assert (failure.kind, failure.retryable, failure.task_id, failure.exit_code, failure.message) == (
        "lost",
        True,
        "worker:0",
        None,
        verdict.diagnostics,
    )
    assert failure.consequences == ["worker:1", "worker:2"]


def test_an_unregistered_task_and_a_peer_blaming_root_are_described() -> None:
    tr = make_tracker({"worker": 2}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.tasks["worker:0"].host = None
    tr.exited("worker:0", 1, PS_LOST, T0 + 10)
    tr.exited("worker:1", 0, [], T0 + 11)  # its peer finished: nobody to blame
    verdict = tr.check(T0 + 10 + FULL_GRACE)
    assert verdict is not None and verdict.diagnostics.startswith(
        "worker:0 exited with code 1 on an unregistered container; last stderr line: "
    )
    assert verdict.diagnostics.endswith(
        "(its framework blames a peer, none was seen lost: a peer is unavailable: "
        "tensorflow.python.framework.errors_impl.UnavailableError: Socket closed)"
    )
    doc = tr.document(T0 + 30, 1.7e9, 1, "application_1_0001")
    assert doc.failure is not None and doc.failure.exit_code == 1 and doc.failure.kind == "peer"


def test_a_verdict_without_a_task_has_a_failure_without_cause_or_exit_code() -> None:
    tr = make_tracker({"worker": 1}, registration_timeout=30.0)
    verdict = tr.check(T0 + 31)
    assert verdict is not None and verdict.task_id is None
    doc = tr.document(T0 + 31, 1.7e9, 1, "application_1_0001")
    assert doc.failure is not None
    assert (doc.failure.kind, doc.failure.task_id, doc.failure.exit_code, doc.failure.retryable) == (
        "",
        None,
        None,
        False,
    )
    ok = make_tracker({"worker": 1})
    start(ok)
    ok.exited("worker:0", 0, [], T0 + 2)
    assert ok.check(T0 + 2) is not None
    assert ok.document(T0 + 2, 1.7e9, 1, "a").failure is None


@pytest.mark.parametrize(
    ("interval", "timeout", "expected"),
    [(0.5, 10.0, 1.0), (1.0, 10.0, 1.0), (3.0, 20.0, 3.0), (5.0, 25.0, 5.0), (8.0, 40.0, 5.0)],
)
def test_a_code_exit_waits_one_container_check_clamped_to_1_to_5_s(
    interval: float, timeout: float, expected: float
) -> None:
    tr = make_tracker({"worker": 2}, heartbeat_interval=interval, heartbeat_timeout=timeout)
    start(tr)
    alive(tr, T0 + 2)
    tr.exited("worker:0", 1, TRACEBACK, T0 + 2)
    failed_tasks = [tr.tasks["worker:0"]]
    assert tr.grace(failed_tasks, T0 + 2) == expected
    assert tr.grace([], T0 + 2) == expected


def test_a_peer_is_suspect_only_after_missing_more_than_two_beats() -> None:
    tr = make_tracker({"worker": 2}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:0", 1, TRACEBACK, T0 + 10)
    failed_tasks = [tr.tasks["worker:0"]]
    assert tr.grace(failed_tasks, T0 + 12) == 1.0  # worker:1 silent exactly two beats
    assert tr.grace(failed_tasks, T0 + 12.01) == FULL_GRACE
    tr.tasks["worker:1"].state = TaskState.SUCCEEDED  # a finished peer is never suspect
    assert tr.grace(failed_tasks, T0 + 15) == 1.0


def test_the_silent_task_is_lost_with_the_time_it_was_silent() -> None:
    tr = make_tracker({"worker": 2}, **HB)
    start(tr)
    alive(tr, T0 + 10, "worker:0")
    tr.check(T0 + 11.5)  # worker:1 silent 10.5 s since T0+1
    task = tr.tasks["worker:1"]
    assert task.state is TaskState.LOST and task.kind is FailureKind.LOST and task.failed_at == T0 + 11.5
    assert task.message == (
        "missed heartbeats on h1: silent for 10.5s (~10 beats of 1s; timeout 10s); "
        "its executor is hung or its node is lost"
    )
    assert tr.tasks["worker:0"].state is TaskState.RUNNING
