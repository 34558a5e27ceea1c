"""Checkpoint sync between local disk and HDFS (``runtime/checkpoint.py``), without a cluster.

HDFS is an in-memory-ish fake backed by a temporary directory; it follows the
semantics of ``hdfs.Client`` (2.7) that matter here: ``upload``/``download``
into an existing directory put the source *inside* it, ``rename`` onto an
existing directory moves into it, ``status(strict=False)`` gives None when
missing. Time is a fake clock patched into the modules, so nothing sleeps.
Checkpoints are TensorFlow's on-disk format written by hand (no TensorFlow).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from airflow_provider_tony.runtime import checkpoint, hdfs_io
from airflow_provider_tony.runtime.checkpoint import (
    MANIFEST,
    CheckpointSync,
    DirSync,
    find_local,
    manifest_of,
    remote_checkpoints,
    remote_name,
    restore_latest,
    upload,
    why_not_whole,
)
from airflow_provider_tony.runtime.errors import RenameFailed
from tests.unit.support.hdfs import REMOTE, FakeHdfs, FakeHdfsError, make_sync, tree, write_ckpt, write_state

WARM = "/user/alice/other/ckpts"

# --------------------------------------------------------------------------- #
# fakes
# --------------------------------------------------------------------------- #


class Clock:
    """``time`` for the modules under test: monotonic by hand, sleep only records."""

    def __init__(self, t: float = 1000.0, tick: float = 0.0) -> None:
        self.t, self.tick = t, tick
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        now = self.t
        self.t += self.tick
        return now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


# --------------------------------------------------------------------------- #
# helpers and fixtures
# --------------------------------------------------------------------------- #


def ckpt_names(step: int, shards: int = 1) -> set[str]:
    prefix = f"ckpt-{step}"
    return {f"{prefix}.index"} | {f"{prefix}.data-{i:05d}-of-{shards:05d}" for i in range(shards)}


def state_text(step: int) -> bytes:
    return f'model_checkpoint_path: "ckpt-{step}"\nall_model_checkpoint_paths: "ckpt-{step}"\n'.encode()


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Clock:
    fake_time = Clock()
    monkeypatch.setattr(checkpoint, "time", fake_time)
    monkeypatch.setattr(hdfs_io, "time", fake_time)
    # staging folders land under tmp_path, so a test can see nothing leaks outside it
    (tmp_path / "systmp").mkdir()
    monkeypatch.setattr(checkpoint.tempfile, "tempdir", str(tmp_path / "systmp"))
    return fake_time


def publish(
    fake: FakeHdfs, local: Path, step: int, remote: str = REMOTE, keep: int = 10, tag: str = "1-1", **kwargs: Any
) -> str:
    """Write checkpoint ``step`` locally and upload it (the usual way a remote checkpoint appears)."""
    write_ckpt(local, step, **kwargs)
    found = find_local(local)
    assert found is not None and found.step == step
    return upload(fake, found, local, remote, keep=keep, tag=tag)


# --------------------------------------------------------------------------- #
# find_local
# --------------------------------------------------------------------------- #


def test_find_local_missing_or_empty_dir_is_none(local: Path) -> None:
    assert find_local(local) is None
    local.mkdir(parents=True)
    assert find_local(local) is None


def test_find_local_single_complete_checkpoint(local: Path) -> None:
    write_ckpt(local, 20)
    found = find_local(local)
    assert found is not None
    assert (found.step, found.state_dir, found.prefix) == (20, local, "ckpt-20")
    assert found.files == (Path("ckpt-20.data-00000-of-00001"), Path("ckpt-20.index"))


def test_find_local_multi_shard_complete(local: Path) -> None:
    write_ckpt(local, 7, shards=3)
    found = find_local(local)
    assert found is not None and found.step == 7
    assert {f.name for f in found.files} == ckpt_names(7, shards=3)


@pytest.mark.parametrize(("top", "chief", "want_dir"), [(10, 20, "chief"), (30, 20, ".")])
def test_find_local_newest_of_several_state_files(local: Path, top: int, chief: int, want_dir: str) -> None:
    # tf-keras BackupAndRestore keeps its state file in <backup_dir>/chief/
    write_ckpt(local, top)
    write_ckpt(local / "chief", chief)
    found = find_local(local)
    assert found is not None
    assert found.step == max(top, chief)
    assert found.state_dir == local / want_dir
    assert found.prefix == f"ckpt-{max(top, chief)}"


@pytest.mark.parametrize(
    "skip",
    [
        pytest.param(("ckpt-30.index",), id="missing-index"),
        pytest.param(("ckpt-30.data-00001-of-00002",), id="missing-second-shard"),
        pytest.param(("ckpt-30.data-00000-of-00002", "ckpt-30.data-00001-of-00002"), id="no-shards"),
    ],
)
def test_find_local_incomplete_latest_is_skipped_and_not_replaced_by_older(local: Path, skip: tuple[str, ...]) -> None:
    # What the code does: only the prefix the state file names counts. ckpt-20
    # is complete on disk, but the state file names ckpt-30, so nothing is found.
    write_ckpt(local, 20)
    write_ckpt(local, 30, shards=2, skip=skip)
    assert find_local(local) is None


def test_find_local_older_complete_chosen_when_its_state_file_names_it(local: Path) -> None:
    write_ckpt(local, 20)
    write_ckpt(local, 30, shards=2, skip=("ckpt-30.data-00001-of-00002",), state=False)  # still being written
    write_state(local, "ckpt-20")
    found = find_local(local)
    assert found is not None and found.step == 20


def test_find_local_incomplete_in_one_state_dir_complete_in_another(local: Path) -> None:
    write_ckpt(local, 20)
    write_ckpt(local / "chief", 30, skip=("ckpt-30.index",))
    found = find_local(local)
    assert found is not None and (found.step, found.state_dir) == (20, local)


def test_find_local_absolute_prefix_inside_dir(local: Path) -> None:
    write_ckpt(local, 20, state=False)
    write_state(local, str(local / "ckpt-20"))
    found = find_local(local)
    assert found is not None
    assert (found.step, found.prefix) == (20, "ckpt-20")
    assert {f.as_posix() for f in found.files} == ckpt_names(20)


def test_find_local_absolute_prefix_in_subdir(local: Path) -> None:
    write_ckpt(local / "sub", 20, state=False)
    write_state(local, str(local / "sub" / "ckpt-20"))
    found = find_local(local)
    assert found is not None
    assert (found.step, found.state_dir, found.prefix) == (20, local, "sub/ckpt-20")
    assert {f.as_posix() for f in found.files} == {f"sub/{n}" for n in ckpt_names(20)}


@pytest.mark.parametrize(
    "content",
    [
        "",
        "garbage\n",
        'all_model_checkpoint_paths: "ckpt-20"\n',  # no model_checkpoint_path line
        'model_checkpoint_path: "model"\n',  # no step number in the prefix
    ],
)
def test_find_local_unusable_state_file(local: Path, content: str) -> None:
    write_ckpt(local, 20, state=False)
    (local / "model.index").write_bytes(b"i")
    (local / "model.data-00000-of-00001").write_bytes(b"d")
    (local / "checkpoint").write_text(content)
    assert find_local(local) is None


def test_find_local_ignores_directory_named_checkpoint(local: Path) -> None:
    (local / "checkpoint").mkdir(parents=True)
    write_ckpt(local / "chief", 5)
    found = find_local(local)
    assert found is not None and found.step == 5


def test_find_local_ignores_checkpoint_outside_local_dir(local: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    write_ckpt(elsewhere, 20, state=False)
    write_state(local, str(elsewhere / "ckpt-20"))
    assert find_local(local) is None


# --------------------------------------------------------------------------- #
# remote_checkpoints
# --------------------------------------------------------------------------- #


def test_remote_checkpoints_missing_dir(fake: FakeHdfs) -> None:
    assert remote_checkpoints(fake, REMOTE) == []
    assert fake.count("list") == 0


def test_remote_checkpoints_sorted_and_filtered(fake: FakeHdfs) -> None:
    for name in [
        "ckpt-000000000020",
        "ckpt-000000000003",
        "ckpt-000000000100",
        ".tmp-ckpt-000000000500-1-99",
        "ckpt-20",
        "ckpt-0000000000200",
        "ckpt-000000000020.previous",
        "tensorboard",
        "checkpoint",
    ]:
        fake.put(f"{REMOTE}/{name}/x", b"x")
    assert remote_checkpoints(fake, REMOTE) == [3, 20, 100]
    assert remote_checkpoints(fake, f"hdfs://nn:8020{REMOTE}") == [3, 20, 100]


def test_remote_name_is_twelve_digits() -> None:
    assert remote_name(20) == "ckpt-000000000020"
    assert checkpoint.REMOTE_RE.match(remote_name(123456789012))


# --------------------------------------------------------------------------- #
# upload
# --------------------------------------------------------------------------- #


def test_upload_publishes_only_the_latest_prefix(fake: FakeHdfs, local: Path) -> None:
    write_ckpt(local, 10)
    write_ckpt(local, 20, state=False)
    write_state(local, "ckpt-20", "ckpt-10")
    found = find_local(local)
    assert found is not None
    final = upload(fake, found, local, f"hdfs://nn:8020{REMOTE}/", keep=3, tag="1-7")
    assert final == f"{REMOTE}/ckpt-000000000020"
    content = fake.tree(final)
    assert set(content) == {"checkpoint", MANIFEST} | ckpt_names(20)
    assert content["checkpoint"] == state_text(20)
    assert json.loads(content[MANIFEST]) == {
        "format": 1,
        "step": 20,
        "files": {name: len(data) for name, data in content.items() if name != MANIFEST},
    }
    for name in ckpt_names(20):
        assert content[name] == (local / name).read_bytes()
    assert fake.list(REMOTE) == ["ckpt-000000000020"]


def test_upload_keeps_state_subdir_layout(fake: FakeHdfs, local: Path) -> None:
    write_ckpt(local / "chief", 20)
    found = find_local(local)
    assert found is not None
    final = upload(fake, found, local, REMOTE, keep=3, tag="t")
    assert set(fake.tree(final)) == {f"chief/{n}" for n in {"checkpoint"} | ckpt_names(20)} | {MANIFEST}


def test_upload_same_step_twice_keeps_first(fake: FakeHdfs, local: Path) -> None:
    first = publish(fake, local, 20, data=b"first", tag="1-1")
    second = publish(fake, local, 20, data=b"second", tag="2-2")  # a retry of the same step
    assert first == second == f"{REMOTE}/ckpt-000000000020"
    assert fake.tree(first)["ckpt-20.index"] == b"first"
    assert fake.list(REMOTE) == ["ckpt-000000000020"]  # no .tmp- left behind


def test_upload_prunes_to_newest_keep(fake: FakeHdfs, local: Path) -> None:
    fake.put(f"{REMOTE}/tensorboard/events", b"e")
    for step in (10, 20, 30, 40):
        publish(fake, local, step, keep=2)
    assert remote_checkpoints(fake, REMOTE) == [30, 40]
    assert sorted(fake.list(REMOTE)) == ["ckpt-000000000030", "ckpt-000000000040", "tensorboard"]


def test_upload_makes_no_namenode_call_it_does_not_need(fake: FakeHdfs, local: Path) -> None:
    publish(fake, local, 10)
    fake.calls.clear()
    publish(fake, local, 20)
    # Clear a leftover temporary, write the copy, then its manifest, one listing (step there? what
    # to prune?), publish.
    assert [name for name, _ in fake.calls] == ["delete", "upload", "write", "list", "move"]
    assert fake.calls[2] == ("write", f"{REMOTE}/.tmp-ckpt-000000000020-1-1/{MANIFEST}")


def test_a_step_another_writer_published_meanwhile_is_kept_and_never_nested(fake: FakeHdfs, local: Path) -> None:
    """Between the listing and the rename a retry of the same task may publish the same step: a plain
    WebHDFS rename would move ours inside it; the whole one stays and our copy goes."""
    publish(fake, local, 20)
    final = f"{REMOTE}/{checkpoint.remote_name(20)}"
    tmp = f"{REMOTE}/.tmp-{checkpoint.remote_name(20)}-late"
    shutil.copytree(fake.root / final.lstrip("/"), fake.root / tmp.lstrip("/"))
    before = sorted(p.relative_to(fake.root) for p in (fake.root / final.lstrip("/")).rglob("*"))
    checkpoint._settle(fake, tmp, final)
    assert fake.status(tmp, strict=False) is None
    assert sorted(p.relative_to(fake.root) for p in (fake.root / final.lstrip("/")).rglob("*")) == before
    (fake.root / final.lstrip("/") / MANIFEST).unlink()  # a broken step is not taken for ours
    shutil.copytree(fake.root / f"{REMOTE}/{checkpoint.remote_name(20)}".lstrip("/"), fake.root / tmp.lstrip("/"))
    with pytest.raises(RenameFailed):
        checkpoint._settle(fake, tmp, final)


def test_upload_older_step_never_displaces_newer(fake: FakeHdfs, local: Path) -> None:
    publish(fake, local, 30, keep=1)
    publish(fake, local, 20, keep=1)
    assert remote_checkpoints(fake, REMOTE) == [30]


def test_upload_failure_leaves_nothing_published(fake: FakeHdfs, local: Path) -> None:
    write_ckpt(local, 20)
    found = find_local(local)
    assert found is not None
    fake.broken.add("upload")
    with pytest.raises(FakeHdfsError):
        upload(fake, found, local, REMOTE, keep=3, tag="t")
    assert remote_checkpoints(fake, REMOTE) == []


def test_upload_retry_after_crash_without_cleanup_publishes_clean_checkpoint(fake: FakeHdfs, local: Path) -> None:
    write_ckpt(local, 20)
    sync = make_sync(fake, local, [])
    fake.crash_upload_after = 1  # one file written, then the connection (and the cleanup) fails
    assert sync.sync_once() is False
    assert sync.sync_once() is True  # next poll: HDFS is back
    published = fake.tree(f"{REMOTE}/ckpt-000000000020")
    assert json.loads(published.pop(MANIFEST))["files"] == {n: len(b) for n, b in published.items()}
    assert published == {"checkpoint": state_text(20), **{n: (local / n).read_bytes() for n in ckpt_names(20)}}


def test_upload_writes_nothing_outside_staging(fake: FakeHdfs, local: Path, tmp_path: Path) -> None:
    publish(fake, local / "chief", 20)
    assert list((tmp_path / "systmp").iterdir()) == []  # the staging folder was removed


# --------------------------------------------------------------------------- #
# restore_latest
# --------------------------------------------------------------------------- #


def test_restore_latest_newest_complete_skipping_tmp(fake: FakeHdfs, local: Path, tmp_path: Path) -> None:
    source = tmp_path / "src"
    publish(fake, source, 10)
    publish(fake, source, 20)
    fake.put(f"{REMOTE}/.tmp-ckpt-000000000030-1-1/ckpt-30.index", b"half")  # an upload that never finished
    deletes_before = fake.count("delete")
    assert restore_latest(fake, [REMOTE], local) == (20, f"{REMOTE}/ckpt-000000000020")
    assert tree(local) == {"checkpoint": state_text(20), **{n: (source / n).read_bytes() for n in ckpt_names(20)}}
    found = find_local(local)
    assert found is not None and found.step == 20
    assert sorted(p.name for p in local.parent.iterdir()) == ["ckpt"]  # no tony-restore- temporary left
    assert fake.count("delete") == deletes_before  # restore never modifies HDFS


def test_restore_latest_keeps_subdir_layout(fake: FakeHdfs, local: Path, tmp_path: Path) -> None:
    write_ckpt(tmp_path / "src" / "chief", 20)
    found = find_local(tmp_path / "src")
    assert found is not None
    upload(fake, found, tmp_path / "src", REMOTE, keep=3, tag="t")
    assert restore_latest(fake, [f"hdfs://nn:8020{REMOTE}/"], local) == (20, f"{REMOTE}/ckpt-000000000020")
    assert set(tree(local)) == {f"chief/{n}" for n in {"checkpoint"} | ckpt_names(20)}
    found = find_local(local)
    assert found is not None and (found.step, found.state_dir) == (20, local / "chief")


@pytest.mark.parametrize("own_dir", ["missing", "only-tmp", "empty"])
def test_restore_latest_falls_back_to_warm_start(fake: FakeHdfs, local: Path, tmp_path: Path, own_dir: str) -> None:
    if own_dir == "only-tmp":
        fake.put(f"{REMOTE}/.tmp-ckpt-000000000090-1-1/checkpoint", b"x")
    elif own_dir == "empty":
        fake.makedirs(REMOTE)
    publish(fake, tmp_path / "src", 50, remote=WARM)
    assert restore_latest(fake, [REMOTE, WARM], local) == (50, f"{WARM}/ckpt-000000000050")
    found = find_local(local)
    assert found is not None and found.step == 50


def test_restore_latest_prefers_own_dir(fake: FakeHdfs, local: Path, tmp_path: Path) -> None:
    publish(fake, tmp_path / "warm", 500, remote=WARM)
    publish(fake, tmp_path / "own", 5)
    assert restore_latest(fake, [REMOTE, WARM], local) == (5, f"{REMOTE}/ckpt-000000000005")
    assert fake.count("download") == 1


def test_restore_latest_none_anywhere(fake: FakeHdfs, local: Path) -> None:
    assert restore_latest(fake, [REMOTE, WARM], local) is None
    assert restore_latest(fake, [], local) is None
    assert fake.count("download") == 0


def test_restore_latest_retries_transient_errors(fake: FakeHdfs, local: Path, tmp_path: Path, clock: Clock) -> None:
    publish(fake, tmp_path / "src", 20)
    fake.fail_times = {"list": 1, "download": 2}
    assert restore_latest(fake, [REMOTE], local) == (20, f"{REMOTE}/ckpt-000000000020")
    assert clock.sleeps == [1.0, 1.0, 2.0]  # backoff per operation, on the patched clock
    found = find_local(local)
    assert found is not None and found.step == 20


# --------------------------------------------------------------------------- #
# why_not_whole: the check restore makes before it downloads a candidate
# --------------------------------------------------------------------------- #

STATE20 = b'model_checkpoint_path: "ckpt-20"\nall_model_checkpoint_paths: "ckpt-20"\n'
WHOLE = {
    "checkpoint": len(STATE20),
    "ckpt-20.index": 200,
    "ckpt-20.data-00000-of-00002": 10,
    "ckpt-20.data-00001-of-00002": 0,
}


def _without(*names: str) -> Callable[[dict[str, int]], None]:
    return lambda files: [files.pop(n) for n in names] and None


def _sized(name: str, size: int) -> Callable[[dict[str, int]], None]:
    return lambda files: files.update({name: size})


@pytest.mark.parametrize(
    ("mutate", "state", "reason"),
    [
        (lambda f: None, STATE20, None),
        (lambda f: f.update({"ckpt-10.index": 5, "extra.txt": 0}), STATE20, None),  # other files do not matter
        (_without("checkpoint"), STATE20, "neither a tony-manifest.json nor a 'checkpoint' state file"),
        (lambda f: None, b"garbage\n", "checkpoint names no model_checkpoint_path"),
        (lambda f: None, b'model_checkpoint_path: "/home/bob/ckpt/ckpt-20"\n', "names an absolute path"),
        (_without("ckpt-20.index"), STATE20, "ckpt-20.index is missing"),
        (_sized("ckpt-20.index", 47), STATE20, "ckpt-20.index is 47 bytes, shorter than any TensorFlow index (48)"),
        (_sized("ckpt-20.index", 0), STATE20, "ckpt-20.index is 0 bytes"),
        (_without("ckpt-20.data-00001-of-00002"), STATE20, "ckpt-20.data-00001-of-00002 is missing"),
        (_without("ckpt-20.data-00000-of-00002"), STATE20, "ckpt-20.data-00000-of-00002 is missing"),
        (
            _without("ckpt-20.data-00000-of-00002", "ckpt-20.data-00001-of-00002"),
            STATE20,
            "ckpt-20.data-*-of-* is missing",
        ),
        (_sized("ckpt-20.data-00000-of-00002", 0), STATE20, "every data shard of ckpt-20 is empty"),
        (lambda f: None, b'model_checkpoint_path: "ckpt-10"\n', "ckpt-10.index is missing"),
        (lambda f: None, b'model_checkpoint_path: "ckpt-2"\n', "ckpt-2.index is missing"),  # not ckpt-20's files
    ],
    ids=[
        "whole",
        "extra-files",
        "no-state-file",
        "state-names-nothing",
        "absolute-prefix",
        "no-index",
        "index-shorter-than-footer",
        "index-empty",
        "last-shard-missing",
        "first-shard-missing",
        "no-shards",
        "all-shards-empty",
        "state-names-pruned-prefix",
        "prefix-of-another",
    ],
)
def test_why_not_whole_without_manifest(
    mutate: Callable[[dict[str, int]], None], state: bytes, reason: str | None
) -> None:
    files = dict(WHOLE)
    mutate(files)
    got = why_not_whole(files, {"checkpoint": state}.__getitem__)
    assert got == reason if reason is None else reason in (got or ""), got


def test_why_not_whole_checks_every_state_file_of_a_subdir_layout() -> None:
    files = {f"chief/{k}": v for k, v in WHOLE.items()}
    read = {"chief/checkpoint": STATE20}.__getitem__
    assert why_not_whole(files, read) is None
    del files["chief/ckpt-20.index"]
    assert why_not_whole(files, read) == "chief/ckpt-20.index is missing"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda f: None, None),
        (_sized("ckpt-20.index", 3), None),  # the manifest is the record: the sizes match it
        (_sized("ckpt-20.data-00000-of-00001", 5), "ckpt-20.data-00000-of-00001 is 5 bytes, the manifest says 9"),
        (_without("checkpoint"), f"checkpoint is missing (the manifest lists {len(STATE20)} bytes)"),
        (lambda f: f.update({"stray": 1}), None),
    ],
    ids=["matches", "tiny-but-recorded", "truncated-shard", "state-file-gone", "extra-file"],
)
def test_why_not_whole_with_manifest(mutate: Callable[[dict[str, int]], None], reason: str | None) -> None:
    files = {"checkpoint": len(STATE20), "ckpt-20.index": 3, "ckpt-20.data-00000-of-00001": 9}
    manifest = json.dumps({"format": 1, "step": 20, "files": files}).encode()
    mutate(files)
    files[MANIFEST] = len(manifest)
    assert why_not_whole(files, {MANIFEST: manifest}.__getitem__) == reason


@pytest.mark.parametrize("manifest", [b"{not json", b"[]", b'{"files": {"a": "big"}}', b'{"format": 1}'])
def test_why_not_whole_unreadable_manifest(manifest: bytes) -> None:
    got = why_not_whole({MANIFEST: len(manifest), "checkpoint": 1}, {MANIFEST: manifest}.__getitem__)
    assert got is not None and got.startswith(f"its {MANIFEST} is unreadable"), got


def test_manifest_of_lists_every_staged_file_with_its_size(tmp_path: Path) -> None:
    write_ckpt(tmp_path / "chief", 7, shards=2)
    manifest = json.loads(manifest_of(tmp_path, 7))
    assert manifest == {
        "format": 1,
        "step": 7,
        "files": {f"chief/{p.name}": p.stat().st_size for p in (tmp_path / "chief").iterdir()},
    }


# --------------------------------------------------------------------------- #
# restore_latest with a bad newest checkpoint
# --------------------------------------------------------------------------- #


def _truncate(fake: FakeHdfs, path: str, size: int = 3) -> None:
    fake.put(path, fake.tree(path.rsplit("/", 1)[0])[path.rsplit("/", 1)[1]][:size])


def _hand_copied(fake: FakeHdfs, step: int, *, skip: tuple[str, ...] = (), remote: str = REMOTE) -> None:
    """A checkpoint folder without a manifest (an older version's upload, a copy by hand)."""
    folder = f"{remote}/{remote_name(step)}"
    fake.put(f"{folder}/checkpoint", state_text(step))
    for name in sorted(ckpt_names(step)):
        if name not in skip:
            fake.put(f"{folder}/{name}", b"i" * 100)


def test_restore_skips_a_truncated_newest_and_leaves_it_in_place(fake: FakeHdfs, local: Path, tmp_path: Path) -> None:
    source = tmp_path / "src"
    publish(fake, source, 10)
    publish(fake, source, 20)
    _truncate(fake, f"{REMOTE}/ckpt-000000000020/ckpt-20.data-00000-of-00001")
    before = fake.tree(REMOTE)
    fake.calls.clear()
    events: list[str] = []
    assert restore_latest(fake, [REMOTE], local, on_event=events.append) == (10, f"{REMOTE}/ckpt-000000000010")
    assert len(events) == 1, events
    assert events[0].startswith(
        f"skipped checkpoint {REMOTE}/ckpt-000000000020: ckpt-20.data-00000-of-00001 is 3 bytes, the manifest says"
    ), events
    assert "left it in place" in events[0]
    assert fake.tree(REMOTE) == before  # nothing skipped was changed or deleted
    assert {name for name, _ in fake.calls} <= {"list", "status", "read", "download"}
    assert [p for name, p in fake.calls if name == "download"] == [f"{REMOTE}/ckpt-000000000010"]
    found = find_local(local)
    assert found is not None and found.step == 10
    assert MANIFEST not in tree(local)  # the user's folder holds what TensorFlow wrote, no more


def test_restore_checks_a_checkpoint_without_manifest_by_tensorflows_rule(fake: FakeHdfs, local: Path) -> None:
    _hand_copied(fake, 20)
    _hand_copied(fake, 30, skip=("ckpt-30.index",))
    events: list[str] = []
    assert restore_latest(fake, [REMOTE], local, on_event=events.append) == (20, f"{REMOTE}/ckpt-000000000020")
    assert len(events) == 1 and "ckpt-000000000030: ckpt-30.index is missing" in events[0], events
    assert set(tree(local)) == {"checkpoint"} | ckpt_names(20)


def test_restore_falls_back_to_warm_start_when_no_own_checkpoint_is_whole(
    fake: FakeHdfs, local: Path, tmp_path: Path
) -> None:
    _hand_copied(fake, 10, skip=("ckpt-10.data-00000-of-00001",))
    _hand_copied(fake, 20, skip=("ckpt-20.index",))
    publish(fake, tmp_path / "warm", 500, remote=WARM)
    events: list[str] = []
    assert restore_latest(fake, [REMOTE, WARM], local, on_event=events.append) == (500, f"{WARM}/ckpt-000000000500")
    assert [e.split(":")[0] for e in events] == [
        f"skipped checkpoint {REMOTE}/ckpt-000000000020",
        f"skipped checkpoint {REMOTE}/ckpt-000000000010",
    ]
    assert remote_checkpoints(fake, REMOTE) == [10, 20]


def test_restore_starts_fresh_when_nothing_is_whole(fake: FakeHdfs, local: Path) -> None:
    _hand_copied(fake, 20, skip=("ckpt-20.index",))
    events: list[str] = []
    assert restore_latest(fake, [REMOTE], local, on_event=events.append) is None
    assert len(events) == 1 and fake.count("download") == 0
    assert tree(local) == {}


def test_restore_skips_a_checkpoint_that_cannot_be_downloaded(
    fake: FakeHdfs, local: Path, tmp_path: Path, clock: Clock
) -> None:
    publish(fake, tmp_path / "src", 10)
    publish(fake, tmp_path / "src", 20)
    fake.fail_times = {"download": 5}  # every retry of the newest fails: its blocks are unreadable
    events: list[str] = []
    assert restore_latest(fake, [REMOTE], local, on_event=events.append) == (10, f"{REMOTE}/ckpt-000000000010")
    assert len(events) == 1 and "ckpt-000000000020: it could not be downloaded (FakeHdfsError" in events[0]
    assert set(tree(local)) == {"checkpoint"} | ckpt_names(10)
    assert sorted(p.name for p in local.parent.iterdir()) == ["ckpt"]  # the failed download left nothing


def test_restore_raises_rather_than_start_fresh_when_hdfs_cannot_list(
    fake: FakeHdfs, local: Path, tmp_path: Path
) -> None:
    publish(fake, tmp_path / "src", 10)
    fake.broken.add("list")
    with pytest.raises(FakeHdfsError):
        restore_latest(fake, [REMOTE], local, on_event=[].append)
    assert fake.count("download") == 0


# --------------------------------------------------------------------------- #
# upload onto a bad checkpoint of the same step
# --------------------------------------------------------------------------- #


def test_upload_replaces_a_bad_checkpoint_of_the_same_step_keeping_it_aside(fake: FakeHdfs, local: Path) -> None:
    publish(fake, local, 20, data=b"first" * 20, tag="1-1")
    _truncate(fake, f"{REMOTE}/ckpt-000000000020/ckpt-20.index")
    damaged = fake.tree(f"{REMOTE}/ckpt-000000000020")
    events: list[str] = []
    write_ckpt(local, 20, data=b"second" * 20)
    found = find_local(local)
    assert found is not None
    final = upload(fake, found, local, REMOTE, keep=3, tag="2-2", on_event=events.append)
    assert fake.tree(final)["ckpt-20.index"] == b"second" * 20
    assert fake.tree(f"{final}.damaged-2-2") == damaged  # moved aside, never deleted
    assert remote_checkpoints(fake, REMOTE) == [20]
    assert len(events) == 1 and f"kept as {final}.damaged-2-2" in events[0] and "ckpt-20.index is 3 bytes" in events[0]


def test_upload_same_step_onto_a_whole_one_keeps_the_first(fake: FakeHdfs, local: Path) -> None:
    publish(fake, local, 20, data=b"first", tag="1-1")
    events: list[str] = []
    write_ckpt(local, 20, data=b"second")
    found = find_local(local)
    assert found is not None
    upload(fake, found, local, REMOTE, keep=3, tag="2-2", on_event=events.append)
    assert fake.tree(f"{REMOTE}/ckpt-000000000020")["ckpt-20.index"] == b"first"
    assert fake.list(REMOTE) == ["ckpt-000000000020"] and events == []


# --------------------------------------------------------------------------- #
# CheckpointSync
# --------------------------------------------------------------------------- #


def test_sync_once_nothing_local(fake: FakeHdfs, local: Path) -> None:
    events: list[str] = []
    sync = make_sync(fake, local, events)
    assert sync.sync_once() is True
    assert (fake.count("upload"), events, sync.pending_since) == (0, [], None)


def test_sync_once_uploads_each_new_checkpoint_once(fake: FakeHdfs, local: Path) -> None:
    events: list[str] = []
    sync = make_sync(fake, local, events)
    write_ckpt(local, 20)
    assert sync.sync_once() is True
    assert sync.uploaded_step == 20
    assert remote_checkpoints(fake, REMOTE) == [20]
    assert sync.sync_once() is True  # nothing new
    assert fake.count("upload") == 1
    assert len(events) == 1 and "step 20" in events[0] and "ckpt-000000000020" in events[0]
    write_ckpt(local, 30)
    assert sync.sync_once() is True
    assert remote_checkpoints(fake, REMOTE) == [20, 30]
    assert fake.count("upload") == 2 and len(events) == 2


def test_sync_once_failure_pending_and_overdue_after_window(fake: FakeHdfs, local: Path, clock: Clock) -> None:
    events: list[str] = []
    sync = make_sync(fake, local, events, window=60.0)
    write_ckpt(local, 20)
    fake.broken.add("upload")
    clock.t = 100.0
    assert sync.sync_once() is False
    assert sync.pending_since == 100.0
    assert "FakeHdfsError" in sync.last_error and "NameNode unreachable" in sync.last_error
    assert not sync.overdue()
    clock.t = 130.0
    assert sync.sync_once() is False
    assert sync.pending_since == 100.0  # the first failure starts the window
    clock.t = 160.0
    assert not sync.overdue()  # exactly the window: not yet
    clock.t = 160.5
    assert sync.overdue()
    assert events == [] and sync.uploaded_step == -1
    fake.broken.clear()
    assert sync.sync_once() is True
    assert (sync.pending_since, sync.overdue(), sync.uploaded_step, len(events)) == (None, False, 20, 1)


def test_sync_once_failure_leaves_no_published_checkpoint(fake: FakeHdfs, local: Path) -> None:
    write_ckpt(local, 20)
    fake.broken.add("move")
    sync = make_sync(fake, local, [])
    assert sync.sync_once() is False
    assert remote_checkpoints(fake, REMOTE) == []


def test_flush_fails_while_hdfs_is_down_then_succeeds(fake: FakeHdfs, local: Path, clock: Clock) -> None:
    events: list[str] = []
    sync = make_sync(fake, local, events)
    write_ckpt(local, 20)
    fake.broken.add("upload")
    assert sync.flush(timeout=0) is False
    assert sync.stop_event.is_set()
    assert clock.sleeps == []
    fake.broken.clear()
    assert sync.flush(timeout=0) is True
    assert remote_checkpoints(fake, REMOTE) == [20] and len(events) == 1


def test_flush_retries_with_backoff_until_timeout(fake: FakeHdfs, local: Path, clock: Clock) -> None:
    sync = make_sync(fake, local, [])
    write_ckpt(local, 20)
    fake.fail_times = {"upload": 2}
    assert sync.flush(timeout=10) is True
    assert clock.sleeps == [1.0, 2.0]
    assert remote_checkpoints(fake, REMOTE) == [20]


def test_start_after_step_suppresses_reupload(fake: FakeHdfs, local: Path) -> None:
    events: list[str] = []
    sync = make_sync(fake, local, events, start_after_step=20)
    write_ckpt(local, 20)  # the restored checkpoint, already on HDFS
    assert sync.sync_once() is True
    assert fake.count("upload") == 0 and events == []
    write_ckpt(local, 30)
    assert sync.sync_once() is True
    assert remote_checkpoints(fake, REMOTE) == [30]


def test_run_calls_on_fatal_once_when_overdue(fake: FakeHdfs, local: Path, clock: Clock) -> None:
    fatal: list[str] = []
    clock.tick = 1.0  # each look at the clock is a second later
    sync = make_sync(fake, local, [], fatal, window=5.0)
    write_ckpt(local, 20)
    fake.broken.add("upload")
    sync.run()  # in this thread: poll_interval 0 means no waiting between rounds
    assert sync.failed is True
    assert len(fatal) == 1
    assert "upload_failure_window" in fatal[0] and REMOTE in fatal[0] and "NameNode unreachable" in fatal[0]


def test_run_stops_when_asked(fake: FakeHdfs, local: Path) -> None:
    sync = make_sync(fake, local, [])
    write_ckpt(local, 20)
    sync.stop_event.set()
    sync.run()
    assert fake.count("upload") == 0


# --------------------------------------------------------------------------- #
# DirSync
# --------------------------------------------------------------------------- #

TB = "/user/alice/job/ckpts/tensorboard"


def test_dirsync_push_uploads_new_and_grown_files_only(fake: FakeHdfs, tmp_path: Path) -> None:
    logdir = tmp_path / "tb"
    (logdir / "train").mkdir(parents=True)
    (logdir / "train" / "events.1").write_bytes(b"abc")
    (logdir / "events.2").write_bytes(b"xy")
    sync = DirSync(fake, logdir, f"hdfs://nn:8020{TB}/", interval=5.0, push=True)
    assert sync.sync_once() == 2
    assert fake.tree(TB) == {"train/events.1": b"abc", "events.2": b"xy"}
    assert sync.sync_once() == 0
    assert fake.count("upload") == 2
    with (logdir / "train" / "events.1").open("ab") as f:
        f.write(b"def")
    (logdir / "validation").mkdir()
    (logdir / "validation" / "events.3").write_bytes(b"v")
    assert sync.sync_once() == 2
    assert fake.tree(TB) == {"train/events.1": b"abcdef", "events.2": b"xy", "validation/events.3": b"v"}
    assert fake.count("upload") == 4


def test_dirsync_push_missing_local_dir(fake: FakeHdfs, tmp_path: Path) -> None:
    assert DirSync(fake, tmp_path / "nope", TB, interval=5.0, push=True).sync_once() == 0
    assert fake.calls == []


def test_dirsync_pull_downloads_changed_files_only(fake: FakeHdfs, tmp_path: Path) -> None:
    logdir = tmp_path / "tb"
    sync = DirSync(fake, logdir, TB, interval=5.0, push=False)
    assert sync.sync_once() == 0  # nothing on HDFS yet
    fake.put(f"{TB}/train/events.1", b"abc")
    fake.put(f"{TB}/events.2", b"xy")
    assert sync.sync_once() == 2
    assert tree(logdir) == {"train/events.1": b"abc", "events.2": b"xy"}
    assert sync.sync_once() == 0
    assert fake.count("download") == 2
    inode = (logdir / "train/events.1").stat().st_ino
    fake.put(f"{TB}/train/events.1", b"abcdef")
    assert sync.sync_once() == 1
    assert tree(logdir) == {"train/events.1": b"abcdef", "events.2": b"xy"}
    # A grown event file is appended to in place: TensorBoard keeps the file open and reads on from
    # where it stopped (a replaced file, a new inode, was never read again: no scalars for good).
    assert (logdir / "train/events.1").stat().st_ino == inode
    assert fake.count("download") == 2 and fake.count("read") == 1
    fake.put(f"{TB}/events.2", b"z")  # rewritten shorter: copied whole
    assert sync.sync_once() == 1
    assert tree(logdir) == {"train/events.1": b"abcdef", "events.2": b"z"}
    assert fake.count("download") == 3


def test_tensorboard_events_live_beside_the_checkpoints_on_hdfs() -> None:
    assert checkpoint.tensorboard_remote("hdfs://nn:8020/user/a/ckpt/") == "/user/a/ckpt/tensorboard"
    assert checkpoint.tensorboard_remote("/user/a/ckpt") == "/user/a/ckpt/tensorboard"


def test_the_newest_uploaded_step_is_none_until_one_is_uploaded(fake: FakeHdfs, local: Path) -> None:
    sync = make_sync(fake, local, [])
    assert sync.newest_uploaded() is None
    write_ckpt(local, 0)
    assert sync.sync_once() is True
    assert sync.newest_uploaded() == 0, "step 0 is a step"


def test_dirsync_pull_creates_nested_folders(fake: FakeHdfs, tmp_path: Path) -> None:
    fake.put(f"{TB}/train/plugins/profile/events.9", b"p")
    sync = DirSync(fake, tmp_path / "tb", f"hdfs://nn:8020{TB}/", interval=5.0, push=False)
    assert sync.remote_dir == TB
    assert sync.sync_once() == 1 and tree(tmp_path / "tb") == {"train/plugins/profile/events.9": b"p"}


def test_dirsync_runs_in_the_background_retries_after_errors_and_stops(
    fake: FakeHdfs, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Best effort: an HDFS error is logged and the next round tries again; stop() ends the thread."""
    logdir = tmp_path / "tb"
    logdir.mkdir()
    (logdir / "events.1").write_bytes(b"abc")
    upload = fake.upload
    failures = [OSError("NameNode down")]

    def flaky(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return upload(*args, **kwargs)

    fake.upload = flaky  # type: ignore[method-assign]
    sync = DirSync(fake, logdir, TB, interval=0.01, push=True)
    assert sync.daemon and sync.name == "tony-dir-sync", "a daemon: it must never keep a finished task alive"
    with caplog.at_level("WARNING"):
        sync.start()
        deadline = time.monotonic() + 10
        while fake.tree(TB) != {"events.1": b"abc"} and time.monotonic() < deadline:
            time.sleep(0.01)
        sync.stop_event.set()
        sync.join(timeout=5)
    assert fake.tree(TB) == {"events.1": b"abc"} and not sync.is_alive()
    assert f"syncing {TB}: NameNode down" in caplog.text


def test_the_manifest_is_stable_bytes(tmp_path: Path) -> None:
    """Sorted keys, one-space indent: two uploads of the same files write the same manifest."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.data").write_bytes(b"12345")
    (tmp_path / "a.index").write_bytes(b"1")
    assert checkpoint.manifest_of(tmp_path, 7) == (
        b'{\n "files": {\n  "a.index": 1,\n  "sub/b.data": 5\n },\n "format": 1,\n "step": 7\n}'
    )


def test_a_bad_state_file_does_not_hide_a_good_checkpoint_found_after_it(tmp_path: Path) -> None:
    """Folders are looked at in name order here: each bad one comes before the good one."""

    class InOrder(type(tmp_path)):  # type: ignore[misc]
        def rglob(self, pattern: str) -> Any:
            return sorted(super().rglob(pattern))

    root = InOrder(tmp_path / "ckpt")
    (root / "a_garbage").mkdir(parents=True)
    (root / "a_garbage" / "checkpoint").write_text("not a state file")
    (root / "b_outside").mkdir()
    (root / "b_outside" / "checkpoint").write_text('model_checkpoint_path: "../elsewhere/ckpt-50"\n')
    (root / "c_incomplete").mkdir()
    (root / "c_incomplete" / "checkpoint").write_text('model_checkpoint_path: "ckpt-40"\n')
    write_ckpt(root / "d_good", 20)
    found = find_local(root)
    assert found is not None and found.step == 20 and found.state_dir == root / "d_good"


def test_of_two_checkpoints_with_the_same_step_the_first_found_stays(tmp_path: Path) -> None:
    """State files are looked at in path order: ``a`` before ``b``, and a later one must be newer to win."""
    root = tmp_path / "ckpt"
    write_ckpt(root / "a", 20)
    write_ckpt(root / "b", 20)
    found = find_local(root)
    assert found is not None and found.state_dir == root / "a"


def test_a_download_that_differs_from_the_listing_is_skipped(fake: FakeHdfs, local: Path, tmp_path: Path) -> None:
    """The checkpoint changed between the listing and the download (pruned, rewritten): not restored."""
    publish(fake, tmp_path / "src", 10)
    download = fake.download

    def and_a_stranger(hdfs_path: str, local_path: str, **kwargs: Any) -> str:
        out = download(hdfs_path, local_path, **kwargs)
        Path(local_path, "stranger.bin").write_bytes(b"?")
        return out

    fake.download = and_a_stranger  # type: ignore[method-assign]
    events: list[str] = []
    assert restore_latest(fake, [REMOTE], local, on_event=events.append) is None
    assert len(events) == 1 and "the downloaded copy differs from the listing ([('stranger.bin', 1)])" in events[0]
    assert not local.exists() or not any(local.iterdir())


def test_a_new_uploader_starts_clean_as_a_daemon(fake: FakeHdfs, local: Path) -> None:
    sync = make_sync(fake, local, [], tag="3-1-77")
    assert sync.daemon and sync.name == "tony-checkpoint-sync", "a daemon: it never keeps a finished task alive"
    assert (sync.tag, sync.pending_since, sync.last_error, sync.failed) == ("3-1-77", None, "", False)


def test_a_healthy_uploader_runs_until_stopped_and_reports_each_upload(
    fake: FakeHdfs, local: Path, tmp_path: Path
) -> None:
    """No fatal call while uploads succeed; the event says where and how long it took."""
    events: list[str] = []
    fatal: list[str] = []
    sync = make_sync(fake, local, events, fatal, poll_interval=0.01)
    write_ckpt(local, 10)
    sync.start()
    deadline = time.monotonic() + 10
    while sync.newest_uploaded() != 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    sync.stop_event.set()
    sync.join(timeout=5)
    assert not sync.is_alive() and fatal == [] and sync.failed is False
    (uploaded,) = [e for e in events if e.startswith("uploaded")]
    prefix = f"uploaded checkpoint step 10 to {REMOTE}/{remote_name(10)} in "
    assert uploaded.startswith(prefix) and float(uploaded[len(prefix) : -1]) < 60, uploaded


def test_paths_ending_in_x_keep_it(fake: FakeHdfs, tmp_path: Path) -> None:
    """Only slashes are stripped from the end of a directory (mutmut's 'XX/XX' would strip an X too)."""
    assert checkpoint.tensorboard_remote("/user/a/ckptX/") == "/user/a/ckptX/tensorboard"
    assert DirSync(fake, tmp_path, "/user/a/tbX/", interval=1.0, push=True).remote_dir == "/user/a/tbX"


def test_an_index_of_the_smallest_size_tensorflow_writes_is_whole(fake: FakeHdfs) -> None:
    files = {"checkpoint": 10, "ckpt-5.index": 48, "ckpt-5.data-00000-of-00001": 7}
    files["a-other-9.data-00000-of-00002"] = 3  # another checkpoint's shard (sorting first): not ckpt-5's
    state = b'model_checkpoint_path: "ckpt-5"\n'
    assert why_not_whole(files, lambda rel: state) is None
    assert "shorter than any TensorFlow index" in (
        why_not_whole({**files, "ckpt-5.index": 47}, lambda rel: state) or ""
    )


def test_a_folder_that_vanishes_while_the_checkpoints_are_looked_for_is_skipped(tmp_path, monkeypatch) -> None:
    """TensorFlow saves into ``ckpt-N_temp`` and renames it: the walk may list it and then not find it."""
    import os as os_module

    from airflow_provider_tony.runtime import checkpoint as ckpt_module

    state = tmp_path / "checkpoint"
    state.write_text('model_checkpoint_path: "ckpt-10"\n')
    (tmp_path / "ckpt-10.index").write_bytes(b"i")
    (tmp_path / "ckpt-10.data-00000-of-00001").write_bytes(b"d")
    (tmp_path / "ckpt-20_temp").mkdir()
    real_scandir = os_module.scandir

    def scandir(path: object = ".") -> object:
        if str(path).endswith("_temp"):  # renamed away after it was listed
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_scandir(path)  # type: ignore[arg-type]

    monkeypatch.setattr(os_module, "scandir", scandir)
    found = ckpt_module.find_local(tmp_path)
    assert found is not None and found.step == 10


def test_the_uploader_thread_survives_a_failed_look_at_the_folder(tmp_path, caplog: pytest.LogCaptureFixture) -> None:

    looks: list[int] = []

    class Flaky(CheckpointSync):
        def sync_once(self) -> bool:
            looks.append(1)
            if len(looks) == 1:
                raise FileNotFoundError("ckpt-20_temp")
            if len(looks) >= 3:
                self.stop_event.set()
            return True

    sync = Flaky(
        None,
        tmp_path,
        "/ckpt",
        keep=1,
        poll_interval=0.01,
        window=60.0,
        tag="t",
        on_event=lambda _m: None,
        on_fatal=lambda _m: None,
    )
    with caplog.at_level(logging.WARNING, logger="airflow_provider_tony.runtime.checkpoint"):
        sync.start()
        sync.join(timeout=10)
    assert not sync.is_alive() and len(looks) >= 3
    # the failed look is said with its cause: the error's type and text
    assert sync.last_error == "FileNotFoundError: ckpt-20_temp"
    assert "checkpoint folder not read this time: FileNotFoundError: ckpt-20_temp" in caplog.messages


# --------------------------------------------------------------------------- #
# best-N retention by the job's metric
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    ("mode", "scores", "expected"),
    [
        # newest 2 always (50, 40), plus the 2 best of the rest; unscored ones never count as best
        ("max", {10: 0.9, 20: 0.5, 30: 0.95, 40: 0.1, 50: 0.2}, {50, 40, 30, 10}),
        ("min", {10: 0.9, 20: 0.5, 30: 0.95, 40: 0.1, 50: 0.2}, {50, 40, 20, 10}),
        ("max", {10: None, 20: 0.5, 30: None, 40: 0.1, 50: 0.2}, {50, 40, 20}),
        ("max", {10: 0.7, 20: 0.7, 30: 0.7, 40: 0.1, 50: 0.2}, {50, 40, 30, 20}),  # ties: the newer wins
    ],
)
def test_retained_keeps_the_newest_and_the_best_of_the_others(
    mode: str, scores: dict[int, float | None], expected: set[int]
) -> None:
    steps = sorted(scores)
    assert checkpoint.retained(steps, 2, checkpoint.BestOf(2, "acc", mode), scores) == expected
    assert checkpoint.retained(steps, 2, None, scores) == {40, 50}, "without best-N only the newest stay"
    assert checkpoint.retained(steps, 2, checkpoint.BestOf(0, "acc", mode), scores) == {40, 50}


