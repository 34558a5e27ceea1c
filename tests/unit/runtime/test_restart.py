"""Recovery inside the application: ``max_restarts`` as a state of ``JobTracker``.

Pure policy with plain clocks, then the AM's thin restart step and the
executor's slot lookup against a stand-in for skein's application client.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.errors import GpuLeaseError
from airflow_provider_tony.runtime.executor import GPU_LEASE_EXIT_CODE, DrainWatch, find_slot, gpu_lease_exit
from airflow_provider_tony.runtime.messages import (
    AppState,
    ClusterDocument,
    Drain,
    Drained,
    ExitRecord,
    Heartbeat,
    Progress,
    Registration,
    Slot,
    StateDocument,
    TaskState,
)
from airflow_provider_tony.runtime.state import JobTracker
from tests.unit.support.tracker import CODE_GRACE, T0, WORKERS, failed, lose, make_spec, make_tracker, restart, run_gang


def test_a_lost_worker_with_restarts_left_restarts_the_gang_instead_of_failing() -> None:
    tr = make_tracker(WORKERS, max_restarts=2)
    run_gang(tr, T0 + 1, host="h3")
    for task_id in tr.tasks:  # every task beat recently: only worker:1 is lost
        tr.heartbeat(task_id, Heartbeat(seq=2, user_started=True), T0 + 49)
    lose(tr, "worker:1", T0 + 50)
    assert tr.check(T0 + 50, wall=1.7e9) is None
    record = tr.restart_pending
    assert record is not None and record.attempt == 1 and record.failed_task == "worker:1"
    assert record.host == "h3" and record.at == 50.0 and record.at_wall == 1.7e9 and "node lost" in record.reason
    # the survivors are stopped for the restart, the job is not over
    assert {t.state for tid, t in tr.tasks.items() if tid != "worker:1"} == {TaskState.RESTARTING}
    assert tr.app_state() is AppState.RESTARTING
    # nothing else is decided while the AM replaces the gang
    assert tr.check(T0 + 500) is None and tr.verdict is None


def test_the_new_gang_resumes_and_the_history_says_from_which_step() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    run_gang(tr, T0 + 1)
    tr.heartbeat("chief:0", Heartbeat(seq=2, user_started=True, progress=Progress(step=47, time=2.0)), T0 + 40)
    lose(tr, "worker:0", T0 + 50)
    tr.check(T0 + 50)
    restart(tr, T0 + 51)
    assert tr.generation == 1 and tr.restart_pending is None
    assert all(t.state is TaskState.PENDING for t in tr.tasks.values())
    assert tr.app_state() is AppState.RESTARTING  # until the new cluster spec is out
    run_gang(tr, T0 + 70, restored_step=40)
    assert tr.app_state() is AppState.RUNNING
    record = tr.restarts[0]
    assert (record.last_step, record.resumed_step, record.resumed_at) == (47, 40, 70.0)
    assert any("resumed from checkpoint step 40 (step 47 reached" in e for e in tr.events)
    doc = StateDocument.from_json(tr.document(T0 + 71, 1.7e9, 1, "app").to_json())
    assert doc.generation == 1 and doc.restarts[0].resumed_step == 40 and doc.restarts[0].failed_task == "worker:0"
    assert tr.cluster_doc(T0 + 71).generation == 1
    tr.exited("chief:0", 0, [], T0 + 90, generation=1)
    assert tr.check(T0 + 90) is not None and tr.verdict is not None and tr.verdict.succeeded


def test_messages_of_the_old_gang_are_ignored() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    run_gang(tr, T0 + 1)
    lose(tr, "worker:0", T0 + 50)
    tr.check(T0 + 50)
    restart(tr, T0 + 51)
    # the old chief, killed for the restart, reports 143 after the new gang was requested
    tr.exited("chief:0", 143, ["Terminated"], T0 + 52, generation=0)
    tr.register("chief:0", Registration(host="old", port=1, generation=0), T0 + 52)
    tr.heartbeat("worker:1", Heartbeat(seq=9, user_started=True, generation=0), T0 + 52)
    assert tr.tasks["chief:0"].state is TaskState.PENDING and tr.tasks["chief:0"].exit_code is None
    assert tr.tasks["worker:1"].state is TaskState.PENDING
    assert tr.check(T0 + 53) is None


def test_container_ids_map_to_tasks_of_the_current_gang_only() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    assert tr.task_of_container("worker", 1) == "worker:1"
    assert tr.task_of_container("worker", 2) is None  # not a first-gang instance
    tr.begin_generation({"worker_3": "worker:0", "worker_4": "worker:1", "chief_1": "chief:0"}, T0)
    assert tr.task_of_container("worker", 1) is None  # a container of the old gang
    assert tr.task_of_container("worker", 4) == "worker:1"


def test_restarts_exhausted_fail_as_retryable_and_say_so() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    run_gang(tr, T0 + 1)
    lose(tr, "worker:0", T0 + 50)
    tr.check(T0 + 50)
    restart(tr, T0 + 51)
    run_gang(tr, T0 + 60)
    lose(tr, "worker:1", T0 + 80)
    verdict = failed(tr.check(T0 + 80), "worker:1 lost", "after 1 in-application restart(s)", retryable=True)
    assert verdict.task_id == "worker:1" and len(tr.restarts) == 1


@pytest.mark.parametrize(("exit_code", "restarts"), [(137, 1), (143, 1), (75, 1), (1, 0), (2, 0)])
def test_only_retryable_exits_restart_the_gang(exit_code: int, restarts: int) -> None:
    tr = make_tracker(WORKERS, max_restarts=3)
    run_gang(tr, T0 + 1)
    for task_id in tr.tasks:  # the gang is alive: no peer is suspected lost
        tr.heartbeat(task_id, Heartbeat(seq=2, user_started=True), T0 + 10)
    tr.exited("worker:0", exit_code, ["boom"], T0 + 10)
    verdict = tr.check(T0 + 10 if restarts else T0 + 10 + CODE_GRACE)
    assert len(tr.restarts) == restarts
    if restarts:
        assert verdict is None and tr.restart_pending is not None
    else:  # the user's own bug: fails at once, not retryable
        failed(verdict, f"exited with code {exit_code}", retryable=False)


def test_missed_heartbeats_restart_the_gang() -> None:
    tr = make_tracker(WORKERS, max_restarts=1, heartbeat_interval=1.0, heartbeat_timeout=5.0)
    run_gang(tr, T0 + 1)
    for task_id in ("chief:0", "worker:0"):
        tr.heartbeat(task_id, Heartbeat(seq=2, user_started=True), T0 + 5)
    assert tr.check(T0 + 6) is None and tr.restart_pending is None  # worker:1 silent exactly 5 s
    assert tr.check(T0 + 6.01) is None
    assert tr.restart_pending is not None and tr.restart_pending.failed_task == "worker:1"


def test_a_restarted_gang_gets_its_own_registration_timeout() -> None:
    tr = make_tracker(WORKERS, max_restarts=1, registration_timeout=30.0)
    run_gang(tr, T0 + 1)
    lose(tr, "worker:0", T0 + 100)
    tr.check(T0 + 100)
    restart(tr, T0 + 100)
    assert tr.check(T0 + 130) is None  # 30 s after the restart, not after the AM started
    failed(tr.check(T0 + 130.01), "registration timeout", retryable=False)


def test_without_max_restarts_a_lost_task_fails_at_once() -> None:
    tr = make_tracker(WORKERS)
    assert tr.spec.max_restarts == 0
    run_gang(tr, T0 + 1)
    lose(tr, "worker:0", T0 + 50)
    verdict = failed(tr.check(T0 + 50), "worker:0 lost", retryable=True)
    assert "in-application restart" not in verdict.diagnostics and tr.restarts == []


def test_max_restarts_must_be_a_count() -> None:
    with pytest.raises(ValueError, match="max_restarts.*-1 must be >= 0"):
        make_spec(WORKERS, max_restarts=-1)


# --------------------------------------------------------------------------- #
# the AM's restart step and the executor's slot, against a stand-in skein client
# --------------------------------------------------------------------------- #


class FakeKV(dict[str, bytes]):
    def discard(self, key: str) -> None:
        self.pop(key, None)

    def discard_prefix(self, prefix: str) -> None:
        for key in [k for k in self if k.startswith(prefix)]:
            del self[key]

    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        return {k: v for k, v in self.items() if k.startswith(prefix)}


class FakeApp:
    """skein's scale: instance numbers go on across scale-downs, as skein's do;
    ``get_specification`` gives each service's declared nodes."""

    def __init__(self, first_instances: dict[str, int], nodes: dict[str, list[str]] | None = None) -> None:
        self.kv = FakeKV()
        self.next_instance = dict(first_instances)  # service -> its next instance number
        self.calls: list[tuple[str, int]] = []
        self.nodes = nodes or {}
        self.running: dict[str, int] = {}  # service -> containers asked for
        self.containers: list[Any] = []  # what get_containers reports

    def get_containers(self, services: list[str] | None = None, states: list[str] | None = None) -> list[Any]:
        return [
            c
            for c in self.containers
            if (services is None or c.service_name in services) and (states is None or c.state in states)
        ]

    def get_specification(self) -> Any:
        return SimpleNamespace(services={name: SimpleNamespace(nodes=n) for name, n in self.nodes.items()})

    def scale(self, role: str, count: int | None = None, delta: int | None = None) -> list[Any]:
        if delta is not None:  # skein's scale(service, delta=n): n more containers
            count = self.running.get(role, 0) + delta
        assert count is not None
        self.calls.append((role, count))
        added = count - self.running.get(role, 0)
        self.running[role] = count
        if count == 0 or added <= 0:
            return []
        count = added
        first = self.next_instance.setdefault(role, 0)
        self.next_instance[role] += count
        return [SimpleNamespace(id=f"{role}_{i}", instance=i) for i in range(first + count - 1, first - 1, -1)]


