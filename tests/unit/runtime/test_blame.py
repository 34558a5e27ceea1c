"""A lost task declared from the evidence (``runtime/blame.py``, ``JobTracker._declare_blamed``).

Survivors' TensorFlow errors naming a peer, plus that peer's missed beats
(``BLAMED_MISSED_BEATS``), declare it lost long before ``heartbeat_timeout``;
missed beats without blame (a slow task under load), or blame of a peer that
still beats, declare nothing. Plain clocks: the boundaries are exact.
"""

from __future__ import annotations

from airflow_provider_tony.runtime.blame import BLAMED_MIN_SILENCE_S, BLAMED_MISSED_BEATS, blamed
from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.state import JobTracker, TaskState
from tests.unit.support.tracker import T0, beat, failed, make_tracker, register

INTERVAL, TIMEOUT = 1.0, 30.0
BY_NAME = [
    "2026-12-02 tensorflow/core/common_runtime/base_collective_executor.cc:249] BaseCollectiveExecutor::StartAbort",
    "UnavailableError: Collective ops is aborted by: failed to connect to all addresses; "
    "Additional GRPC error information from remote target /job:worker/replica:0/task:2",
    "\t [[{{node CollectiveReduceV2}}]] [Op:__inference_train_function_1234]",
]
BY_ADDRESS = [
    "UnavailableError: failed to connect to all addresses; last error: ipv4:127.0.0.3:2002: Connection refused"
]
GENERIC = ["\t [[{{node CollectiveReduceV2}}]] [Op:__inference_train_function_1234]"]


def gang() -> JobTracker:
    """Three workers on three hosts, beating until T0 + 2."""
    tr = make_tracker({"worker": 3}, heartbeat_interval=INTERVAL, heartbeat_timeout=TIMEOUT)
    for i, task_id in enumerate(sorted(tr.tasks)):
        register(tr, task_id, host=f"127.0.0.{i + 1}")
    tr.cluster_doc(T0 + 1)
    for task_id in tr.tasks:
        beat(tr, task_id, 1, T0 + 1)
        beat(tr, task_id, 2, T0 + 2)
    return tr


def keep_beating(tr: JobTracker, task_id: str, until: float) -> None:
    seq, t = 3, T0 + 2
    while t <= until:
        beat(tr, task_id, seq, t)
        seq, t = seq + 1, t + INTERVAL


def test_blame_reads_tensorflows_task_names_and_registered_addresses() -> None:
    addresses = {"worker:1": ("127.0.0.2", 2001), "worker:2": ("127.0.0.3", 2002)}
    assert blamed([BY_NAME], addresses) == {"worker:2"}
    assert blamed([BY_ADDRESS], addresses) == {"worker:2"}
    assert blamed([GENERIC], addresses) == set()
    assert blamed([["ipv4:127.0.0.3:20021 refused", "127.0.0.33:2002"]], addresses) == set(), "no prefix match"


def declared_at(tail: list[str], lost_beat: float = T0 + 2) -> tuple[JobTracker, float]:
    """worker:2 goes silent after ``lost_beat``; worker:0 fails blaming it at T0 + 3.5."""
    tr = gang()
    tr.exited("worker:0", 1, tail, T0 + 3.5)
    keep_beating(tr, "worker:1", T0 + 20)
    return tr, lost_beat + INTERVAL * BLAMED_MISSED_BEATS


def test_a_blamed_task_that_missed_three_beats_is_declared_lost_at_the_boundary() -> None:
    tr, boundary = declared_at(BY_NAME)
    assert tr.tasks["worker:0"].kind is FailureKind.PEER
    assert tr.check(boundary - 0.01) is None and tr.tasks["worker:2"].state is TaskState.RUNNING
    verdict = failed(tr.check(boundary), "worker:2 lost: declared lost", "worker:0 failed blaming it", retryable=True)
    assert verdict.cause is FailureKind.LOST and verdict.task_id == "worker:2"
    assert verdict.consequences == ["worker:0"]
    assert boundary - T0 < TIMEOUT / 5, "far sooner than the heartbeat timeout"