def test_upload_keeps_the_best_checkpoint_by_its_manifest_metrics(fake: FakeHdfs, local: Path) -> None:
    """Figures travel in each manifest; a fresh uploader (another try) reads them back once."""
    best = checkpoint.BestOf(1, "val_accuracy", "max")
    figures = {10: 0.5, 20: 0.9, 30: 0.6, 40: 0.7, 50: 0.4}
    scores: dict[int, float | None] = {}
    for step, acc in figures.items():
        write_ckpt(local, step)
        found = find_local(local)
        assert found is not None
        fresh = step == 50  # the last upload comes from a new process: no cached scores
        upload(
            fake,
            found,
            local,
            REMOTE,
            keep=2,
            tag="t",
            metrics={"val_accuracy": acc, "loss": 1.0},
            best=best,
            scores={} if fresh else scores,
        )
    assert remote_checkpoints(fake, REMOTE) == [20, 40, 50], "the newest two and the best (20: 0.9)"
    manifest = json.loads(fake.tree(f"{REMOTE}/{remote_name(20)}")[MANIFEST])
    assert manifest["metrics"] == {"val_accuracy": 0.9, "loss": 1.0}
    reads = [path for name, path in fake.calls if name == "read" and path.endswith(MANIFEST)]
    assert len(reads) == len(set(reads)), "each manifest is read at most once per uploader"


def test_dirsync_final_pushes_what_was_written_since_the_last_round(fake: FakeHdfs, tmp_path: Path) -> None:
    """The last epoch's scalars are written just before the script exits: one more round then."""
    logdir = tmp_path / "tb"
    logdir.mkdir()
    (logdir / "events.1").write_bytes(b"abc")
    sync = DirSync(fake, logdir, TB, interval=3600, push=True)
    sync.start()
    deadline = time.monotonic() + 10
    while fake.tree(TB) != {"events.1": b"abc"} and time.monotonic() < deadline:
        time.sleep(0.01)
    (logdir / "events.1").write_bytes(b"abcdef")  # the next round would be an hour away
    sync.final()
    assert not sync.is_alive() and fake.tree(TB) == {"events.1": b"abcdef"}
