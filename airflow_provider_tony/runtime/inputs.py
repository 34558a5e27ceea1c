"""Training data on HDFS: list an input, deal its files into shards, stage a task's shard to local disk.

TensorFlow 2.21 cannot open ``hdfs://`` paths, so a job's ``inputs`` (see
:class:`~airflow_provider_tony.runtime.spec_data.InputSpec`) reach the script as
local files: the executor copies its task's files over WebHDFS (with the
job's delegation token on a Kerberized cluster) before the script starts,
several at a time, and tells the script where they are through
``$TONY_INPUT_<NAME>_DIR`` and a manifest, ``$TONY_INPUT_<NAME>_MANIFEST``
(JSON: the files, their sizes and which shard this is).

Why staging and not streaming: one streamed pass over the same WebHDFS reads
costs about what staging costs (``bench/input_read.py``), a streamed reader
pays it again every epoch while a staged file is read at local disk speed, and
an HDFS hiccup fails the task before any training time is spent.

The same listing runs on the submitting side (the check before submit) and
in every container: it is sorted, and the submitting side passes what it saw
(``$TONY_INPUTS_SEEN``: files and bytes per input), so every task deals the
same files, and a partition that changed after submit is refused instead of
dealt differently on different tasks. Dealing is pure (:func:`deal`): largest
file first to the least-loaded task, ties to the lower task, so the shards
are disjoint, cover every file and differ in bytes by at most one file.

Scripts read their files with :func:`files` (or the manifest directly)::

    from airflow_provider_tony.runtime import inputs
    dataset = tf.data.TFRecordDataset(inputs.files("digits"))

This module imports the standard library only at module level (it runs in
containers and in user scripts).
"""

from __future__ import annotations

import errno
import fnmatch
import json
import logging
import os
import posixpath
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import InputMissing, InputTooLarge, SpecError, TonyError
from airflow_provider_tony.runtime.hdfs_io import hdfs_path
from airflow_provider_tony.runtime.namenodes import pick
from airflow_provider_tony.runtime.spec import JobSpec

__all__ = [
    "check_shardable",
    "INPUTS_DIR",
    "InputFile",
    "StagedInput",
    "deal",
    "env_names",
    "files",
    "list_input",
    "manifest",
    "seen_env",
    "shard_of",
    "stage_inputs",
]

log = logging.getLogger("tony.inputs")

#: Folder under the container's working directory where inputs are staged, one folder per input.
INPUTS_DIR = "inputs"
#: ``name=files:bytes,...``: what the submitting side listed, checked again by every task.
#: Files copied at once per task: WebHDFS reads are latency-bound for small files, and more
#: streams than this only share the same disk and network.
PARALLEL_READS = 8
_CHUNK = 1 << 20
_MAGIC = set("*?[")
# Hadoop's FileInputFormat skips these: markers (_SUCCESS) and hidden files (.crc, .tmp-...).
_HIDDEN = ("_", ".")


@dataclass(frozen=True)
class InputFile:
    """One file of an input: where it is on HDFS, its size, and its name under the input's folder."""

    hdfs: str
    size: int
    rel: str


@dataclass(frozen=True)
class StagedInput:
    """What staging put on this task's disk, and how long it took."""

    name: str
    directory: Path
    manifest: Path
    files: int
    bytes: int
    seconds: float


def _has_magic(part: str) -> bool:
    return any(c in _MAGIC for c in part)


def _hidden(name: str) -> bool:
    return name.startswith(_HIDDEN)


def _join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


def _walk(client: Any, directory: str) -> list[tuple[str, int]]:
    """Every non-hidden file below ``directory`` (hidden folders skipped too), as (path, size)."""
    out: list[tuple[str, int]] = []
    for name, status in client.list(directory, status=True):
        if _hidden(name):
            continue
        path = _join(directory, name)
        if status.get("type") == "DIRECTORY":
            out += _walk(client, path)
        else:
            out.append((path, int(status.get("length") or 0)))
    return out


def _expand(client: Any, root: str, parts: list[str]) -> list[tuple[str, dict[str, Any] | None]]:
    """The paths below ``root`` that match the glob components ``parts`` (as HDFS's globStatus does).

    Each with the status its folder's LISTSTATUS gave (None where a component
    had no magic, so nothing listed it): 20,000 matches cost one listing, not
    20,000 GETFILESTATUS calls.
    """
    matches: list[tuple[str, dict[str, Any] | None]] = [(root, None)]
    for part in parts:
        found: list[tuple[str, dict[str, Any] | None]] = []
        for parent, known in matches:
            if not _has_magic(part):
                found.append((_join(parent, part), None))
                continue
            status = known if known is not None else client.status(parent, strict=False)
            if status is None or status.get("type") != "DIRECTORY":
                continue
            # Like FileInputFormat, a glob does not reach hidden names unless it spells their first character.
            hidden_ok = _hidden(part)
            found += [
                (_join(parent, n), st)
                for n, st in client.list(parent, status=True)
                if fnmatch.fnmatchcase(n, part) and (hidden_ok or not _hidden(n))
            ]
        matches = found
    return matches