def test_with_a_short_interval_blame_waits_for_yarns_word_on_the_container() -> None:
    """Heartbeats every 0.5 s: three missed beats are 1.5 s, sooner than YARN tells the AM that a
    container it killed for memory ended; the declaration waits ``BLAMED_MIN_SILENCE_S``."""
    tr = make_tracker({"worker": 2}, heartbeat_interval=0.5, heartbeat_timeout=10.0)
    for i, task_id in enumerate(sorted(tr.tasks)):
        register(tr, task_id, host=f"127.0.0.{i + 1}")
    tr.cluster_doc(T0 + 1)
    for task_id in tr.tasks:
        beat(tr, task_id, 1, T0 + 2)
    tail = [line.replace("task:2", "task:1") for line in BY_NAME]
    tr.exited("worker:0", 1, tail, T0 + 2.4)
    assert tr.check(T0 + 2 + 3 * 0.5) is None and tr.tasks["worker:1"].state is TaskState.RUNNING
    assert tr.check(T0 + 2 + BLAMED_MIN_SILENCE_S - 0.01) is None
    failed(tr.check(T0 + 2 + BLAMED_MIN_SILENCE_S), "worker:1 lost: declared lost", retryable=True)


def test_blame_by_the_peers_address_declares_it_too() -> None:
    tr, boundary = declared_at(BY_ADDRESS)
    failed(tr.check(boundary), "worker:2 lost: declared lost", retryable=True)


def test_a_slow_task_without_blame_is_not_declared_before_the_heartbeat_timeout() -> None:
    tr = gang()
    keep_beating(tr, "worker:0", T0 + 2 + TIMEOUT)
    keep_beating(tr, "worker:1", T0 + 2 + TIMEOUT)
    for missed in (3, 10, 29):
        assert tr.check(T0 + 2 + missed * INTERVAL) is None
    assert tr.tasks["worker:2"].state is TaskState.RUNNING


def test_a_generic_peer_failure_names_no_one_so_a_silent_task_waits_for_the_timeout() -> None:
    tr, boundary = declared_at(GENERIC)
    assert tr.check(boundary + 5) is None and tr.tasks["worker:2"].state is TaskState.RUNNING


def test_blame_of_a_peer_that_still_beats_declares_nothing_and_spares_a_slow_bystander() -> None:
    """worker:0 blames worker:1, which beats on; worker:2 is only slow: neither is declared lost early."""
    tr = gang()
    tail = [line.replace("task:2", "task:1") for line in BY_NAME]
    tr.exited("worker:0", 1, tail, T0 + 3.5)
    keep_beating(tr, "worker:1", T0 + 20)
    assert tr.check(T0 + 2 + 10 * INTERVAL) is None
    assert tr.tasks["worker:1"].state is TaskState.RUNNING and tr.tasks["worker:2"].state is TaskState.RUNNING


def test_a_blamed_task_whose_nodemanager_says_its_container_ended_waits_for_yarns_word() -> None:
    """The node is alive and YARN ended the container (over its memory, say): no early declaration,
    one event saying why, and the ordinary heartbeat timeout still declares it lost if YARN never says."""
    tr, boundary = declared_at(BY_NAME)
    asked: list[str] = []
    tr.ended_on_its_node = lambda task: asked.append(task.task_id) or True
    assert tr.check(boundary + 1) is None and tr.check(boundary + 5) is None
    assert tr.tasks["worker:2"].state is TaskState.RUNNING
    assert asked == ["worker:2"], "only the blamed, silent task's node is asked, and once: ended is final"
    waiting = [e for e in tr.events if "its NodeManager says its container ended" in e]
    assert len(waiting) == 1 and waiting[0].startswith("worker:2 "), tr.events
    failed(tr.check(T0 + 2 + TIMEOUT + 0.01), "worker:2 lost: missed heartbeats", retryable=True)
