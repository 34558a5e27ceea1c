"""Every point a script reports reaches the metric history, within bounds.

The flow is the real one with the store faked: ``progress.report`` writes the
file, the executor's beat reads it (``progress.read_all``) into a
``Heartbeat``, the AM reads the store (``read_store``) and keeps the points in
its ``MetricHistory``. Beats are rarer than reports, as in a fast job: before
the window a beat carries, only the point current at a beat survived (a
200-step job's page showed one point per chart).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import executor, progress
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.history import MetricHistory, bytes_per_task
from airflow_provider_tony.runtime.messages import (
    MAX_PROGRESS_BYTES,
    ExitRecord,
    Heartbeat,
    JobHistory,
    Progress,
    StateDocument,
    TaskState,
)
from airflow_provider_tony.runtime.page import render_page
from airflow_provider_tony.runtime.spec import JobSpec


class Store(dict):
    """skein's key-value store as the AM reads it."""

    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        return {k: v for k, v in self.items() if k.startswith(prefix)}


@pytest.fixture
def progress_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "progress.json"
    monkeypatch.setenv(C.ENV_PROGRESS_FILE, str(path))
    monkeypatch.setattr(progress, "_recent", type(progress._recent)())  # a fresh script
    return path


def _am() -> ApplicationMaster:
    spec = JobSpec.from_dict({"name": "t", "roles": {"worker": {"instances": 1, "command": ["true"]}}})
    am = ApplicationMaster(SimpleNamespace(kv=Store()), spec, "application_1_0001")
    for task in am.tracker.tasks.values():
        task.state = TaskState.RUNNING
    return am


def test_every_report_between_two_beats_reaches_the_history_and_the_page(progress_file: Path) -> None:
    am = _am()
    beats = executor.HeartbeatSender(am.app, "worker:0", 1.0, progress_file)  # the executor's, writing the AM's store
    clock = 1000.0
    carried = []
    for step in range(1, 201):
        progress.report(step=step, epoch=(step - 1) // 25, total_steps=200, loss=2.0 / step)
        if step % 7 == 0:  # a beat: what the executor reads and sends, what the AM reads
            beats.beat()
            carried.append(len(Heartbeat.from_json(am.app.kv[C.kv_heartbeat("worker:0")]).points))
            clock += 1
            am.read_store(clock)
            am.read_store(clock + 0.5)  # the same beat read twice adds nothing
    latest, recent = progress.read_all(progress_file)
    am.app.kv[C.kv_exit("worker:0")] = ExitRecord(exit_code=0, progress=latest, points=recent).to_json()
    am.read_store(clock + 1)
    steps = [p.step for p in am.job_history().metrics["worker:0"]]
    assert steps == list(range(1, 201))
    # Each report rides on BEATS_PER_POINT beats, not the whole 64-report window on every beat.
    per = executor.BEATS_PER_POINT
    assert carried[: per + 2] == [7 * n for n in range(1, per + 1)] + [7 * per] * 2, carried
    assert max(carried) == 7 * per, carried
    page = render_page(am.job_history())
    polyline = page.split('data-metric="loss"')[1].split('points="')[1].split('"')[0]
    assert len(polyline.split()) == 200, "every point is drawn"


def test_a_beat_of_a_job_that_reports_rarely_carries_nothing_new(progress_file: Path) -> None:
    beats = executor.HeartbeatSender(SimpleNamespace(kv={}), "worker:0", 1.0, progress_file)
    progress.report(step=1, loss=1.0)
    sent = []
    for _ in range(executor.BEATS_PER_POINT + 2):
        beats.beat()
        sent.append([p.step for p in Heartbeat.from_json(beats.app.kv[beats.key]).points])
    assert sent == [[1]] * executor.BEATS_PER_POINT + [[], []]


def test_the_window_in_the_progress_file_is_bounded(progress_file: Path) -> None:
    for step in range(1, 300):
        progress.report(step=step, loss=1.0 / step)
    data = json.loads(progress_file.read_text())
    assert [p["step"] for p in data["recent"]] == list(range(300 - progress.RECENT_POINTS, 300))
    wide = {f"m{i:02d}": "x" * 900 for i in range(60)}  # reports as large as a report may be
    for step in range(300, 320):
        progress.report(step=step, **wide)
        raw = progress_file.read_bytes()
        assert len(raw) <= MAX_PROGRESS_BYTES
        recent = json.loads(raw)["recent"]
        assert len(json.dumps(recent)) <= progress.RECENT_BYTES + len(recent) * 2
    latest, recent = progress.read_all(progress_file)
    assert latest is not None and latest.step == 319 and (not recent or recent[-1].step == 319)


def test_a_malformed_window_drops_the_window_not_the_latest_report(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    for window in ('"nonsense"', "[1, 2]", '[{"step": "x"}]'):
        path.write_text('{"step": 5, "metrics": {"loss": 1.0}, "recent": ' + window + "}")
        latest, recent = progress.read_all(path)
        assert latest is not None and latest.step == 5
        assert all(isinstance(p, Progress) for p in recent)
    assert progress.read_all(tmp_path / "absent.json") == (None, [])


def _point(step: int, **metrics: Any) -> Progress:
    return Progress(step=step, time=float(step), metrics=metrics or {"loss": 1.0 / step})


def test_overlapping_windows_keep_each_point_once_in_order() -> None:
    h = MetricHistory(max_points=100)
    for window in (range(1, 11), range(5, 16), range(12, 16), range(3, 9)):
        for step in window:
            h.add("worker:0", _point(step))
    assert [p.step for p in h.points["worker:0"]] == list(range(1, 16))


def test_the_history_stays_within_its_bytes_keeping_first_and_newest() -> None:
    h = MetricHistory(max_points=10_000, max_bytes=20_000)
    for step in range(1, 500):
        h.add("worker:0", _point(step, text="y" * 300))
        assert sum(h.sizes["worker:0"]) <= 20_000
        assert h.points["worker:0"][0].step == 1 and h.points["worker:0"][-1].step == step
    doc = JobHistory(state=StateDocument(), metrics=h.points)
    assert len(h.points["worker:0"]) > 10 and len(doc.to_json()) < 30_000


def test_the_bytes_per_task_shrink_with_the_number_of_tasks() -> None:
    assert bytes_per_task(1) == 1 << 20 and bytes_per_task(60) == (6 << 20) // 60