def test_the_am_replaces_every_container_and_names_the_new_ones() -> None:
    spec = make_spec(WORKERS, max_restarts=1)
    app = FakeApp({"chief": 1, "worker": 2})
    am = ApplicationMaster(app, spec, "application_1_0001")
    app.kv[C.KV_CLUSTER] = ClusterDocument().to_json()
    app.kv[C.kv_exit("worker:0")] = ExitRecord(exit_code=137).to_json()
    run_gang(am.tracker, T0 + 1)
    lose(am.tracker, "worker:0", T0 + 5)
    am.tracker.check(T0 + 5)
    am.restart_gang(T0 + 5)
    # every role down, then up to its size
    assert app.calls == [("chief", 0), ("worker", 0), ("chief", 1), ("worker", 2)]
    # the old gang's keys are gone; each new container knows its task and gang
    assert C.KV_CLUSTER not in app.kv and C.kv_exit("worker:0") not in app.kv
    slots = {k: Slot.from_json(v) for k, v in app.kv.items() if k.startswith(C.KV_SLOT_PREFIX)}
    assert {k: (s.task_id, s.generation) for k, s in slots.items()} == {
        C.kv_slot("chief_1"): ("chief:0", 1),
        C.kv_slot("worker_2"): ("worker:0", 1),
        C.kv_slot("worker_3"): ("worker:1", 1),
    }
    assert am.tracker.generation == 1 and am.tracker.task_of_container("worker", 3) == "worker:1"


