"""Checkpoints between a container's local disk and HDFS, so a retry resumes.

TensorFlow 2.21 cannot write ``hdfs://``; user code writes checkpoints to
``$TONY_CHECKPOINT_DIR`` (``tf.train.CheckpointManager`` or tf-keras
``BackupAndRestore``), and the executor of the deciding task copies each new
*complete* one to HDFS. On HDFS a checkpoint is a directory
``<dir>/ckpt-<step, 12 digits>`` that appears only by rename after its upload
finished (uploads go to ``<dir>/.tmp-...``), so a retry never restores half a
checkpoint; an older checkpoint never replaces a newer one; the newest
``keep`` are kept.

What counts as complete is TensorFlow's own rule: the ``checkpoint`` state
file names the latest prefix, and that prefix's ``.index`` and every
``.data-XXXXX-of-NNNNN`` shard exist.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from airflow_provider_tony.runtime.constants import TENSORBOARD_SUBDIR
from airflow_provider_tony.runtime.hdfs_io import hdfs_path, upload_to_temporary, with_retries

__all__ = ["CheckpointSync", "DirSync", "LocalCheckpoint", "find_local", "hdfs_path", "remote_checkpoints",
           "remote_name", "restore_latest", "tensorboard_remote", "upload"]

log = logging.getLogger("tony.checkpoint")

REMOTE_RE = re.compile(r"^ckpt-(\d{12})$")
STATE_FILE = "checkpoint"
_PATH_RE = re.compile(r'^model_checkpoint_path:\s*"(.+)"\s*$', re.M)
_STEP_RE = re.compile(r"(\d+)$")
_SHARD_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")


def remote_name(step: int) -> str:
    return f"ckpt-{step:012d}"


@dataclass(frozen=True)
class LocalCheckpoint:
    """One complete checkpoint under the local checkpoint directory."""

    step: int
    state_dir: Path  # the folder holding TensorFlow's ``checkpoint`` state file
    prefix: str  # e.g. "ckpt-20" (relative to state_dir)
    files: tuple[Path, ...]  # data shards and index, relative to state_dir


def _complete_files(state_dir: Path, prefix: str) -> tuple[Path, ...] | None:
    base = state_dir / prefix
    index = base.parent / (base.name + ".index")
    if not index.is_file():
        return None
    shards = [p for p in base.parent.glob(base.name + ".data-*") if _SHARD_RE.search(p.name)]
    if not shards:
        return None
    match = _SHARD_RE.search(shards[0].name)
    assert match is not None  # every shard in the list matched it above
    total = int(match.group(2))
    if len(shards) != total:
        return None  # a shard is still being written
    return tuple(sorted(p.relative_to(state_dir) for p in [index, *shards]))


def find_local(local_dir: Path) -> LocalCheckpoint | None:
    """The newest complete checkpoint anywhere under ``local_dir`` (None if none)."""
    best: LocalCheckpoint | None = None
    if not local_dir.is_dir():
        return None
    for state in local_dir.rglob(STATE_FILE):
        try:
            match = _PATH_RE.search(state.read_text())
        except OSError:
            continue
        if not match:
            continue
        prefix = match.group(1)
        prefix = os.path.relpath(prefix, state.parent) if os.path.isabs(prefix) else prefix
        if prefix.startswith(".."):
            continue  # points outside the checkpoint folder: not ours to ship
        step = _STEP_RE.search(prefix)
        files = _complete_files(state.parent, prefix)
        if step is None or files is None:
            continue
        found = LocalCheckpoint(int(step.group(1)), state.parent, prefix, files)
        if best is None or found.step > best.step:
            best = found
    return best


def _stage(ckpt: LocalCheckpoint, local_dir: Path, into: Path) -> None:
    """Copy one checkpoint (and a state file naming only it) to a frozen folder,
    so TensorFlow writing the next one cannot change what we upload."""
    rel = ckpt.state_dir.relative_to(local_dir)
    target = into / rel
    for file in ckpt.files:
        (target / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ckpt.state_dir / file, target / file)
    (target / STATE_FILE).write_text(f'model_checkpoint_path: "{ckpt.prefix}"\n'
                                     f'all_model_checkpoint_paths: "{ckpt.prefix}"\n')


def tensorboard_remote(checkpoint_dir: str) -> str:
    """Where the deciding task mirrors its TensorBoard events and the tensorboard role reads them."""
    return f"{hdfs_path(checkpoint_dir).rstrip('/')}/{TENSORBOARD_SUBDIR}"


def _steps(names: Any) -> list[int]:
    return sorted(int(m.group(1)) for n in names if (m := REMOTE_RE.match(n)))


def remote_checkpoints(client: Any, remote_dir: str) -> list[int]:
    """Steps of the complete checkpoints on HDFS, oldest first (temporaries ignored)."""
    names = client.list(hdfs_path(remote_dir)) if client.status(hdfs_path(remote_dir), strict=False) else []
    return _steps(names)


def upload(client: Any, ckpt: LocalCheckpoint, local_dir: Path, remote_dir: str, keep: int, tag: str) -> str:
    """Publish ``ckpt`` as ``<remote_dir>/ckpt-<step>``; prune to the newest ``keep``.

    Every WebHDFS call is a NameNode operation on the nodes that train, so
    there are no extra ones: writing the temporary copy creates the folders,
    and one listing afterwards says both whether this step is already there
    and what to prune.
    """
    remote_dir = hdfs_path(remote_dir).rstrip("/")
    name = remote_name(ckpt.step)
    final = f"{remote_dir}/{name}"
    tmp = f"{remote_dir}/.tmp-{name}-{tag}"
    with tempfile.TemporaryDirectory(prefix="tony-ckpt-") as staging:
        _stage(ckpt, local_dir, Path(staging))
        upload_to_temporary(client, staging, tmp)
    names = set(client.list(remote_dir))
    if name in names:  # the same step again (a retry): keep the first
        client.delete(tmp, recursive=True)
    else:
        client.rename(tmp, final)
        names.add(name)
    for old in _steps(names)[:-keep]:
        client.delete(f"{remote_dir}/{remote_name(old)}", recursive=True)
    return final


def restore_latest(client: Any, remote_dirs: list[str], local_dir: Path) -> tuple[int, str] | None:
    """Download the newest complete checkpoint of the first directory that has one.

    ``remote_dirs`` is the job's own directory first, then a warm-start source.
    """
    for remote_dir in remote_dirs:
        steps = with_retries(f"list {remote_dir}", functools.partial(remote_checkpoints, client, remote_dir))
        if not steps:
            continue
        source = f"{hdfs_path(remote_dir).rstrip('/')}/{remote_name(steps[-1])}"
        with tempfile.TemporaryDirectory(prefix="tony-restore-", dir=local_dir.parent) as tmp:
            target = Path(tmp) / "ckpt"
            with_retries(f"download {source}", functools.partial(client.download, source, str(target), n_threads=1))
            local_dir.mkdir(parents=True, exist_ok=True)
            for item in target.iterdir():
                shutil.move(str(item), str(local_dir / item.name))
        return steps[-1], source
    return None


class CheckpointSync(threading.Thread):
    """Uploads each new complete local checkpoint while the user code trains.

    An upload that fails is retried on the next poll (training goes on); if a
    checkpoint stays un-uploaded longer than ``window`` seconds, ``on_fatal``
    is called so the executor can fail the task as retryable rather than train
    on with nothing saved.
    """

    def __init__(self, client: Any, local_dir: Path, remote_dir: str, *, keep: int, poll_interval: float,
                 window: float, tag: str, on_event: Callable[[str], None], on_fatal: Callable[[str], None],
                 start_after_step: int = -1) -> None:
        super().__init__(name="tony-checkpoint-sync", daemon=True)
        self.client = client
        self.local_dir = local_dir
        self.remote_dir = remote_dir
        self.keep = keep
        self.poll_interval = poll_interval
        self.window = window
        self.tag = tag
        self.on_event = on_event
        self.on_fatal = on_fatal
        self.uploaded_step = start_after_step
        self.pending_since: float | None = None
        self.last_error = ""
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.failed = False

    def sync_once(self) -> bool:
        """Upload the newest checkpoint if it is new; True when nothing is left pending."""
        with self.lock:
            ckpt = find_local(self.local_dir)
            if ckpt is None or ckpt.step <= self.uploaded_step:
                self.pending_since = None
                return True
            self.pending_since = self.pending_since or time.monotonic()
            started = time.monotonic()
            try:
                path = upload(self.client, ckpt, self.local_dir, self.remote_dir, self.keep, self.tag)
            except Exception as exc:  # noqa: BLE001 - HDFS trouble: retried on the next poll
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("checkpoint step %d not uploaded yet: %s", ckpt.step, self.last_error)
                return False
            self.uploaded_step = ckpt.step
            self.pending_since = None
            self.on_event(f"uploaded checkpoint step {ckpt.step} to {path} in {time.monotonic() - started:.2f}s")
            return True

    def overdue(self) -> bool:
        return self.pending_since is not None and time.monotonic() - self.pending_since > self.window

    def run(self) -> None:
        while not self.stop_event.wait(self.poll_interval):
            self.sync_once()
            if self.overdue() and not self.failed:
                self.failed = True
                self.on_fatal(f"checkpoints could not be uploaded to {self.remote_dir} for more than "
                              f"{self.window:g}s (upload_failure_window): {self.last_error}")
                return

    def flush(self, timeout: float) -> bool:
        """After the user code ended: upload what is left, retrying until ``timeout``."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        delay = 1.0
        while True:
            if self.sync_once():
                return True
            if time.monotonic() + delay > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 15.0)


