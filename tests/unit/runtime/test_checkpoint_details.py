"""The uploader's rules for what it cannot read, one rule per test.

A checkpoint folder is written by the training code while the uploader reads
it: a state file may be unreadable, name nothing, or name a folder outside;
each is skipped and the next state file still counts.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.checkpoint import find_local
from tests.unit.support.hdfs import write_ckpt


@pytest.mark.parametrize(
    "bad",
    [
        "unreadable",  # a dangling link named ``checkpoint``: reading it fails
        "names nothing",  # no model_checkpoint_path line
        "outside",  # names a prefix outside the checkpoint folder
        "no step",  # names a prefix without a step number
        "incomplete",  # names a checkpoint whose index is missing
    ],
)
def test_a_bad_state_file_is_skipped_and_the_next_one_still_counts(tmp_path: Path, bad: str) -> None:
    """Each ``continue`` of find_local: a ``break`` there would hide the good checkpoint after it."""
    root = tmp_path / "ckpt"
    first, second = root / "a", root / "b"  # walked in path order: the bad one first
    first.mkdir(parents=True)
    state = first / "checkpoint"
    if bad == "unreadable":
        state.symlink_to(tmp_path / "gone")
    elif bad == "names nothing":
        state.write_text('all_model_checkpoint_paths: "ckpt-5"\n')
    elif bad == "outside":
        state.write_text('model_checkpoint_path: "../../elsewhere/ckpt-9"\n')
    elif bad == "no step":
        write_ckpt(first, 9)
        state.write_text('model_checkpoint_path: "model"\n')
    else:
        write_ckpt(first, 9, skip=("ckpt-9.index",))
    write_ckpt(second, 3)
    found = find_local(root)
    assert found is not None and found.step == 3 and found.state_dir == second


def _spec(roles: dict[str, int], checkpoint_dir: str | None = None) -> Any:
    from tests.unit.support.tracker import make_spec

    return make_spec(roles, **({"checkpoint": {"dir": checkpoint_dir}} if checkpoint_dir else {}))


@pytest.mark.parametrize(
    ("roles", "ckpt", "events_dir", "app_id", "expected"),
    [
        # beside the checkpoints whenever there are some
        ({"worker": 1}, "hdfs://nn:8020/ckpt/run", "/events", "app_1", "/ckpt/run/tensorboard"),
        # no checkpoint folder: the submitter's events folder, one per application, for a tensorboard role
        (
            {"worker": 1, "tensorboard": 1},
            None,
            "hdfs://nn:8020/user/a/tony/tensorboard/",
            "app_1",
            "/user/a/tony/tensorboard/app_1",
        ),
        ({"worker": 1, "tensorboard": 1}, None, "/user/a/tony/tensorboard", "app_1", "/user/a/tony/tensorboard/app_1"),
        # nothing would read them: kept in the container
        ({"worker": 1}, None, "/user/a/tony/tensorboard", "app_1", None),
        ({"worker": 1, "tensorboard": 1}, None, None, "app_1", None),
        ({"worker": 1, "tensorboard": 1}, None, "/user/a/tony/tensorboard", "", None),
    ],
)
def test_tensorboard_events_go_where_the_role_reads_them(
    roles: dict[str, int], ckpt: str | None, events_dir: str | None, app_id: str, expected: str | None
) -> None:
    from airflow_provider_tony.runtime.checkpoint import events_remote

    assert events_remote(_spec(roles, ckpt), events_dir, app_id) == expected


def _dirsync(tmp_path: Path, sync_once: Any) -> Any:
    from airflow_provider_tony.runtime.checkpoint import DirSync

    class Probe(DirSync):
        def sync_once(self) -> Any:
            return sync_once()

    return Probe(None, tmp_path, "/tb", interval=3600, push=True)


def test_the_last_events_round_says_why_it_failed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def down() -> None:
        raise OSError("NameNode down")

    sync = _dirsync(tmp_path, down)
    with caplog.at_level(logging.WARNING, logger="airflow_provider_tony.runtime.checkpoint"):
        sync.final()
    assert "syncing /tb at the end: NameNode down" in caplog.messages


def test_a_round_stuck_on_hdfs_is_not_waited_for_past_the_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    started, stuck, rounds = threading.Event(), threading.Event(), []

    def slow() -> None:
        rounds.append(1)
        started.set()
        stuck.wait(10)

    sync = _dirsync(tmp_path, slow)
    sync.start()
    assert started.wait(10), "the thread's first round began"
    release = threading.Timer(2.0, stuck.set)  # frees the thread even if final() waited for it
    release.start()
    try:
        with caplog.at_level(logging.WARNING, logger="airflow_provider_tony.runtime.checkpoint"):
            sync.final(timeout=0.05)
        assert "syncing /tb: still busy after 0s, no final round" in caplog.messages
        assert len(rounds) == 1, "no second round while the first is stuck"
    finally:
        stuck.set()
        release.cancel()
        sync.join(timeout=10)
