"""PyTorch checkpoints through the same uploader and restore as TensorFlow's: real ``torch.save`` files.

The rule (``runtime/checkpoint_torch.py``): ``<name>-<step>.pt`` that ``torch.save`` wrote to the
end (a whole zip archive); uploaded alone with the manifest, restored under its own name, so the
script's own "load the newest" finds it. The fakes are ``support/hdfs.py``'s, the fixtures ``conftest.py``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from airflow_provider_tony.runtime import checkpoint_torch
from airflow_provider_tony.runtime.checkpoint import (
    MANIFEST,
    find_local,
    remote_checkpoints,
    restore_latest,
    upload,
    why_not_whole,
)
from tests.unit.support.hdfs import REMOTE, FakeHdfs, make_sync, tree, write_ckpt


def save(folder: Path, step: int, name: str = "ckpt-{step}.pt") -> Path:
    """A real checkpoint as torch_ddp.py writes one: a state dict and the step, by ``torch.save``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name.format(step=step)
    torch.save({"step": step, "model": torch.nn.Linear(4, 2).state_dict()}, path)
    return path


def cut(path: Path, keep: float = 0.5) -> None:
    """``path`` as a writer killed mid-file leaves it: its first part, no central directory."""
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.mark.parametrize(
    ("name", "step"),
    [
        ("ckpt-20.pt", 20),
        ("ckpt_7.pth", 7),
        ("model-epoch-3.pt", 3),
        ("ckpt-20.pt.tmp", None),
        (".ckpt-20.pt", None),  # a hidden temporary before its rename
        ("model.pt", None),
        ("ckpt-20.index", None),
        ("ckpt-x.pt", None),
    ],
)
def test_step_of_a_checkpoint_files_name(name: str, step: int | None) -> None:
    assert checkpoint_torch.step_of(name) == step


def test_a_whole_torch_save_file_is_written_to_the_end_and_a_cut_one_is_not(tmp_path: Path) -> None:
    path = save(tmp_path, 5)
    assert checkpoint_torch.written_to_the_end(path)
    for keep in (0.0, 0.5, 0.99):
        cut_copy = tmp_path / f"cut-{keep}.pt"
        cut_copy.write_bytes(path.read_bytes()[: int(path.stat().st_size * keep)])
        assert not checkpoint_torch.written_to_the_end(cut_copy), keep
    legacy = tmp_path / "legacy-1.pt"  # the pickle format has no end record: never taken as whole
    torch.save({"step": 1}, legacy, _use_new_zipfile_serialization=False)
    assert not checkpoint_torch.written_to_the_end(legacy)
    assert not checkpoint_torch.written_to_the_end(tmp_path / "gone-1.pt")


def test_find_local_takes_the_newest_whole_torch_file(local: Path) -> None:
    save(local, 5)
    save(local, 10)
    found = find_local(local)
    assert found is not None
    assert (found.step, found.framework, found.prefix, found.files) == (
        10,
        "pytorch",
        "ckpt-10.pt",
        (Path("ckpt-10.pt"),),
    )
    assert found.state_dir == local


def test_find_local_skips_a_torch_file_still_being_written(local: Path) -> None:
    save(local, 5)
    cut(save(local, 10))
    found = find_local(local)
    assert found is not None and found.step == 5


def test_find_local_with_only_a_cut_torch_file_finds_nothing(local: Path) -> None:
    cut(save(local, 10))
    assert find_local(local) is None


def test_a_tensorflow_checkpoint_wins_a_tie_and_the_newer_step_wins_otherwise(local: Path) -> None:
    write_ckpt(local, 10)
    save(local, 10)
    found = find_local(local)
    assert found is not None and (found.step, found.framework) == (10, "tensorflow")
    save(local, 15)
    found = find_local(local)
    assert found is not None and (found.step, found.framework) == (15, "pytorch")


def test_upload_publishes_the_file_alone_with_the_manifest(fake: FakeHdfs, local: Path) -> None:
    original = save(local, 10).read_bytes()
    save(local, 5)
    found = find_local(local)
    assert found is not None
    final = upload(fake, found, local, REMOTE, keep=3, tag="1-1")
    assert final == f"{REMOTE}/ckpt-000000000010"
    published = fake.tree(final)
    assert set(published) == {"ckpt-10.pt", MANIFEST}  # no TensorFlow state file, no older file
    assert published["ckpt-10.pt"] == original
    assert why_not_whole({k: len(v) for k, v in published.items()}, lambda rel: published[rel]) is None


def test_restore_puts_the_file_back_under_its_own_name(fake: FakeHdfs, local: Path, tmp_path: Path) -> None:
    source = tmp_path / "first-try"
    save(source, 10)
    found = find_local(source)
    assert found is not None
    upload(fake, found, source, REMOTE, keep=3, tag="1-1")
    assert restore_latest(fake, [REMOTE], local) == (10, f"{REMOTE}/ckpt-000000000010")
    assert set(tree(local)) == {"ckpt-10.pt"}
    state = torch.load(local / "ckpt-10.pt", map_location="cpu")
    assert state["step"] == 10 and set(state["model"]) == {"weight", "bias"}
    again = find_local(local)
    assert again is not None and (again.step, again.framework) == (10, "pytorch")


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"ckpt-10.pt": 1234}, None),
        ({"sub/ckpt_10.pth": 9}, None),
        ({"ckpt-10.pt": 0}, "ckpt-10.pt is empty"),
        ({"ckpt-10.pt": 5, "ckpt-11.pt": 0}, "ckpt-11.pt is empty"),
        ({"model.pt": 10}, "neither a tony-manifest.json nor a 'checkpoint' state file"),
    ],
    ids=["whole", "pth-in-a-subfolder", "empty", "one-of-two-empty", "no-step-in-the-name"],
)
def test_why_not_whole_for_a_torch_checkpoint_copied_by_hand(files: dict[str, int], reason: str | None) -> None:
    got = why_not_whole(files, lambda rel: b"")
    assert got == reason if reason is None else reason in (got or ""), got


def test_restore_skips_a_hand_copied_empty_torch_file_for_the_older_one(
    fake: FakeHdfs, local: Path, tmp_path: Path
) -> None:
    fake.put(f"{REMOTE}/ckpt-000000000010/ckpt-10.pt", save(tmp_path, 10).read_bytes())
    fake.put(f"{REMOTE}/ckpt-000000000020/ckpt-20.pt", b"")
    events: list[str] = []
    assert restore_latest(fake, [REMOTE], local, on_event=events.append) == (10, f"{REMOTE}/ckpt-000000000010")
    assert len(events) == 1 and "ckpt-000000000020: ckpt-20.pt is empty" in events[0], events


def test_the_uploader_thread_uploads_each_new_torch_checkpoint_once(fake: FakeHdfs, local: Path) -> None:
    events: list[str] = []
    sync = make_sync(fake, local, events)
    save(local, 5)
    assert sync.sync_once() and sync.sync_once()
    cut(save(local, 10))  # still being written: not yet
    assert sync.sync_once() and remote_checkpoints(fake, REMOTE) == [5]
    save(local, 10)  # finished
    assert sync.sync_once()
    assert remote_checkpoints(fake, REMOTE) == [5, 10]
    assert [e.split(" to ")[0] for e in events] == ["uploaded checkpoint step 5", "uploaded checkpoint step 10"]
    assert set(fake.tree(f"{REMOTE}/ckpt-000000000010")) == {"ckpt-10.pt", MANIFEST}
