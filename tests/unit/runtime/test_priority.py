"""runtime.priority: TonY's own threads yield to user code, never the other way round.

Each case runs in a child process: a lowered nice value cannot be undone
without privileges, and pytest's own threads must keep theirs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from airflow_provider_tony.runtime import priority

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux /proc only")

CHILD = textwrap.dedent("""
    import json, os, sys, threading
    from airflow_provider_tony.runtime import priority

    def nices():
        # a set: a joined thread can linger in /proc for a moment
        return sorted({os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")})

    def policies():
        return sorted({os.sched_getscheduler(int(t)) for t in os.listdir("/proc/self/task")})

    go, started = threading.Event(), []
    worker = threading.Thread(target=lambda: (
        started.append([os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0)]), go.wait()))
    os.setpriority(os.PRIO_PROCESS, 0, int(sys.argv[1]))  # this (main) thread's starting nice
    if sys.argv[2] != "default":
        os.sched_setscheduler(0, getattr(os, sys.argv[2]), os.sched_param(0))
    changed = priority.lower()
    worker.start()  # started after lower(): inherits it from the main thread
    while not started:
        pass
    go.set()
    worker.join()
    again = priority.lower()
    print(json.dumps({"changed": changed, "again": again, "after": nices(), "policies": policies(),
                      "inherited": started[0]}))
""")


def run_child(start_nice: int, policy: str = "default") -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(start_nice), policy], capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(out.stdout)


def test_every_thread_goes_to_background_and_new_threads_inherit_it() -> None:
    result = run_child(0)
    assert result["changed"] == 1  # the main thread (the only one before the worker started)
    assert result["after"] == [priority.BACKGROUND_NICE]
    assert result["policies"] == [os.SCHED_BATCH]  # never preempts a running worker on waking
    assert result["inherited"] == [priority.BACKGROUND_NICE, os.SCHED_BATCH]
    assert result["again"] == 0  # idempotent


def test_a_thread_already_lower_keeps_its_nice_and_still_stops_preempting() -> None:
    result = run_child(15)
    assert result["changed"] == 1  # the policy only
    assert result["after"] == [15]
    assert result["policies"] == [os.SCHED_BATCH]


def test_a_thread_already_in_the_background_class_is_left_alone() -> None:
    result = run_child(15, "SCHED_IDLE")
    assert result["changed"] == 0
    assert result["policies"] == [os.SCHED_IDLE]  # not raised to SCHED_BATCH


def test_a_process_that_is_gone_changes_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert priority.lower(proc.pid) == 0


def test_only_skeins_application_master_is_recognised() -> None:
    assert not priority.is_skein_am(os.getpid())
    assert not priority.is_skein_am(2**22 + 1)  # no such process


SESSION_CHILD = textwrap.dedent("""
    import json, sys
    from airflow_provider_tony.runtime import priority
    first = priority.lower_session(max_depth=int(sys.argv[1]))
    again = priority.lower_session(max_depth=int(sys.argv[1]))
    print(json.dumps({"first": first, "again": again, "group": open("/proc/self/autogroup").read().split()}))
""")
AUTOGROUPS = os.path.exists("/proc/self/autogroup")


def run_session_child(*, new_session: bool, max_depth: int, via_parent: bool = False) -> dict[str, object]:
    argv = [sys.executable, "-c", SESSION_CHILD, str(max_depth)]
    if via_parent:  # the session leader is the child's parent, as skein's JVM is for the AM's shell
        argv = [sys.executable, "-c", "import subprocess, sys; subprocess.run(sys.argv[1:], check=True)", *argv]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60, start_new_session=new_session)
    return json.loads(out.stdout)


@pytest.mark.skipif(not AUTOGROUPS, reason="kernel without autogroup scheduling")
def test_a_containers_own_session_goes_to_the_background() -> None:
    result = run_session_child(new_session=True, max_depth=2, via_parent=True)
    assert result["first"] is True
    assert result["group"][1:] == ["nice", str(priority.BACKGROUND_NICE)]
    assert result["again"] is False  # already there


@pytest.mark.skipif(not AUTOGROUPS, reason="kernel without autogroup scheduling")
def test_a_session_led_from_outside_the_container_is_left_alone() -> None:
    # This test's session is led by whatever started pytest: never ours to lower.
    result = run_session_child(new_session=False, max_depth=0)
    assert result["first"] is False
    with open("/proc/self/autogroup") as own:
        assert own.read().split() == result["group"]  # the same group, its nice unchanged
