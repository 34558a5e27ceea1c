"""The executor's heartbeat: periodic, but a start-up is sent at once (a long interval slows no start)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

from airflow_provider_tony.runtime.executor import Heartbeat


def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.01)
    raise AssertionError("condition not met in time")


def test_a_nudge_beats_now_and_stop_ends_the_thread_without_waiting_an_interval(tmp_path: Path) -> None:
    app = SimpleNamespace(kv={})
    beat = Heartbeat(app, "worker:0", interval=3600.0, progress_file=tmp_path / "progress.json")
    beat.start()
    key = next(iter(until(lambda: app.kv)))
    first = json.loads(app.kv[key])
    assert first["seq"] == 1 and first["user_started"] is False

    beat.user_started = True
    beat.nudge()
    second = until(lambda: (doc := json.loads(app.kv[key]))["seq"] == 2 and doc)
    assert second["user_started"] is True

    beat.stop()
    beat.join(timeout=10)
    assert not beat.is_alive()
    assert json.loads(app.kv[key])["seq"] == 2  # stopping sends no further beat
