"""The executor's heartbeat: periodic, but a start-up is sent at once (a long interval slows no start)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from airflow_provider_tony.runtime.executor import Heartbeat
from tests._util import wait_until


def test_a_nudge_beats_now_and_stop_ends_the_thread_without_waiting_an_interval(tmp_path: Path) -> None:
    app = SimpleNamespace(kv={})
    beat = Heartbeat(app, "worker:0", interval=3600.0, progress_file=tmp_path / "progress.json")
    beat.start()
    key = next(iter(wait_until(lambda: app.kv, 10, "the first beat", interval=0.01)))
    first = json.loads(app.kv[key])
    assert first["seq"] == 1 and first["user_started"] is False

    beat.user_started = True
    beat.nudge()
    second = wait_until(lambda: (doc := json.loads(app.kv[key]))["seq"] == 2 and doc, 10, "the nudged beat",
                        interval=0.01)
    assert second["user_started"] is True

    beat.stop()
    beat.join(timeout=10)
    assert not beat.is_alive()
    assert json.loads(app.kv[key])["seq"] == 2  # stopping sends no further beat