def test_a_restarted_gangs_gpu_lease_failure_reaches_the_verdict() -> None:
    """The executor's GPU-lease exit record names its gang: after a restart (gang 1) the AM
    takes it and fails the job with the GPU message, instead of dropping it as an old gang's and
    waiting for the registration timeout."""
    spec = make_spec(WORKERS, max_restarts=1)
    app = FakeApp({"chief": 1, "worker": 2})
    am = ApplicationMaster(app, spec, "application_1_0001")
    run_gang(am.tracker, T0 + 1)
    lose(am.tracker, "worker:0", T0 + 5)
    am.tracker.check(T0 + 5)
    am.restart_gang(T0 + 5)
    assert am.tracker.generation == 1
    record = gpu_lease_exit(GpuLeaseError("4 of this node's 4 GPUs are leased by other containers"), 1, now=7.0)
    assert (record.generation, record.exit_code, record.time) == (1, GPU_LEASE_EXIT_CODE, 7.0)
    app.kv[C.kv_exit("worker:1")] = record.to_json()
    am.read_store(T0 + 8)
    assert am.tracker.tasks["worker:1"].state is TaskState.FAILED
    verdict = am.tracker.check(T0 + 8)
    assert verdict is not None and not verdict.succeeded
    assert verdict.task_id == "worker:1" and verdict.retryable  # 75: GPUs free up as other jobs end
    assert "GPU lease: 4 of this node's 4 GPUs" in verdict.diagnostics


