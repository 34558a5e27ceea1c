"""The executor's talk with the AM: heartbeats (periodic, but a start-up is sent at once) and the
wait for the cluster spec."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.executor import HeartbeatSender, wait_for_cluster
from airflow_provider_tony.runtime.messages import ClusterDocument
from airflow_provider_tony.runtime.messages import Heartbeat as Beat
from tests._util import wait_until


def test_a_nudge_beats_now_and_stop_ends_the_thread_without_waiting_an_interval(tmp_path: Path) -> None:
    app = SimpleNamespace(kv={})
    beat = HeartbeatSender(app, "worker:0", interval=3600.0, progress_file=tmp_path / "progress.json")
    beat.start()
    key = next(iter(wait_until(lambda: app.kv, 10, "the first beat", interval=0.01)))
    first = Beat.from_json(app.kv[key])
    assert first.seq == 1 and first.user_started is False

    beat.user_started = True
    beat.nudge()
    second = wait_until(
        lambda: (doc := Beat.from_json(app.kv[key])).seq == 2 and doc, 10, "the nudged beat", interval=0.01
    )
    assert second.user_started is True

    beat.stop()
    beat.join(timeout=10)
    assert not beat.is_alive()
    assert Beat.from_json(app.kv[key]).seq == 2  # stopping sends no further beat


def test_the_cluster_spec_is_polled_for_with_gets_not_a_watch() -> None:
    """skein 0.8.2's watches race with puts in its AM: the executor only gets."""
    doc = ClusterDocument(addresses={"worker:0": "h:1"}, num_tasks={"worker": 1})
    answers = iter([None, None, doc.to_json()])
    gets: list[str] = []

    def get(key: str) -> bytes | None:
        gets.append(key)
        return next(answers)

    def no_watch(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a watch was opened")

    app = SimpleNamespace(kv=SimpleNamespace(get=get, wait=no_watch, events=no_watch))
    assert wait_for_cluster(app, "worker:0") == doc
    assert gets == [C.KV_CLUSTER] * 3


def test_an_executor_waits_for_the_cluster_spec_that_lists_it() -> None:
    """A task registering after the first publish (an untracked tensorboard) waits for the republish."""
    first = ClusterDocument(addresses={"worker:0": "h:1"}, num_tasks={"worker": 1, "tensorboard": 1})
    second = ClusterDocument(addresses={"worker:0": "h:1", "tensorboard:0": "h:2"}, num_tasks=first.num_tasks)
    answers = iter([first.to_json(), first.to_json(), second.to_json()])
    app = SimpleNamespace(kv=SimpleNamespace(get=lambda _key: next(answers)))
    assert wait_for_cluster(app, "tensorboard:0") == second