class DirSync(threading.Thread):
    """Mirror a directory of growing files (TensorBoard events) to or from HDFS.

    ``push``: local -> HDFS, each file re-uploaded when its size changed (event
    files only grow). Pull (``push=False``): HDFS -> local, for the tensorboard
    role. Best effort: HDFS trouble is logged and retried on the next round.
    """

    def __init__(self, client: Any, local_dir: Path, remote_dir: str, *, interval: float, push: bool) -> None:
        super().__init__(name="tony-dir-sync", daemon=True)
        self.client = client
        self.local_dir = local_dir
        self.remote_dir = hdfs_path(remote_dir).rstrip("/")
        self.interval = interval
        self.push = push
        self.sizes: dict[str, int] = {}
        self.stop_event = threading.Event()

    def sync_once(self) -> int:
        moved = 0
        if self.push:
            files = [p for p in self.local_dir.rglob("*") if p.is_file()] if self.local_dir.is_dir() else []
            for path in files:
                rel = str(path.relative_to(self.local_dir))
                size = path.stat().st_size
                if self.sizes.get(rel) != size:
                    self.client.upload(f"{self.remote_dir}/{rel}", str(path), overwrite=True)
                    self.sizes[rel], moved = size, moved + 1
        else:
            if self.client.status(self.remote_dir, strict=False) is None:
                return 0
            for root, _dirs, names in self.client.walk(self.remote_dir):
                for name in names:
                    remote = f"{root}/{name}"
                    rel = remote[len(self.remote_dir) + 1:]
                    size = self.client.status(remote)["length"]
                    if self.sizes.get(rel) != size:
                        target = self.local_dir / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        self.client.download(remote, str(target), overwrite=True)
                        self.sizes[rel], moved = size, moved + 1
        return moved

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.sync_once()
            except Exception as exc:  # noqa: BLE001 - best effort, retried next round
                log.warning("syncing %s: %s", self.remote_dir, exc)
            self.stop_event.wait(self.interval)