def list_input(client: Any, location: str, field: str = "inputs") -> list[InputFile]:
    """The files of one input, sorted by HDFS path, each with its size and its name under the input's folder.

    ``client`` is a WebHDFS client, or a ``namenodes.Router`` that gives the one of ``location``'s NameNode.

    A folder gives its files (recursively, hidden ones skipped), a file itself, a glob every match.
    One LISTSTATUS per folder (it carries each entry's size and type); GETFILESTATUS only for a path
    given without a glob. Raises :class:`InputMissing` naming the path when nothing is there, or only empty files.
    """
    client = pick(client, location)
    path = hdfs_path(location).rstrip("/") or "/"
    parts = [p for p in path.split("/") if p]
    first = next((i for i, p in enumerate(parts) if _has_magic(p)), len(parts))
    root = "/" + "/".join(parts[:first])
    found: dict[str, int] = {}
    for match, known in _expand(client, root, parts[first:]):
        status = known if known is not None else client.status(match, strict=False)
        if status is None:
            continue
        if status.get("type") == "DIRECTORY":
            found.update(_walk(client, match))
        else:
            found[match] = int(status.get("length") or 0)
    if not found:
        what = "matched nothing" if first < len(parts) else "does not exist or holds no files"
        raise InputMissing(field, location, f"{location} {what} on HDFS")
    if sum(found.values()) == 0:
        raise InputMissing(field, location, f"{location} holds only empty files on HDFS ({len(found)} of them)")
    # Names under the input's folder: relative to the folder given (or the glob's fixed head);
    # a single file given by its path keeps its own name (without a glob, more than one file means a folder).
    base = root if first < len(parts) or path not in found else posixpath.dirname(path)
    return [InputFile(p, found[p], posixpath.relpath(p, base)) for p in sorted(found)]


def deal(items: list[InputFile], shards: int) -> list[list[InputFile]]:
    """Deal ``items`` into ``shards`` lists: largest first to the least-loaded shard (ties: the lower one).

    Deterministic (depends only on paths and sizes), disjoint, together every item;
    each shard keeps path order, so a script reading its files in order reads them as listed.
    """
    if shards < 1:
        raise ValueError(f"{shards} shards: deal needs at least one")
    loads = [0] * shards
    out: list[list[InputFile]] = [[] for _ in range(shards)]
    for item in sorted(items, key=lambda f: (-f.size, f.hdfs)):
        k = min(range(shards), key=lambda i: (loads[i], len(out[i]), i))
        out[k].append(item)
        loads[k] += item.size
    return [sorted(shard, key=lambda f: f.hdfs) for shard in out]


def shard_of(spec: JobSpec, name: str, listed: list[InputFile], task_id: str) -> tuple[list[InputFile], int, int]:
    """The files ``task_id`` receives of input ``name``, with its shard index and the number of shards.

    A task of a role that does not receive the input gets ``([], -1, n)``.
    """
    tasks = spec.input_tasks(name)
    if task_id not in tasks:
        return [], -1, len(tasks)
    if spec.inputs[name].sharding == "all":
        return list(listed), 0, 1
    index = tasks.index(task_id)
    return deal(listed, len(tasks))[index], index, len(tasks)


def check_shardable(spec: JobSpec, name: str, listed: list[InputFile]) -> None:
    """A ``shard`` input needs a file for every receiving task: a task without data would stall the others."""
    tasks = spec.input_tasks(name)
    if spec.inputs[name].sharding == "shard" and len(listed) < len(tasks):
        raise SpecError(
            f"inputs.{name}.sharding",
            f"{spec.inputs[name].path} holds {len(listed)} file(s) but {len(tasks)} tasks ({', '.join(tasks)})"
            " share it under 'shard'; write at least one file per task, or use sharding 'all'",
        )


#: Staging leaves this share of the disk free: the NodeManager marks a disk bad at 90% used by default
#: (``max-disk-utilization-per-disk-percentage``), and then every container on it dies, other users' too.
DISK_RESERVE = 0.10


def check_cap(spec: JobSpec, name: str, listed: list[InputFile]) -> None:
    """No receiving task's share of input ``name`` exceeds ``inputs.<name>.max_bytes_per_task`` (before submit)."""
    cap = spec.inputs[name].max_bytes_per_task
    if cap is None:
        return
    for task_id in spec.input_tasks(name):
        mine, _shard, _shards = shard_of(spec, name, listed, task_id)
        _check_cap(name, task_id, sum(f.size for f in mine), cap)