def test_an_executor_finds_its_task_from_its_container_or_the_slot() -> None:
    spec = make_spec(WORKERS)
    app = SimpleNamespace(kv={C.kv_slot("worker_3"): Slot(task_id="worker:1", generation=1).to_json()})
    assert find_slot(app, spec, {C.ENV_SKEIN_CONTAINER_ID: "worker_1"}) == ("worker", 1, 0)
    assert find_slot(app, spec, {C.ENV_SKEIN_CONTAINER_ID: "worker_3"}) == ("worker", 1, 1)
    with pytest.raises(RuntimeError, match="worker_4 has no slot"):
        find_slot(app, spec, {C.ENV_SKEIN_CONTAINER_ID: "worker_4"}, wait_s=0.0)


def test_a_spread_role_restarts_service_by_service() -> None:
    spec = make_spec({"worker": {"instances": 2, "placement": "spread"}}, max_restarts=1)
    app = FakeApp({"worker.0": 1, "worker.1": 1})
    am = ApplicationMaster(app, spec, "application_1_0001")
    assert am.tracker.task_of_container("worker.1", 0) == "worker:1"
    assert am.tracker.task_of_container("worker.1", 1) is None  # not a first-gang container
    run_gang(am.tracker, T0 + 1)
    lose(am.tracker, "worker:1", T0 + 5)
    am.tracker.check(T0 + 5)
    am.restart_gang(T0 + 5)
    assert app.calls == [("worker.0", 0), ("worker.1", 0), ("worker.elsewhere", 0), ("worker.0", 1), ("worker.1", 1)]
    slots = {k: Slot.from_json(v).task_id for k, v in app.kv.items() if k.startswith(C.KV_SLOT_PREFIX)}
    assert slots == {C.kv_slot("worker.0_1"): "worker:0", C.kv_slot("worker.1_1"): "worker:1"}
    assert find_slot(app, spec, {C.ENV_SKEIN_CONTAINER_ID: "worker.1_1"}) == ("worker", 1, 1)
    assert find_slot(app, spec, {C.ENV_SKEIN_CONTAINER_ID: "worker.1_0"}) == ("worker", 1, 0)


def test_a_spread_task_pinned_to_a_lost_node_restarts_on_the_roles_fallback_service() -> None:
    spec = make_spec({"worker": {"instances": 3, "placement": "spread"}}, max_restarts=2)
    nodes = {"worker.0": ["n1"], "worker.1": ["n2"], "worker.2": ["n3"], "worker.elsewhere": []}
    app = FakeApp({"worker.0": 1, "worker.1": 1, "worker.2": 1}, nodes)
    am = ApplicationMaster(app, spec, "application_1_0001")
    for i, host in enumerate(("n1", "n2", "n3")):
        am.tracker.register(f"worker:{i}", Registration(host=host, port=3000 + i), T0 + 1)
    am.tracker.cluster_doc(T0 + 1)
    lose(am.tracker, "worker:1", T0 + 5)  # n2 is gone
    am.tracker.check(T0 + 5)
    assert am.tracker.lost_hosts == {"n2"}
    am.restart_gang(T0 + 5)
    # worker:1 does not wait for n2: it comes from the fallback; the others keep their nodes
    assert ("worker.1", 1) not in app.calls and ("worker.elsewhere", 1) in app.calls
    slots = {k: Slot.from_json(v).task_id for k, v in app.kv.items() if k.startswith(C.KV_SLOT_PREFIX)}
    assert slots[C.kv_slot("worker.elsewhere_0")] == "worker:1"
    assert slots[C.kv_slot("worker.0_1")] == "worker:0" and slots[C.kv_slot("worker.2_1")] == "worker:2"
    assert am.tracker.restarts[0].moved == {"worker:1": "n2"}
    assert am.tracker.task_of_container("worker.elsewhere", 0) == "worker:1"
    # the fallback container's executor learns its task from the slot, as any restarted one
    env = {C.ENV_SKEIN_CONTAINER_ID: "worker.elsewhere_0"}
    assert find_slot(app, spec, env) == ("worker", 1, 1)
    with pytest.raises(RuntimeError, match="worker.elsewhere_5 has no slot"):
        find_slot(app, spec, {C.ENV_SKEIN_CONTAINER_ID: "worker.elsewhere_5"}, wait_s=0.0)
    # then n1 is lost too: worker:0 moves, and worker:1's own service still points at n2, so it moves again
    run_gang(am.tracker, T0 + 10)
    for task_id, host in (("worker:0", "n1"), ("worker:1", "n3"), ("worker:2", "n3")):
        am.tracker.tasks[task_id].host = host
    lose(am.tracker, "worker:0", T0 + 20)
    am.tracker.check(T0 + 20)
    app.calls.clear()
    am.restart_gang(T0 + 20)
    assert ("worker.elsewhere", 2) in app.calls and ("worker.1", 1) not in app.calls and ("worker.2", 1) in app.calls
    assert am.tracker.restarts[1].moved == {"worker:0": "n1", "worker:1": "n2"}


