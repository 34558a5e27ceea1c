"""Checkpoints between a container's local disk and HDFS, so a retry resumes.

TensorFlow 2.21 cannot write ``hdfs://``; user code writes checkpoints to
``$TONY_CHECKPOINT_DIR`` (``tf.train.CheckpointManager`` or tf-keras
``BackupAndRestore``), and the executor of the deciding task copies each new
*complete* one to HDFS. On HDFS a checkpoint is a directory
``<dir>/ckpt-<step, 12 digits>`` that appears only by rename after its upload
finished (uploads go to ``<dir>/.tmp-...``), so a retry never restores half a
checkpoint; an older checkpoint never replaces a newer one; the newest
``keep`` are kept, and with ``keep_best`` also the best of the older ones by
the job's evaluation metric (``quality_gate.metric``), as the script last
reported it before each upload (kept in the checkpoint's manifest).

What counts as complete is each framework's own rule. TensorFlow's: the
``checkpoint`` state file names the latest prefix, and that prefix's
``.index`` and every ``.data-XXXXX-of-NNNNN`` shard exist. PyTorch's
(:mod:`checkpoint_torch`): a ``<name>-<step>.pt`` file that ``torch.save``
wrote to the end; it is uploaded alone (no state file) and restored under its
own name. The rule is chosen by what the folder holds.

A checkpoint on HDFS can still be bad: written by an older version, copied by
hand, damaged on HDFS. Restoring it makes TensorFlow fail, and every retry
with it, so restore checks each candidate before downloading it (against the
manifest of files and sizes an upload writes last, or else against the rule
above with sane sizes), skips a bad one with an event, and falls back to the
next older one, then the warm-start source, then a fresh start. What it skips
stays on HDFS for a person to look at.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import posixpath
import re
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from airflow_provider_tony.runtime import checkpoint_torch
from airflow_provider_tony.runtime.constants import TENSORBOARD_ROLE, TENSORBOARD_SUBDIR
from airflow_provider_tony.runtime.errors import RenameFailed
from airflow_provider_tony.runtime.hdfs_io import hdfs_path, move, upload_to_temporary, with_retries
from airflow_provider_tony.runtime.hdfs_refusal import refusal, refused_line
from airflow_provider_tony.runtime.messages_base import finite_number
from airflow_provider_tony.runtime.namenodes import pick

__all__ = [
    "MANIFEST",
    "BestOf",
    "CheckpointSync",
    "DirSync",
    "LocalCheckpoint",
    "find_local",
    "hdfs_path",
    "manifest_of",
    "remote_checkpoints",
    "remote_name",
    "restore_latest",
    "retained",
    "tensorboard_remote",
    "upload",
    "why_not_whole",
]

log = logging.getLogger("tony.checkpoint")

REMOTE_RE = re.compile(r"^ckpt-(\d{12})$")
STATE_FILE = "checkpoint"
_PATH_RE = re.compile(r'^model_checkpoint_path:\s*"(.+)"\s*$', re.M)
_STEP_RE = re.compile(r"(\d+)$")
_SHARD_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")
#: Files and sizes of a published checkpoint, written into it last (just before the rename).
MANIFEST = "tony-manifest.json"
#: An SSTable (the ``.index``) ends in a 48-byte footer; TensorFlow rejects anything shorter
#: ("file is too short to be an sstable").
_MIN_INDEX_BYTES = 48


def remote_name(step: int) -> str:
    return f"ckpt-{step:012d}"


@dataclass(frozen=True)
class LocalCheckpoint:
    """One complete checkpoint under the local checkpoint directory."""

    step: int
    state_dir: Path  # the folder holding TensorFlow's ``checkpoint`` state file (PyTorch: the file)
    prefix: str  # e.g. "ckpt-20" (relative to state_dir); PyTorch: the file's name, "ckpt-20.pt"
    files: tuple[Path, ...]  # data shards and index, relative to state_dir; PyTorch: the file alone
    framework: str = "tensorflow"  # whose rule found it: "pytorch" stages no state file


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


def _walk(local_dir: Path) -> list[Path]:
    """Every file under ``local_dir``, in path order, links not followed: one walk per poll, which
    both frameworks' rules read.

    The training process writes here while it is walked: TensorFlow saves into
    a ``*_temp`` folder and renames it, so a folder may vanish between being
    listed and being entered. ``os.walk`` skips such a folder (``Path.rglob``
    raised ``FileNotFoundError`` and ended the uploader's thread).
    """
    # A stable order: of two checkpoints with the same step, the first in path order wins.
    return sorted(Path(root) / name for root, _dirs, names in os.walk(local_dir) for name in names)


def find_local(local_dir: Path) -> LocalCheckpoint | None:
    """The newest complete checkpoint anywhere under ``local_dir`` (None if none)."""
    best: LocalCheckpoint | None = None
    if not local_dir.is_dir():
        return None
    files_found = _walk(local_dir)
    for state in (path for path in files_found if path.name == STATE_FILE):
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
    torch = checkpoint_torch.newest_whole(files_found)
    if torch is not None and (best is None or torch[0] > best.step):  # a tie: TensorFlow's
        path = torch[1]
        best = LocalCheckpoint(torch[0], path.parent, path.name, (Path(path.name),), checkpoint_torch.FRAMEWORK)
    return best


def _stage(ckpt: LocalCheckpoint, local_dir: Path, into: Path) -> None:
    """Copy one checkpoint (and, for TensorFlow, a state file naming only it) to a frozen
    folder, so the script writing the next one cannot change what we upload."""
    rel = ckpt.state_dir.relative_to(local_dir)
    target = into / rel
    for file in ckpt.files:
        (target / file).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ckpt.state_dir / file, target / file)
    if ckpt.framework == checkpoint_torch.FRAMEWORK:
        return  # its file is the whole checkpoint; restore puts it back under its own name
    (target / STATE_FILE).write_text(
        f'model_checkpoint_path: "{ckpt.prefix}"\nall_model_checkpoint_paths: "{ckpt.prefix}"\n'
    )


def manifest_of(folder: Path, step: int, metrics: Mapping[str, Any] | None = None) -> bytes:
    """The manifest of a staged checkpoint: every file under ``folder`` with its size, and the
    metrics the script last reported before the upload (what best-N retention ranks by)."""
    files = {p.relative_to(folder).as_posix(): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}
    doc: dict[str, Any] = {"format": 1, "step": step, "files": files}
    if metrics:
        doc["metrics"] = dict(metrics)
    return json.dumps(doc, indent=1, sort_keys=True).encode()


@dataclass(frozen=True)
class BestOf:
    """Best-N retention: keep ``count`` of the older checkpoints with the best ``metric`` (``mode``)."""

    count: int
    metric: str
    mode: str = "max"

    def score(self, metrics: Mapping[str, Any] | None) -> float | None:
        return finite_number((metrics or {}).get(self.metric))


def retained(steps: list[int], keep: int, best: BestOf | None, scores: Mapping[int, float | None]) -> set[int]:
    """Which checkpoint steps stay: the newest ``keep``, plus the ``best.count`` best of the others.

    A checkpoint without a figure (reported before the metric, or by an
    older upload) is never among the best; of two equal figures the newer
    wins. Pure, so the policy is tested without HDFS.
    """
    ordered = sorted(steps)
    kept = set(ordered[-keep:])
    if best is None or best.count <= 0:
        return kept
    sign = 1.0 if best.mode == "max" else -1.0
    ranked = sorted(
        (s for s in ordered if s not in kept and scores.get(s) is not None),
        key=lambda s: (sign * float(scores[s]), s),  # type: ignore[arg-type]  # filtered above
        reverse=True,
    )
    return kept | set(ranked[: best.count])


def _remote_score(client: Any, folder: str, best: BestOf) -> float | None:
    """The figure in a published checkpoint's manifest; None when it has none or cannot be read."""
    try:
        return best.score(json.loads(_read(client, f"{folder}/{MANIFEST}")).get("metrics"))
    except Exception:  # noqa: BLE001 - an unreadable manifest ranks last; restore judges it separately
        return None


def why_not_whole(files: Mapping[str, int], read: Callable[[str], bytes]) -> str | None:
    """None when the checkpoint listed in ``files`` can be restored, else why not.

    ``files`` maps each file's path relative to the checkpoint folder to its
    size; ``read`` returns a small file's bytes (the manifest, state files).
    With a manifest (uploads write one), every file it lists must be there with
    its size. Without (older uploads, copies by hand), TensorFlow's rule: each
    state file names a prefix whose ``.index`` (at least an SSTable footer
    long) and every data shard are there, and not every shard is empty; for a
    folder with no state file but a PyTorch ``<name>-<step>.pt``, PyTorch's:
    no such file is empty.
    """
    if MANIFEST in files:
        try:
            listed = json.loads(read(MANIFEST))["files"]
            expected = {str(k): int(v) for k, v in listed.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return f"its {MANIFEST} is unreadable ({type(exc).__name__}: {exc})"
        for rel, size in sorted(expected.items()):
            if rel not in files:
                return f"{rel} is missing (the manifest lists {size} bytes)"
            if files[rel] != size:
                return f"{rel} is {files[rel]} bytes, the manifest says {size}"
        return None
    states = sorted(rel for rel in files if posixpath.basename(rel) == STATE_FILE)
    if not states and checkpoint_torch.holds_one(files):
        return checkpoint_torch.why_not_whole(files)
    if not states:
        return f"it has neither a {MANIFEST} nor a {STATE_FILE!r} state file (nor a PyTorch <name>-<step>.pt)"
    for state in states:
        match = _PATH_RE.search(read(state).decode("utf-8", errors="replace"))
        if not match:
            return f"{state} names no model_checkpoint_path"
        prefix = match.group(1)
        if posixpath.isabs(prefix):
            return f"{state} names an absolute path {prefix!r}, which is not inside the checkpoint"
        base = posixpath.normpath(posixpath.join(posixpath.dirname(state), prefix))
        index = f"{base}.index"
        if index not in files:
            return f"{index} is missing"
        if files[index] < _MIN_INDEX_BYTES:
            return f"{index} is {files[index]} bytes, shorter than any TensorFlow index ({_MIN_INDEX_BYTES})"
        shards = {rel: size for rel, size in files.items() if rel.startswith(f"{base}.data-") and _SHARD_RE.search(rel)}
        if not shards:
            return f"{base}.data-*-of-* is missing"
        total = int(_SHARD_RE.search(min(shards)).group(2))  # type: ignore[union-attr]
        for i in range(total):
            if f"{base}.data-{i:05d}-of-{total:05d}" not in shards:
                return f"{base}.data-{i:05d}-of-{total:05d} is missing"
        if not any(shards.values()):
            return f"every data shard of {base} is empty"
    return None


def _remote_files(client: Any, folder: str) -> dict[str, int]:
    """Every file under ``folder`` on HDFS with its size (one LISTSTATUS per directory level)."""
    found: dict[str, int] = {}
    pending = [""]
    while pending:
        rel = pending.pop()
        for name, status in client.list(f"{folder}/{rel}".rstrip("/"), status=True):
            path = f"{rel}/{name}" if rel else name
            if status["type"] == "DIRECTORY":
                pending.append(path)
            else:
                found[path] = int(status["length"])
    return found


def _read(client: Any, path: str) -> bytes:
    with client.read(path) as reader:
        data: bytes = reader.read()
    return data


def _local_files(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


if TYPE_CHECKING:
    from airflow_provider_tony.runtime.spec import JobSpec


def tensorboard_remote(checkpoint_dir: str) -> str:
    """Where the deciding task mirrors its TensorBoard events and the tensorboard role reads them."""
    return f"{hdfs_path(checkpoint_dir).rstrip('/')}/{TENSORBOARD_SUBDIR}"


def events_remote(spec: JobSpec, events_dir: str | None, app_id: str) -> str | None:
    """The HDFS folder of the job's TensorBoard events, None when nothing would read them.

    Beside the checkpoints when the job has a ``checkpoint.dir``; else, for a
    job with a ``tensorboard`` role, ``<events_dir>/<application id>`` (the
    submitter's ``<base_path>/tensorboard``, ``TONY_EVENTS_DIR``), so the role
    shows the run's scalars without a checkpoint folder. A job with neither
    keeps its events in the container.
    """
    if spec.checkpoint.dir:
        return tensorboard_remote(spec.checkpoint.dir)
    if TENSORBOARD_ROLE in spec.roles and events_dir and app_id:
        return f"{hdfs_path(events_dir).rstrip('/')}/{app_id}"
    return None


def _steps(names: Any) -> list[int]:
    return sorted(int(m.group(1)) for n in names if (m := REMOTE_RE.match(n)))


def remote_checkpoints(client: Any, remote_dir: str) -> list[int]:
    """Steps of the complete checkpoints on HDFS, oldest first (temporaries ignored)."""
    names = client.list(hdfs_path(remote_dir)) if client.status(hdfs_path(remote_dir), strict=False) else []
    return _steps(names)


def _settle(client: Any, tmp: str, final: str) -> None:
    """Give the uploaded step ``tmp`` its name ``final``, never inside a folder another writer made.

    A plain WebHDFS rename onto an existing folder nests the source inside it
    and answers ``false`` for a missing source; :func:`hdfs_io.move` refuses
    both. When ``final`` appeared since the listing (a retry of the same task
    saving the same step) and is whole, it is kept and ``tmp`` goes; a broken
    one is left for the next save to set aside, and the refusal propagates.
    """
    try:
        move(client, tmp, final)
    except RenameFailed:
        if why_not_whole(_remote_files(client, final), lambda rel: _read(client, f"{final}/{rel}")) is not None:
            raise
        client.delete(tmp, recursive=True)


def upload(
    client: Any,
    ckpt: LocalCheckpoint,
    local_dir: Path,
    remote_dir: str,
    keep: int,
    tag: str,
    on_event: Callable[[str], None] | None = None,
    *,
    metrics: Mapping[str, Any] | None = None,
    best: BestOf | None = None,
    scores: dict[int, float | None] | None = None,
) -> str:
    """Publish ``ckpt`` as ``<remote_dir>/ckpt-<step>``; prune to the newest ``keep`` (and the ``best``).

    ``metrics`` go into the manifest; ``scores`` caches each step's figure
    across calls, so a published checkpoint's manifest is read at most once
    (for steps uploaded by an earlier try).

    Every WebHDFS call is a NameNode operation on the nodes that train, so
    there are no extra ones: writing the temporary copy creates the folders,
    the manifest goes in last (so a manifest means the files before it are
    all there), and one listing afterwards says both whether this step is
    already there and what to prune. Only when the step is already there is
    it checked: a whole one is kept (a retry saving the same step), a bad one
    (which restore skipped) is moved aside to ``ckpt-<step>.damaged-<tag>``,
    never deleted, and this one takes its name.
    """
    remote_dir = hdfs_path(remote_dir).rstrip("/")
    name = remote_name(ckpt.step)
    final = f"{remote_dir}/{name}"
    tmp = f"{remote_dir}/.tmp-{name}-{tag}"
    with tempfile.TemporaryDirectory(prefix="tony-ckpt-") as staging:
        _stage(ckpt, local_dir, Path(staging))
        upload_to_temporary(client, staging, tmp)
        client.write(f"{tmp}/{MANIFEST}", data=manifest_of(Path(staging), ckpt.step, metrics), overwrite=True)
    names = set(client.list(remote_dir))
    problem = (
        why_not_whole(_remote_files(client, final), lambda rel: _read(client, f"{final}/{rel}"))
        if name in names
        else None
    )
    if name in names and problem is None:  # the same step again (a retry): keep the first
        client.delete(tmp, recursive=True)
    else:
        if problem is not None:
            aside = f"{final}.damaged-{tag}"
            move(client, final, aside)
            (on_event or log.warning)(
                f"replaced checkpoint {final}, which is not whole ({problem}); the old copy is kept as {aside}"
            )
        _settle(client, tmp, final)
        names.add(name)
    steps = _steps(names)
    scores = {} if scores is None else scores
    if best is not None and best.count > 0:
        scores.setdefault(ckpt.step, best.score(metrics))
        for step in steps[:-keep]:
            if step not in scores:
                scores[step] = _remote_score(client, f"{remote_dir}/{remote_name(step)}", best)
    kept = retained(steps, keep, best, scores)
    for old in steps:
        if old not in kept:
            client.delete(f"{remote_dir}/{remote_name(old)}", recursive=True)
            scores.pop(old, None)
    return final


def restore_latest(
    client: Any, remote_dirs: list[str], local_dir: Path, on_event: Callable[[str], None] | None = None
) -> tuple[int, str] | None:
    """Download the newest whole checkpoint of the first directory that has one.

    ``remote_dirs`` is the job's own directory first, then a warm-start source;
    ``client`` is a WebHDFS client or a ``namenodes.Router`` (each read from its own NameNode).
    A candidate that is not whole, or cannot be read, is skipped (``on_event``
    says which and why) and left in place; the next older one is tried. HDFS
    itself failing (a listing, after retries) is not a reason to skip: it
    raises, and the task fails as retryable rather than start over.
    """
    report = on_event or log.warning
    for remote_dir in remote_dirs:
        fs = pick(client, remote_dir)
        steps = with_retries(f"list {remote_dir}", functools.partial(remote_checkpoints, fs, remote_dir))
        for step in reversed(steps):
            source = f"{hdfs_path(remote_dir).rstrip('/')}/{remote_name(step)}"
            problem = _restore_one(fs, source, local_dir)
            if problem is None:
                return step, source
            report(f"skipped checkpoint {source}: {problem}; left it in place and tried the next older one")
    return None


def _restore_one(client: Any, source: str, local_dir: Path) -> str | None:
    """Check ``source`` and download it into ``local_dir``; None on success, else why it was skipped."""
    files = with_retries(f"list {source}", lambda: _remote_files(client, source))
    try:
        problem = why_not_whole(
            files, lambda rel: with_retries(f"read {source}/{rel}", lambda: _read(client, f"{source}/{rel}"))
        )
    except Exception as exc:  # noqa: BLE001 - a listed file that cannot be read: unreadable, skip it
        return f"it could not be read ({type(exc).__name__}: {exc})"
    if problem is not None:
        return problem
    with tempfile.TemporaryDirectory(prefix="tony-restore-", dir=local_dir.parent) as tmp:
        target = Path(tmp) / "ckpt"
        try:
            with_retries(f"download {source}", lambda: client.download(source, str(target), n_threads=1))
        except Exception as exc:  # noqa: BLE001 - as above: its blocks cannot be read
            return f"it could not be downloaded ({type(exc).__name__}: {exc})"
        got = _local_files(target)
        if got != files:
            changed = sorted(set(got.items()) ^ set(files.items()))
            return f"the downloaded copy differs from the listing ({changed[:3]})"
        (target / MANIFEST).unlink(missing_ok=True)  # ours, not TensorFlow's: keep the folder as it wrote it
        local_dir.mkdir(parents=True, exist_ok=True)
        for item in target.iterdir():
            shutil.move(str(item), str(local_dir / item.name))
    return None


class CheckpointSync(threading.Thread):
    """Uploads each new complete local checkpoint while the user code trains.

    An upload that fails is retried on the next poll (training goes on); if a
    checkpoint stays un-uploaded longer than ``window`` seconds, ``on_fatal``
    is called so the executor can fail the task as retryable rather than train
    on with nothing saved.
    """

    def __init__(
        self,
        client: Any,
        local_dir: Path,
        remote_dir: str,
        *,
        keep: int,
        poll_interval: float,
        window: float,
        tag: str,
        on_event: Callable[[str], None],
        on_fatal: Callable[[str], None],
        start_after_step: int = -1,
        best: BestOf | None = None,
        metrics: Callable[[], Mapping[str, Any] | None] = lambda: None,
    ) -> None:
        super().__init__(name="tony-checkpoint-sync", daemon=True)
        self.best = best
        self.metrics = metrics  # the script's latest reported metrics, read at each upload
        self.scores: dict[int, float | None] = {}
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
        self.refused: str | None = None  # HDFS refused the folder for good (quota, permission): its line
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
                path = upload(
                    self.client,
                    ckpt,
                    self.local_dir,
                    self.remote_dir,
                    self.keep,
                    self.tag,
                    on_event=self.on_event,
                    metrics=self.metrics(),
                    best=self.best,
                    scores=self.scores,
                )
            except Exception as exc:  # noqa: BLE001 - HDFS trouble: retried on the next poll
                self.last_error = f"{type(exc).__name__}: {exc}"
                answer = refusal(exc)
                if answer is not None:  # no later poll gets another answer: the task ends on it
                    self.refused = refused_line(hdfs_path(self.remote_dir), answer)
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
            try:
                self.sync_once()
            except Exception as exc:  # noqa: BLE001 - a bad look at the folder must not end the uploads
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("checkpoint folder not read this time: %s", self.last_error)
            if self.refused is not None and not self.failed:
                self.failed = True
                self.on_fatal(self.refused)
                return
            if self.overdue() and not self.failed:
                self.failed = True
                self.on_fatal(
                    f"checkpoints could not be uploaded to {self.remote_dir} for more than "
                    f"{self.window:g}s (upload_failure_window): {self.last_error}"
                )
                return

    def newest_uploaded(self) -> int | None:
        """The newest step this uploader put on HDFS, or resumed from; None before any."""
        return self.uploaded_step if self.uploaded_step >= 0 else None

    def flush(self, timeout: float) -> bool:
        """After the user code ended: upload what is left, retrying until ``timeout``."""
        self.stop_event.set()
        deadline = time.monotonic() + timeout
        delay = 1.0
        while True:
            if self.sync_once():
                return True
            if self.refused is not None or time.monotonic() + delay > deadline:
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
                    rel = remote[len(self.remote_dir) + 1 :]
                    size = self.client.status(remote)["length"]
                    if self.sizes.get(rel) != size:
                        target = self.local_dir / rel
                        target.parent.mkdir(parents=True, exist_ok=True)
                        self._pull(remote, target, self.sizes.get(rel) or 0, size)
                        self.sizes[rel], moved = size, moved + 1
        return moved

    def _pull(self, remote: str, target: Path, have: int, size: int) -> None:
        """Bring ``target`` up to the remote file: append what is new to the same file, else copy it whole.

        Event files only grow, and TensorBoard keeps each one open and reads
        on from where it stopped: a file replaced by a new one (a new inode)
        is never read again, so a run pulled before its first epoch ended
        showed no scalars for good. A file that shrank was rewritten: copied
        whole.
        """
        local = target.stat().st_size if target.exists() else 0
        if 0 < have == local < size:
            with self.client.read(remote, offset=have) as reader, open(target, "ab") as out:
                shutil.copyfileobj(reader, out)
        else:
            self.client.download(remote, str(target), overwrite=True)

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.sync_once()
            except Exception as exc:  # noqa: BLE001 - best effort, retried next round
                log.warning("syncing %s: %s", self.remote_dir, exc)
            self.stop_event.wait(self.interval)

    def final(self, timeout: float = 30.0) -> None:
        """Stop the rounds and sync once more: what was written since the last round (best effort).

        A round still stuck on HDFS after ``timeout`` seconds means HDFS is in
        trouble: the task's exit does not wait for another one.
        """
        self.stop_event.set()
        if self.is_alive():
            self.join(timeout=timeout)
            if self.is_alive():
                log.warning("syncing %s: still busy after %.0fs, no final round", self.remote_dir, timeout)
                return
        try:
            self.sync_once()
        except Exception as exc:  # noqa: BLE001 - best effort: the job's outcome does not depend on it
            log.warning("syncing %s at the end: %s", self.remote_dir, exc)