def _check_cap(name: str, task_id: str, total: int, cap: int) -> None:
    if total > cap:
        raise InputTooLarge(
            f"inputs.{name}.max_bytes_per_task",
            f"{task_id} would stage {total} bytes of input {name!r}, more than the cap of {cap}; raise the cap, "
            "shard the input across more tasks (sharding: shard), or read fewer files",
        )


def check_disk(spec: JobSpec, shares: Mapping[str, int], task_id: str, where: Path) -> None:
    """This task's inputs (``shares``: bytes per input) fit on the disk under ``where``, keeping
    :data:`DISK_RESERVE` of it free, and under each input's cap; before anything is copied."""
    for name, total in shares.items():
        cap = spec.inputs[name].max_bytes_per_task
        if cap is not None:
            _check_cap(name, task_id, total, cap)
    disk = shutil.disk_usage(where)
    room = disk.free - int(disk.total * DISK_RESERVE)
    need = sum(shares.values())
    if need > room:
        first = next(iter(shares))
        raise InputTooLarge(
            f"inputs.{first}.max_bytes_per_task",
            f"{task_id} would stage {need} bytes of inputs ({', '.join(shares)}) onto {where}, which has "
            f"{disk.free} bytes free of {disk.total} (staging keeps {DISK_RESERVE:.0%} free); give the role "
            "nodes with more disk, shard the input across more tasks, or set a max_bytes_per_task that fits",
        )


def seen_env(listed: Mapping[str, list[InputFile]]) -> dict[str, str]:
    """The container variable that carries what the submitting side listed: ``name=files:bytes,...``.

    Not JSON: YARN writes environment values into the launch script without escaping quotes.
    """
    if not listed:
        return {}
    seen = ",".join(f"{name}={len(items)}:{sum(f.size for f in items)}" for name, items in sorted(listed.items()))
    return {C.ENV_INPUTS_SEEN: seen}


def _parse_seen(text: str) -> dict[str, list[int]]:
    """``seen_env``'s value back as ``{name: [files, bytes]}``."""
    out: dict[str, list[int]] = {}
    for part in filter(None, text.split(",")):
        name, _, counts = part.partition("=")
        files, _, size = counts.partition(":")
        out[name] = [int(files), int(size)]
    return out


def env_names(name: str) -> tuple[str, str]:
    """``$TONY_INPUT_<NAME>_DIR`` and ``$TONY_INPUT_<NAME>_MANIFEST`` for input ``name``."""
    upper = name.upper()
    return C.ENV_INPUT_DIR.format(upper), C.ENV_INPUT_MANIFEST.format(upper)


def manifest(
    name: str, source: str, sharding: str, task_id: str, shard: int, shards: int, items: list[InputFile], root: Path
) -> dict[str, Any]:
    """The manifest a script reads: its files (local name, HDFS path, size) and which shard they are."""
    return {
        "name": name,
        "source": source,
        "sharding": sharding,
        "task_id": task_id,
        "shard": shard,
        "num_shards": shards,
        "dir": str(root),
        "total_bytes": sum(f.size for f in items),
        "files": [{"path": f.rel, "hdfs": f.hdfs, "size": f.size} for f in items],
    }


def _copy(client: Any, item: InputFile, target: Path) -> None:
    """One file to ``target``: a temporary name first, so a half-copied file never has the real name."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.part")
    written = 0
    with client.read(item.hdfs, chunk_size=_CHUNK) as reader, open(tmp, "wb") as out:
        for chunk in reader:
            out.write(chunk)
            written += len(chunk)
    if written != item.size:
        raise TonyError(f"{item.hdfs}: read {written} bytes, HDFS listed {item.size}; it changed while staging")
    os.replace(tmp, target)


class _Progress:
    """Files and bytes copied so far, reported at most every ``every`` seconds (the state document's events)."""

    def __init__(self, what: str, items: list[InputFile], on_event: Callable[[str], None], every: float) -> None:
        self.what, self.count, self.on_event, self.every = what, len(items), on_event, every
        self.total = sum(f.size for f in items)
        self.files = self.done = 0
        self.lock = threading.Lock()
        self.last = time.monotonic()

    def add(self, size: int) -> None:
        with self.lock:
            self.files += 1
            self.done += size
            now = time.monotonic()
            if now - self.last < self.every or self.done >= self.total:
                return
            self.last = now
            self.on_event(
                f"{self.what}: {self.files}/{self.count} files, {self.done / 2**20:.1f}/{self.total / 2**20:.1f} MiB"
            )


def _copy_all(client: Any, items: list[InputFile], root: Path, progress: _Progress) -> None:
    """Copy ``items`` under ``root``, ``PARALLEL_READS`` at a time; the first failure propagates."""

    def one(item: InputFile) -> None:
        _copy(client, item, root / item.rel)
        progress.add(item.size)

    root.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL_READS, len(items)))) as pool:
        list(pool.map(one, items))