@pytest.mark.parametrize(("exit_code", "suspect"), [(143, True), (137, True), (75, False)])
def test_a_node_is_suspect_when_its_task_was_killed_by_a_signal_not_when_it_exited(
    exit_code: int, suspect: bool
) -> None:
    """A NodeManager that shuts down SIGTERMs its containers; exit 75 is the script's own choice."""
    tr = make_tracker(WORKERS, max_restarts=1)
    run_gang(tr, T0 + 1, host="h1")
    tr.exited("worker:1", exit_code, ["Killed"], T0 + 5)
    tr.check(T0 + 5)
    assert tr.restart_pending is not None and tr.lost_hosts == ({"h1"} if suspect else set())


def test_a_crash_restarts_the_gang_without_suspecting_its_node() -> None:
    """SIGABRT (134) is the process's own end, not the NodeManager's kill: the node stays usable."""
    tr = make_tracker(WORKERS, max_restarts=1)
    run_gang(tr, T0 + 1, host="h1")
    tr.exited("worker:1", 134, ["terminate called without an active exception"], T0 + 5)
    assert tr.check(T0 + 5) is None and tr.restart_pending is None  # an own exit waits its grace
    run_gang(tr, T0 + 5 + CODE_GRACE, host="h1")
    tr.check(T0 + 5 + CODE_GRACE)
    assert tr.restart_pending is not None and tr.restart_pending.cause == "crash" and tr.lost_hosts == set()


# --------------------------------------------------------------------------- #
# the uploader finishes before the gang is stopped (drain)
# --------------------------------------------------------------------------- #


def drain_am(**options: Any) -> tuple[ApplicationMaster, FakeApp]:
    spec = make_spec(WORKERS, max_restarts=1, **{"checkpoint": {"dir": "/ckpt"}, **options})
    app = FakeApp({"chief": 1, "worker": 2})
    am = ApplicationMaster(app, spec, "application_1_0001")
    run_gang(am.tracker, T0 + 1)
    for task_id, host in (("chief:0", "h0"), ("worker:0", "h1"), ("worker:1", "h2")):
        am.tracker.tasks[task_id].host = host
    return am, app


def test_the_am_asks_the_uploader_to_finish_and_waits_for_its_answer() -> None:
    am, app = drain_am()
    lose(am.tracker, "worker:1", T0 + 5)
    am.tracker.check(T0 + 5)
    assert am.tracker.drain_task == "chief:0"  # the uploader (the decider) is alive
    assert am.drain(T0 + 5) is False and Drain.from_json(app.kv[C.KV_DRAIN]).generation == 0
    assert am.drain(T0 + 6) is False  # no answer yet: the gang is not stopped
    app.kv[C.kv_drained("chief:0")] = Drained(generation=0, step=50).to_json()
    assert am.drain(T0 + 8) is True
    record = am.tracker.restart_pending
    assert record is not None and record.drained_step == 50 and record.drain_seconds == 3.0
    am.restart_gang(T0 + 8)
    # the request and the answer belong to the old gang: cleared with it
    assert C.KV_DRAIN not in app.kv and C.kv_drained("chief:0") not in app.kv
    assert am.tracker.restarts[0].drained_step == 50 and am.drain_started is None


