"""A container YARN kills for its memory: YARN's diagnostics, the AM's verdict, ``memory_retry``.

Pure rules first (which texts are a memory kill, with what figures), then the
AM's part against the stand-in for skein's application client of
``test_preemption``: the executor's 143 (the NodeManager's SIGTERM) is not
judged as a signal death once YARN says the container went over its memory.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.messages import TaskState
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.state import final_diagnostics
from airflow_provider_tony.runtime.yarn_exit import SKEIN_MEMORY_DIAGNOSTICS, MemoryKill, memory_kill
from tests.unit.support.am import container, exit_record, running_am
from tests.unit.support.tracker import T0, failed, make_tracker, run_gang

MIB = 2**20
#: skein's exit message for a -104 (its Utils.formatExceededMemMessage keeps the figures only).
SKEIN_PMEM = "982.0 MB of 512 MB physical memory used"
#: The NodeManager's own diagnostics (Hadoop 3.4's ContainersMonitorImpl), as the RM's REST API serves them.
NM_PMEM = (
    "Container [pid=12605,containerID=container_1_0001_01_000003] is running 493051904B beyond the 'PHYSICAL' "
    "memory limit. Current usage: 982.2 MB of 512 MB physical memory used; 1.6 GB of 1.0 GB virtual memory used. "
    "Killing container.\nDump of the process-tree for container_1_0001_01_000003 :\n|- 12605 ... bash\n"
    "[2026-12-02 15:01:54.620]Container killed on request. Exit code is 143\n"
)
NM_VMEM = NM_PMEM.replace("'PHYSICAL'", "'VIRTUAL'")
HADOOP2_PMEM = (
    "Container [pid=1,containerID=c] is running beyond physical memory limits. Current usage: 2.1 GB of 2 GB "
    "physical memory used; 3.3 GB of 4.2 GB virtual memory used. Killing container."
)


@pytest.mark.parametrize(
    ("message", "kill"),
    [
        (SKEIN_PMEM, MemoryKill("physical", round(982.0 * MIB), 512 * MIB)),
        (f"container container_1_0001_01_000003 FAILED: {SKEIN_PMEM}", MemoryKill("physical", 982 * MIB, 512 * MIB)),
        (NM_PMEM, MemoryKill("physical", round(982.2 * MIB), 512 * MIB)),
        (NM_VMEM, MemoryKill("virtual", round(1.6 * 2**30), 2**30)),
        (HADOOP2_PMEM, MemoryKill("physical", round(2.1 * 2**30), 2 * 2**30)),
        ("1.6 GB of 1.0 GB virtual memory used", MemoryKill("virtual", round(1.6 * 2**30), 2**30)),
        (SKEIN_MEMORY_DIAGNOSTICS, MemoryKill("physical", None, None)),
        ("Container killed on request. Exit code is 143", None),
        ("Container preempted by scheduler", None),
        ("Container released on a *lost* node", None),
        ("", None),
        (None, None),
    ],
)
def test_a_memory_kill_is_read_from_yarns_diagnostics(message: str | None, kill: MemoryKill | None) -> None:
    found = memory_kill(message)
    if kill is None or kill.used_bytes is None:
        assert found == kill
        return
    assert found is not None and found.memory == kill.memory
    assert found.used_bytes is not None and abs(found.used_bytes - kill.used_bytes) < MIB
    assert found.limit_bytes == kill.limit_bytes
    assert found.exit_status == (-104 if kill.memory == "physical" else -103)


def test_the_figures_in_mib() -> None:
    kill = memory_kill(SKEIN_PMEM)
    assert kill is not None and (kill.used_mib, kill.limit_mib) == (982, 512)


# --------------------------------------------------------------------------- #
# the tracker: the kind, the figures, no restart
# --------------------------------------------------------------------------- #
ROLES: dict[str, Any] = {"worker": {"instances": 2, "memory": "512 MiB"}}


def test_a_memory_kill_fails_the_job_without_a_restart_naming_task_peak_request_and_field() -> None:
    tr = make_tracker(ROLES, max_restarts=2)
    run_gang(tr, T0 + 1)
    tr.memory_killed("worker:1", MemoryKill("physical", 982 * MIB, 512 * MIB), 143, T0 + 10)
    task = tr.tasks["worker:1"]
    assert task.state is TaskState.FAILED and task.kind is FailureKind.OUT_OF_MEMORY and task.exit_code == 143
    verdict = failed(
        tr.check(T0 + 10),
        "worker:1 out of memory",
        "used 982 MiB of physical memory, over its container's limit of 512 MiB",
        "roles.worker.memory asks for 512 MiB",
        "raise roles.worker.memory",
        retryable=False,
    )
    assert tr.restarts == [] and tr.restart_pending is None, "max_restarts 2, yet none spent"
    failure = verdict.failure()
    assert failure is not None
    assert (failure.kind, failure.task_id, failure.retryable) == ("out_of_memory", "worker:1", False)
    assert (failure.peak_mib, failure.requested_mib, failure.fix_field) == (982, 512, "roles.worker.memory")
    assert not final_diagnostics(verdict, "application_1_0001").startswith("[retryable]")


def test_a_peer_whose_collective_failed_first_is_a_consequence_of_the_memory_kill() -> None:
    tr = make_tracker(ROLES, max_restarts=2)
    run_gang(tr, T0 + 1)
    tr.exited("worker:0", 1, ["[[{{node CollectiveReduceV2}}]] [Op:__inference_train_function_1]"], T0 + 10)
    assert tr.check(T0 + 10) is None, "a peer's blame waits for its cause"
    tr.memory_killed("worker:1", MemoryKill("physical", None, None), None, T0 + 11)
    verdict = failed(tr.check(T0 + 11), "worker:1 out of memory", "consequences: worker:0 exited 1", retryable=False)
    assert verdict.task_id == "worker:1" and verdict.consequences == ["worker:0"]
    assert verdict.peak_mib is None and verdict.requested_mib == 512 and tr.restarts == []


def test_out_of_memory_is_not_retryable_but_is_a_root_cause() -> None:
    assert not FailureKind.OUT_OF_MEMORY.retryable and FailureKind.OUT_OF_MEMORY.loss


# --------------------------------------------------------------------------- #
# the AM: YARN's word on the container before the executor's 143
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("message", [SKEIN_PMEM, NM_PMEM, SKEIN_MEMORY_DIAGNOSTICS])
def test_a_143_of_a_container_killed_for_memory_is_out_of_memory_not_a_signal(message: str) -> None:
    am, app = running_am(max_restarts=2)
    exit_record(am, app, "worker:1", 143, T0 + 10)
    assert am.tracker.tasks["worker:1"].state is TaskState.RUNNING, "held until YARN says why"
    app.containers = [container("worker_1", "FAILED", message)]
    am.check_containers(T0 + 11)
    task = am.tracker.tasks["worker:1"]
    assert task.kind is FailureKind.OUT_OF_MEMORY and task.exit_code == 143 and am.held_exits == {}
    failed(am.tracker.check(T0 + 11), "worker:1 out of memory", retryable=False)
    assert am.tracker.restarts == []


def test_a_container_killed_for_memory_without_an_exit_record_is_out_of_memory() -> None:
    am, app = running_am(max_restarts=2)
    app.containers = [container("worker_0", "FAILED", SKEIN_PMEM)]
    am.check_containers(T0 + 10)
    task = am.tracker.tasks["worker:0"]
    assert task.kind is FailureKind.OUT_OF_MEMORY and task.exit_code is None and task.state is TaskState.FAILED


def test_other_container_ends_are_judged_as_before() -> None:
    am, app = running_am(max_restarts=0)
    exit_record(am, app, "worker:1", 143, T0 + 10)
    app.containers = [container("worker_1", "FAILED", "Container killed on request. Exit code is 143")]
    am.check_containers(T0 + 11)
    assert am.tracker.tasks["worker:1"].kind is FailureKind.SIGNAL


# --------------------------------------------------------------------------- #
# memory_retry in the JobSpec
# --------------------------------------------------------------------------- #
def _spec(memory_retry: Any, memory: Any = "512 MiB") -> JobSpec:
    return JobSpec.from_dict(
        {"roles": {"worker": {"command": ["true"], "memory": memory}}, "memory_retry": memory_retry}
    )


def test_memory_retry_grows_by_its_factor_up_to_its_max() -> None:
    retry = _spec({"factor": 1.5, "max": "1 GiB"}).memory_retry
    assert retry.enabled and (retry.factor, retry.max) == (1.5, 1024)
    assert [retry.next_request(m) for m in (512, 768, 1000, 1024)] == [768, 1024, 1024, None]
    assert retry.next_request(333) == 500, "rounded up, never smaller than asked"
    off = _spec({}).memory_retry
    assert not off.enabled and off.next_request(512) is None


@pytest.mark.parametrize(
    ("memory_retry", "field", "text"),
    [
        ({"factor": 1}, "memory_retry.factor", "out of range"),
        ({"factor": 8.5, "max": 4096}, "memory_retry.factor", "at most 8"),
        ({"factor": True, "max": 4096}, "memory_retry.factor", "not a number"),
        ({"factor": "2", "max": 4096}, "memory_retry.factor", "not a number"),
        ({"factor": float("nan"), "max": 4096}, "memory_retry.factor", "not a number"),
        ({"factor": 2}, "memory_retry.max", "is missing"),
        ({"max": 4096}, "memory_retry.max", "without factor"),
        ({"factor": 2, "max": "lots"}, "memory_retry.max", "not a memory size"),
        ({"factor": 2, "max": 256}, "memory_retry.max", "below every role's memory"),
        ({"factor": 2, "ceiling": 256}, "memory_retry.ceiling", "unknown key"),
    ],
)
def test_bad_memory_retry_values_are_refused_naming_the_field(memory_retry: Any, field: str, text: str) -> None:
    with pytest.raises(SpecError) as err:
        _spec(memory_retry)
    assert err.value.field == field and text in str(err.value), str(err.value)


def test_with_memory_changes_one_role_and_keeps_the_rest() -> None:
    spec = _spec({"factor": 2, "max": "1 GiB"})
    grown = spec.with_memory("worker", 1024)
    assert grown.roles["worker"].memory == 1024 and spec.roles["worker"].memory == 512
    assert JobSpec.from_dict(grown.to_dict()) == grown
    with pytest.raises(SpecError, match="not a role"):
        spec.with_memory("chief", 1024)


def test_the_job_page_names_the_kind_the_figures_and_the_field() -> None:
    from airflow_provider_tony.runtime.messages import Failure, JobHistory, StateDocument
    from airflow_provider_tony.runtime.page import render_page

    failure = Failure(
        kind="out_of_memory", task_id="worker:1", peak_mib=982, requested_mib=512, fix_field="roles.worker.memory"
    )
    page = render_page(JobHistory(state=StateDocument(app_state="FAILED", final=True, failure=failure)))
    section = page[page.index('<p id="failure">') :].split("</p>", 1)[0]
    for text in ("out_of_memory", "task worker:1", "peak 982 MiB of 512 MiB requested", "roles.worker.memory"):
        assert text in section, section
    assert "not retryable" in section
    assert 'id="failure"' not in render_page(JobHistory(state=StateDocument(app_state="RUNNING")))