def _verify_seen(name: str, listed: list[InputFile], seen: Mapping[str, Any]) -> None:
    """The task sees what the submitting side saw, or every task might deal different files."""
    if name not in seen:
        return
    now = [len(listed), sum(f.size for f in listed)]
    if list(seen[name]) != now:
        raise TonyError(
            f"input {name!r} changed after submit: {seen[name][0]} files, {seen[name][1]} bytes were listed then,"
            f" {now[0]} files, {now[1]} bytes now; the shards would differ between tasks, so this try stops"
            " (the next one lists it again)"
        )


def stage_inputs(
    client: Any,
    spec: JobSpec,
    task_id: str,
    workdir: Path,
    env: Mapping[str, str],
    on_event: Callable[[str], None],
    every: float = 5.0,
) -> tuple[dict[str, str], list[StagedInput]]:
    """Copy this task's files of every input to ``workdir/inputs/<name>``; returns the script's variables.

    ``client`` is a WebHDFS client or a ``namenodes.Router`` (each input read from its own NameNode).
    Raises :class:`TonyError` (or the WebHDFS client's error) when an input cannot be staged whole;
    the caller turns that into a retryable exit before the script starts.
    """
    seen = _parse_seen(env.get(C.ENV_INPUTS_SEEN) or "")
    out: dict[str, str] = {}
    staged: list[StagedInput] = []
    shares: dict[str, tuple[list[InputFile], int, int, float]] = {}
    for name, item in spec.inputs.items():  # every listing and the disk check before the first byte is copied
        if task_id not in spec.input_tasks(name):
            continue
        started = time.monotonic()
        listed = list_input(client, item.path, f"inputs.{name}.path")
        _verify_seen(name, listed, seen)
        mine, shard, shards = shard_of(spec, name, listed, task_id)
        shares[name] = (mine, shard, shards, time.monotonic() - started)
    if shares:
        workdir.mkdir(parents=True, exist_ok=True)
        check_disk(spec, {n: sum(f.size for f in share[0]) for n, share in shares.items()}, task_id, workdir)
    for name, (mine, shard, shards, listing_s) in shares.items():
        item = spec.inputs[name]
        started = time.monotonic() - listing_s
        root = workdir / INPUTS_DIR / name
        total = sum(f.size for f in mine)
        which = f"shard {shard + 1}/{shards}" if item.sharding == "shard" else "every file"
        on_event(f"{task_id} staging input {name} ({which}): {len(mine)} files, {total / 2**20:.1f} MiB")
        try:
            progress = _Progress(f"{task_id} staging input {name}", mine, on_event, every)
            _copy_all(pick(client, item.path), mine, root, progress)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            shutil.rmtree(root, ignore_errors=True)  # give the node its disk back before failing
            raise InputTooLarge(
                f"inputs.{name}.max_bytes_per_task",
                f"{task_id} filled its disk staging input {name!r} ({total} bytes): {exc}; the staged files were "
                "removed and the job is not retried (a retry would fill the disk again); set a max_bytes_per_task "
                "that fits the nodes' disks, or shard the input across more tasks",
            ) from exc
        path = workdir / INPUTS_DIR / f"{name}.manifest.json"
        path.write_text(
            json.dumps(manifest(name, item.path, item.sharding, task_id, shard, shards, mine, root), indent=1)
        )
        seconds = time.monotonic() - started
        rate = total / 2**20 / seconds if seconds > 0 else 0.0
        on_event(
            f"{task_id} staged input {name}: {len(mine)} files, {total / 2**20:.1f} MiB in {seconds:.2f}s"
            f" ({rate:.1f} MiB/s)"
        )
        dir_var, manifest_var = env_names(name)
        out[dir_var], out[manifest_var] = str(root), str(path)
        staged.append(StagedInput(name, root, path, len(mine), total, seconds))
    return out, staged


def files(name: str, env: Mapping[str, str] | None = None) -> list[str]:
    """For training scripts: the local paths of this task's files of input ``name``, in manifest order.

    Hand them to ``tf.data.TFRecordDataset`` (or any reader). Raises ``KeyError`` naming the
    variable when the job declares no such input for this task's role.
    """
    env = os.environ if env is None else env
    _, manifest_var = env_names(name)
    if manifest_var not in env:
        raise KeyError(f"${manifest_var} is not set: the job has no input {name!r} for this task's role")
    doc = json.loads(Path(env[manifest_var]).read_text())
    return [str(Path(doc["dir"]) / f["path"]) for f in doc["files"]]