def test_the_wait_for_the_uploader_is_bounded() -> None:
    am, app = drain_am()
    lose(am.tracker, "worker:1", T0 + 5)
    am.tracker.check(T0 + 5)
    am.drain(T0 + 5)
    app.kv[C.kv_drained("chief:0")] = Drained(generation=7, step=99).to_json()  # another gang's answer
    assert am.drain(T0 + 5 + C.DRAIN_TIMEOUT_S) is False
    assert am.drain(T0 + 5.01 + C.DRAIN_TIMEOUT_S) is True
    assert am.tracker.restart_pending is not None and am.tracker.restart_pending.drained_step is None


def test_an_uploader_that_exited_ends_the_wait() -> None:
    am, app = drain_am()
    lose(am.tracker, "worker:1", T0 + 5)
    am.tracker.check(T0 + 5)
    am.drain(T0 + 5)
    # it ended on its own (its collective failed), its final flush done: the record names what is on HDFS
    record = ExitRecord(exit_code=1, checkpoint_step=40, progress=Progress(step=47))
    app.kv[C.kv_exit("chief:0")] = record.to_json()
    assert am.drain(T0 + 6) is True
    pending = am.tracker.restart_pending
    assert pending is not None and (pending.drained_step, pending.drain_seconds) == (40, 1.0)
    assert pending.last_step == 47


def test_a_corrupt_exit_record_does_not_end_the_wait_for_the_uploader() -> None:
    am, app = drain_am()
    lose(am.tracker, "worker:1", T0 + 5)
    am.tracker.check(T0 + 5)
    am.drain(T0 + 5)
    app.kv[C.kv_exit("chief:0")] = b"{not json"  # any container can write the store
    assert am.drain(T0 + 6) is False


@pytest.mark.parametrize(
    ("failure", "why"),
    [
        ("chief:0", "the uploader itself failed"),
        ("worker:0", "the uploader's node is the lost one"),
    ],
)
def test_no_wait_when_the_uploader_cannot_upload(failure: str, why: str) -> None:
    am, app = drain_am()
    if failure == "worker:0":  # chief:0 and worker:0 on one node, which is lost
        am.tracker.tasks["worker:0"].host = am.tracker.tasks["chief:0"].host
    lose(am.tracker, failure, T0 + 5)
    am.tracker.check(T0 + 5)
    assert am.tracker.drain_task is None, why
    assert am.drain(T0 + 5) is True and C.KV_DRAIN not in app.kv
    record = am.tracker.restart_pending
    assert record is not None and record.drain_seconds is None and record.drained_step is None


def test_no_wait_without_checkpoints() -> None:
    spec = make_spec(WORKERS, max_restarts=1)
    am = ApplicationMaster(FakeApp({"chief": 1, "worker": 2}), spec, "application_1_0001")
    run_gang(am.tracker, T0 + 1)
    am.tracker.tasks["worker:1"].host = "h2"
    lose(am.tracker, "worker:1", T0 + 5)
    am.tracker.check(T0 + 5)
    assert am.tracker.drain_task is None and am.drain(T0 + 5) is True


class FakeSync:
    def __init__(self, step: int, complete: bool = True) -> None:
        self.step, self.complete, self.flushed, self.last_error = step, complete, 0, "" if complete else "HDFS down"

    def flush(self, timeout: float) -> bool:
        self.flushed += 1
        return self.complete

    def newest_uploaded(self) -> int | None:
        return self.step


def test_the_uploader_answers_a_drain_of_its_own_gang_only_after_flushing() -> None:
    app = FakeApp({})
    sync = FakeSync(step=60)
    watch = DrainWatch(app, "worker:0", 2, sync, interval=0.01, timeout=5.0)  # type: ignore[arg-type]
    assert watch.requested() is False
    app.kv[C.KV_DRAIN] = Drain(generation=1).to_json()  # an older gang's request
    assert watch.requested() is False
    app.kv[C.KV_DRAIN] = b"{not json"
    assert watch.requested() is False
    app.kv[C.KV_DRAIN] = Drain(generation=2).to_json()
    assert watch.requested() is True
    watch.start()
    watch.join(timeout=10)
    assert not watch.is_alive() and sync.flushed == 1
    assert Drained.from_json(app.kv[C.kv_drained("worker:0")]) == Drained(generation=2, step=60, complete=True)


