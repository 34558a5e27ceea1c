"""The AM's pacing: it reads the store when an executor writes, not on a fixed beat.

Pure logic with a stand-in for skein's event queue (a ``queue.Queue``, which
is what skein's ``EventQueue`` wraps); the real watch is exercised by every
integration test, whose AMs run with it.
"""
from __future__ import annotations

import queue
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.runtime import am as am_module
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.am import ApplicationMaster, watch_executors
from airflow_provider_tony.runtime.spec import JobSpec


def _am(news: Any, heartbeat_interval: float = 5.0, running: bool = True) -> ApplicationMaster:
    spec = JobSpec.from_dict({"name": "t", "roles": {"worker": {"instances": 1, "command": ["true"]}},
                              "heartbeat_interval": heartbeat_interval,
                              "heartbeat_timeout": 3 * heartbeat_interval})
    am = ApplicationMaster(SimpleNamespace(kv={}), spec, "application_1_0001", news=news)
    if running:
        am.tracker.timeline["all_user_started"] = 0.0
    return am


def test_a_write_wakes_the_am_at_once_and_one_read_covers_every_queued_write() -> None:
    news: queue.Queue[str] = queue.Queue()
    am = _am(news)
    am.last_read = time.monotonic() - 10  # the last read is long past: no gap to keep
    threading.Timer(0.05, lambda: [news.put(f"put {i}") for i in range(3)]).start()
    started = time.monotonic()
    am.wait(timeout=3600)
    assert time.monotonic() - started < 30  # woken by the writes, not by the timeout
    assert news.empty()  # all three taken in one wake-up


def test_without_writes_the_wait_ends_at_the_timeout() -> None:
    am = _am(queue.Queue())
    started = time.monotonic()
    am.wait(timeout=0.2)
    assert time.monotonic() - started >= 0.2


def test_once_training_runs_reads_keep_a_gap_so_many_beating_tasks_cost_no_more_reads() -> None:
    news: queue.Queue[str] = queue.Queue()
    am = _am(news, heartbeat_interval=0.5)
    am.last_read = time.monotonic()
    news.put("a beat right after the last read")
    am.wait(timeout=3600)
    assert time.monotonic() - am.last_read >= am.read_gap() == 0.5


def test_while_tasks_start_a_write_is_read_without_a_gap() -> None:
    am = _am(queue.Queue(), running=False)
    assert am.read_gap() == 0.0
    assert am.tick() == am_module.STARTUP_TICK_S


def test_ticks_watching_and_on_a_timer() -> None:
    assert _am(queue.Queue(), heartbeat_interval=5).tick() == 5.0
    assert _am(queue.Queue(), heartbeat_interval=30).tick() == am_module.WATCHING_TICK_MAX_S
    assert _am(None, heartbeat_interval=5).tick() == am_module.RUNNING_TICK_S
    assert _am(None, heartbeat_interval=0.5).tick() == 0.5


class _BrokenWatch:
    def get(self, block: bool = True, timeout: float | None = None) -> None:
        raise ConnectionError("Unable to connect to application")


def test_a_broken_watch_falls_back_to_reading_on_a_timer() -> None:
    am = _am(_BrokenWatch())
    am.wait(timeout=3600)  # returns at once: the error, not the timeout
    assert am.news is None
    assert am.tick() == am_module.RUNNING_TICK_S


class _EventQueue:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.filters: list[tuple[str, str]] = []

    def subscribe(self, prefix: str, event_type: str) -> None:
        if self.fail:
            raise RuntimeError("watch refused")
        self.filters.append((prefix, event_type))


@pytest.mark.parametrize("fail", [False, True])
def test_the_watch_covers_only_the_executors_keys(fail: bool) -> None:
    events = _EventQueue(fail)
    app = SimpleNamespace(kv=SimpleNamespace(event_queue=lambda: events))
    news = watch_executors(app)
    if fail:
        assert news is None
        return
    assert news is events
    watched = [prefix for prefix, kind in events.filters if kind == "PUT"]
    assert sorted(watched) == sorted([C.KV_REGISTER_PREFIX, C.KV_HEARTBEAT_PREFIX, C.KV_EXIT_PREFIX,
                                      C.KV_EVENT_PREFIX])
    assert not any(C.KV_STATE.startswith(prefix) or C.KV_CLUSTER.startswith(prefix) for prefix in watched)


def test_containers_are_checked_every_heartbeat_interval_between_one_and_five_seconds() -> None:
    calls: list[float] = []
    for interval, expected in ((0.5, 1.0), (2.0, 2.0), (30.0, 5.0)):
        am = _am(queue.Queue(), heartbeat_interval=interval)
        am.app = SimpleNamespace(get_containers=lambda states: calls.append(1) or [], kv={})
        am.check_containers(1000.0)
        am.check_containers(1000.0 + expected - 0.01)
        assert len(calls) == 1
        am.check_containers(1000.0 + expected)
        assert len(calls) == 2
        calls.clear()
