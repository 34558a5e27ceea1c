"""The uploader's rules for what it cannot read, one rule per test.

A checkpoint folder is written by the training code while the uploader reads
it: a state file may be unreadable, name nothing, or name a folder outside;
each is skipped and the next state file still counts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_tony.runtime.checkpoint import find_local

from .test_checkpoint import write_ckpt


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