def test_an_upload_that_could_not_finish_is_said_so() -> None:
    app = FakeApp({})
    answer = DrainWatch(app, "chief:0", 0, FakeSync(step=40, complete=False), 0.01, 1.0).answer()  # type: ignore[arg-type]
    assert answer.step == 40 and answer.complete is False and answer.error == "HDFS down"


def test_the_restart_record_says_when_what_and_from_which_step_exactly() -> None:
    """What the operator's XCom and the job page show of a restart: each field, its rounding, and
    what the stopped tasks and the event list say (the verdict's own wording is not pinned here)."""
    tr = make_tracker(WORKERS, max_restarts=2, checkpoint={"dir": "/ckpt"})
    run_gang(tr, T0 + 1)
    for task_id, host in (("chief:0", "h0"), ("worker:0", "h1"), ("worker:1", "h2")):
        tr.tasks[task_id].host = host
    tr.heartbeat("chief:0", Heartbeat(seq=2, user_started=True, progress=Progress(step=47, time=2.0)), T0 + 40)
    tr.heartbeat("worker:0", Heartbeat(seq=2, user_started=True), T0 + 40)  # alive: only worker:1 is lost
    lose(tr, "worker:1", T0 + 50.12345)
    assert tr.check(T0 + 50.12345, wall=1.7e9 + 0.25) is None
    assert tr.drain_task == "chief:0", "the uploader runs on a live node: the AM waits for its last upload"
    assert tr.tasks["worker:0"].message == "stopped to restart the gang after worker:1 failed"
    assert tr.events[-1].startswith("restart 1 of 2: ")
    assert tr.events[-1].endswith("; replacing every task, resuming from the latest checkpoint")
    tr.drained(40, 2.34567)
    assert tr.events[-1] == "restart 1: checkpoint step 40 on HDFS before the gang was stopped"
    restart(tr, T0 + 53)
    assert tr.generation == 1 and tr.drain_task is None and tr.restart_pending is None
    run_gang(tr, T0 + 70.98765, restored_step=40)
    record = tr.restarts[0].to_dict()
    assert {k: v for k, v in record.items() if k != "reason"} == {
        "attempt": 1,
        "failed_task": "worker:1",
        "host": "h2",
        "at": 50.123,
        "at_wall": 1.7e9 + 0.25,
        "last_step": 47,
        "resumed_step": 40,
        "resumed_at": 70.988,
        "drained_step": 40,
        "drain_seconds": 2.346,
        "moved": {},
        "cause": "lost",
        "consequences": [],
    }
    lose(tr, "worker:0", T0 + 90)
    tr.check(T0 + 90)
    assert tr.restarts[1].attempt == 2 and tr.events[-1].startswith("restart 2 of 2: ")
    restart(tr, T0 + 91)
    assert tr.generation == 2, "each restart is a new gang"


def test_a_drain_that_saved_nothing_adds_no_event() -> None:
    tr = make_tracker(WORKERS, max_restarts=1, checkpoint={"dir": "/ckpt"})
    run_gang(tr, T0 + 1)
    lose(tr, "worker:1", T0 + 5)
    tr.check(T0 + 5)
    events = list(tr.events)
    tr.drained(None, 30.0)
    assert tr.events == events and tr.restart_pending is not None
    assert (tr.restart_pending.drained_step, tr.restart_pending.drain_seconds) == (None, 30.0)


def _restarted(tr: JobTracker, steps: dict[str, int | None]) -> None:
    """Lose a worker at T0 + 50, start the next gang with these restored steps at T0 + 67.5."""
    run_gang(tr, T0 + 1)
    lose(tr, "worker:1", T0 + 50)
    tr.check(T0 + 50)
    restart(tr, T0 + 51)
    gen = tr.generation
    for i, task_id in enumerate(sorted(tr.tasks)):
        tr.register(task_id, Registration(host="h1", port=3000 + i, generation=gen), T0 + 60)
    tr.cluster_doc(T0 + 60)
    for task_id, step in steps.items():
        tr.heartbeat(task_id, Heartbeat(seq=1, user_started=True, restored_step=step, generation=gen), T0 + 67.5)


