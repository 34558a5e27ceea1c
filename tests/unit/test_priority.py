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

    go, started = threading.Event(), []
    worker = threading.Thread(target=lambda: (started.append(os.getpriority(os.PRIO_PROCESS, 0)), go.wait()))
    os.setpriority(os.PRIO_PROCESS, 0, int(sys.argv[1]))  # this (main) thread's starting nice
    changed = priority.lower()
    worker.start()  # started after lower(): inherits it from the main thread
    while not started:
        pass
    go.set()
    worker.join()
    again = priority.lower()
    print(json.dumps({"changed": changed, "again": again, "after": nices(), "inherited": started[0]}))
""")


def run_child(start_nice: int) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(start_nice)], capture_output=True, text=True,
                         check=True, timeout=60)
    return json.loads(out.stdout)


def test_every_thread_goes_to_background_and_new_threads_inherit_it() -> None:
    result = run_child(0)
    assert result["changed"] == 1  # the main thread (the only one before the worker started)
    assert result["after"] == [priority.BACKGROUND_NICE]
    assert result["inherited"] == priority.BACKGROUND_NICE
    assert result["again"] == 0  # idempotent


def test_a_thread_already_lower_is_left_alone() -> None:
    result = run_child(15)
    assert result["changed"] == 0
    assert result["after"] == [15]


def test_a_process_that_is_gone_changes_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert priority.lower(proc.pid) == 0


def test_only_skeins_application_master_is_recognised() -> None:
    assert not priority.is_skein_am(os.getpid())
    assert not priority.is_skein_am(2**22 + 1)  # no such process