def test_without_the_deciders_step_the_gang_resumed_from_the_newest_a_task_restored() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    _restarted(tr, {"chief:0": None, "worker:0": 30, "worker:1": 40})
    assert tr.restarts[0].resumed_step == 40 and tr.restarts[0].resumed_at == 67.5
    assert tr.events[-1] == "restart 1: the new gang resumed from checkpoint step 40, 17.5s after the failure"


def test_a_gang_that_restored_nothing_resumed_from_scratch() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    _restarted(tr, {"chief:0": None, "worker:0": None, "worker:1": None})
    assert tr.restarts[0].resumed_step is None
    assert tr.events[-1] == "restart 1: the new gang resumed from scratch (no checkpoint), 17.5s after the failure"


def test_the_deciders_step_wins_over_the_others() -> None:
    tr = make_tracker(WORKERS, max_restarts=1)
    _restarted(tr, {"chief:0": 20, "worker:0": 30, "worker:1": 40})
    assert tr.restarts[0].resumed_step == 20


def test_the_drain_stops_training_before_the_last_flush_and_reports_the_step_reached(tmp_path) -> None:
    """Stopped first, flushed second: no checkpoint is saved after the upload the new gang resumes from."""
    order: list[str] = []
    progress_file = tmp_path / "progress.json"
    progress_file.write_text('{"step": 97, "time": 1.0}')

    class OrderedSync(FakeSync):
        def flush(self, timeout: float) -> bool:
            order.append("flush")
            return super().flush(timeout)

    watch = DrainWatch(
        FakeApp({}),
        "worker:0",
        0,
        OrderedSync(step=90),  # type: ignore[arg-type]
        0.01,
        1.0,
        stop_training=lambda: order.append("stop"),
        progress_file=progress_file,
    )
    answer = watch.answer()
    assert order == ["stop", "flush"]
    assert watch.draining.is_set()
    assert answer.step == 90 and answer.last_step == 97


def test_a_spread_task_with_no_container_on_its_node_is_placed_elsewhere() -> None:
    """Its node may be dead while the RM still lists it (a retry planned right after a machine loss)."""
    from airflow_provider_tony.runtime.am import PLACEMENT_WAIT_S

    spec = make_spec({"worker": {"instances": 2, "placement": "spread"}})
    app = FakeApp({"worker.0": 1, "worker.1": 1}, nodes={"worker.1": ["dead-node"]})
    app.running = {"worker.0": 1, "worker.1": 1}
    am = ApplicationMaster(app, spec, "application_1_0001")
    am.tracker.generation_started = T0  # the gang was asked for at T0 (the AM's own clock otherwise)
    am.tracker.register("worker:0", Registration(host="h1", port=1), T0 + 2)
    am.place_elsewhere(T0 + PLACEMENT_WAIT_S - 0.01)
    assert app.calls == [] and am.tracker.slots == {}  # still waiting for its node
    # worker:1's container runs (its executor is starting): nothing moves
    app.containers = [SimpleNamespace(service_name="worker.1", instance=0, state="RUNNING")]
    am.place_elsewhere(T0 + PLACEMENT_WAIT_S + 1)
    assert app.calls == []
    app.containers = []
    am.place_elsewhere(T0 + PLACEMENT_WAIT_S + 2)
    assert app.calls == [("worker.1", 0), ("worker.elsewhere", 1)]
    assert Slot.from_json(app.kv[C.kv_slot("worker.elsewhere_0")]) == Slot(task_id="worker:1", generation=0)
    assert am.tracker.task_of_container("worker.elsewhere", 0) == "worker:1"
    assert "dead-node" in am.tracker.events[-1]
    # asked once; its new executor registers in the same gang, and the retired request's end means nothing
    am.place_elsewhere(T0 + PLACEMENT_WAIT_S + 10)
    assert len(app.calls) == 2
    am.tracker.register("worker:1", Registration(host="h2", port=2), T0 + 70)
    assert am.tracker.tasks["worker:1"].state is TaskState.REGISTERED
    app.containers = [
        SimpleNamespace(service_name="worker.1", instance=0, state="KILLED", yarn_container_id="c", exit_message="")
    ]
    am.check_containers(T0 + 80)
    assert am.tracker.tasks["worker:1"].state is TaskState.REGISTERED
