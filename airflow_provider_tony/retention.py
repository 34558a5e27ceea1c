"""Retention: what a nightly job leaves on HDFS, pruned by age or count (``tony gc``).

Every run of a task leaves a checkpoint folder
(``<base_path>/checkpoints/<dag>/<task>/<run>``), every job a history file
(``<base_path>/history/<app>.json``), a checkpoint that was replaced keeps a
``ckpt-<step>.damaged-<tag>`` copy for a person to look at, and every new
source tree or environment a staged archive (``<base_path>/src``,
``<base_path>/envs``; the runtime zip, launch scripts and TLS files every
job shares in ``<base_path>/cache``), and every job with a ``tensorboard`` role but no
``checkpoint.dir`` an events folder (``<base_path>/tensorboard/<app>``).
Nothing removes them, so a daily job fills HDFS.

The policy (:func:`plan`) is pure and takes the clock as an argument: an item
goes when it is older than ``max_age_days``, and a task's run also when it
is beyond the task's newest ``keep_runs`` (events folders, like history
files, go by age only). It never removes the newest run of a task, a published
model (a folder holding ``tony-model.json``, or any folder above one, or a
path named in ``protect``: ``tony gc`` names the running applications' events
folders there, whose folder times need not move while TensorBoard appends to
an events file) or anything outside those six places. Age is the
latest of HDFS's modification and access times, so a staged archive that
jobs still localise counts as used; and a staged file a running
application names in its references (``tony-references.json`` in its
``~/.skein/<app>`` folder, written at submit: every file YARN localises for
it) stays whatever its age, since a container restarted on another node
localises it again, and YARN fails the container when the file is gone (HDFS
access times are only as fine as ``dfs.namenode.accesstime.precision``,
an hour by default, and a job may run for days).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterable

from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.hdfs_io import hdfs_path

__all__ = [
    "REFERENCES_NAME",
    "Item",
    "Policy",
    "active_folders",
    "plan",
    "read_references",
    "references_json",
    "remove",
    "scan",
    "scan_task",
]

#: The file in an application's staging folder naming every HDFS file YARN localises for it.
REFERENCES_NAME = "tony-references.json"
#: A references file larger than this is not ours (a job of 4,096 tasks names a few hundred files).
MAX_REFERENCES_BYTES = 1024 * 1024
#: What retention may find in ``<base_path>`` that jobs localise.
_STAGED = ("src", "envs", "cache")

#: A checkpoint moved aside because it was not whole (``checkpoint.upload``).
_DAMAGED = re.compile(r"^ckpt-\d{12}\.damaged-")
_MODEL_METADATA = "tony-model.json"  # runtime/gate.py's MODEL_METADATA (imported lazily there; kept in step by a test)
_DAY_S = 86400.0


@dataclass(frozen=True)
class Policy:
    """How much to keep: by age (days) and/or by count per group; None leaves that rule off."""

    max_age_days: float | None = None
    keep_runs: int | None = None

    def __post_init__(self) -> None:
        if self.max_age_days is not None and self.max_age_days < 0:
            raise ValueError(f"max_age_days={self.max_age_days}: give a number of days >= 0")
        if self.keep_runs is not None and self.keep_runs < 1:
            raise ValueError(f"keep_runs={self.keep_runs}: keep at least the newest run (1)")

    @property
    def active(self) -> bool:
        return self.max_age_days is not None or self.keep_runs is not None


@dataclass(frozen=True)
class Item:
    """One thing retention may remove: a run folder, a damaged copy, a history file, an archive or an events folder."""

    path: str
    kind: str  # "run", "damaged", "history", "src", "envs", "cache", "tensorboard"
    group: str  # runs of the same task, the damaged copies of one run, ...
    used: float  # seconds since the epoch: the latest of modification and access
    protected: str = ""  # why it must stay ("" when it may go)


def _older(item: Item, policy: Policy, wall_now: float) -> bool:
    return policy.max_age_days is not None and wall_now - item.used > policy.max_age_days * _DAY_S


def plan(items: Iterable[Item], policy: Policy, wall_now: float) -> list[tuple[Item, str]]:
    """What to remove, each with the reason in words.

    ``wall_now`` is the wall clock (``time.time()``, seconds since the epoch), as HDFS's
    modification and access times are: not the monotonic ``now`` the follow and AM cores take.

    Age applies to everything; the count (``keep_runs``) to each task's runs.
    The newest run of every task stays whatever its age (its retry resumes
    from it), as does every protected item; what lies inside a folder that
    goes is not listed again.
    """
    groups: dict[tuple[str, str], list[Item]] = {}
    for item in items:
        groups.setdefault((item.kind, item.group), []).append(item)
    removals: list[tuple[Item, str]] = []
    for (kind, _group), members in sorted(groups.items()):
        members.sort(key=lambda i: (i.used, i.path), reverse=True)
        for rank, item in enumerate(members):
            if item.protected or (kind == "run" and rank == 0):
                continue
            if kind == "run" and policy.keep_runs is not None and rank >= policy.keep_runs:
                removals.append((item, f"beyond the newest {policy.keep_runs} runs of {item.group}"))
            elif _older(item, policy, wall_now):
                days = (wall_now - item.used) / _DAY_S
                removals.append((item, f"unused for {days:.1f} days (max_age_days {policy.max_age_days:g})"))
    gone = {item.path.rstrip("/") + "/" for item, _why in removals}
    return [(item, why) for item, why in removals if not any(item.path.startswith(g) for g in gone)]


def _used(status: dict[str, Any]) -> float:
    return max(int(status.get("modificationTime") or 0), int(status.get("accessTime") or 0)) / 1000.0


def _children(client: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    if client.status(path, strict=False) is None:
        return []
    return [(posixpath.join(path, name), status) for name, status in client.list(path, status=True)]


def _guarded(folder: str, protect: set[str]) -> str:
    """Why ``folder`` must stay because of ``protect``: a protected path is it or inside it."""
    for path in sorted(protect):
        if path == folder or path.startswith(folder.rstrip("/") + "/"):
            return f"{path} is protected"
    return ""


#: The identity tags the operator gives each application (``operators/identity.py``), in folder order.
_IDENTITY = ("tony-dag", "tony-task", "tony-run")
_HASHED = "sha1-"  # a tag value too long for YARN is its hash: the folder cannot be told from it


def active_folders(base_path: str, running: Iterable[Iterable[str]]) -> list[str]:
    """The checkpoint folders of running applications, from their tags (lower-cased, as YARN keeps tags).

    ``running``: each running application's tags (the cluster-wide list of this
    provider's applications, not only the caller's). An application's folder is
    ``<base>/checkpoints/<dag>/<task>/<run>[/map-<i>]`` as the operator names it;
    where a tag was too long and YARN holds only its hash, the folder above it is
    given instead (all its runs stay: nothing is lost).
    """
    base = hdfs_path(base_path).rstrip("/").lower()
    out: list[str] = []
    for tags in running:
        values = dict(t.split(":", 1) for t in tags if ":" in t)
        if not all(k in values for k in _IDENTITY):
            continue  # not submitted by the operator (tony submit): its folders are not named by tags
        parts: list[str] = []
        for key in _IDENTITY:
            if values[key].startswith(_HASHED):
                break
            parts.append(re.sub(r"[^a-z0-9._-]", "_", values[key]))
        else:
            if values.get("tony-map", "-1") not in ("-1", "none"):
                parts.append(f"map-{values['tony-map']}")
        if parts:
            out.append("/".join([base, "checkpoints", *parts]))
    return sorted(set(out))


def _running(folder: str, active: Iterable[str]) -> str:
    """Why ``folder`` must stay because a running application uses it (it, inside it, or above it)."""
    low = folder.rstrip("/").lower()
    for path in sorted(active):
        if low == path or low.startswith(path + "/") or path.startswith(low + "/"):
            return f"a running application uses {path}"
    return ""


def _holds_model(client: Any, folder: str, protect: set[str], active: set[str] | frozenset[str] = frozenset()) -> str:
    """Why ``folder`` must stay: it holds a published model, a running application uses it, or a protected
    path is inside it."""
    if guarded := _guarded(folder, protect) or _running(folder, active):
        return guarded
    for root, _dirs, files in client.walk(folder):
        if _MODEL_METADATA in files:
            return f"{root} holds a published model"
    return ""


def scan_task(client: Any, task_folder: str, protect: Iterable[str] = (), active: Iterable[str] = ()) -> list[Item]:
    """One task's run folders (``<base_path>/checkpoints/<dag>/<task>/<run>``) and their damaged copies.

    ``active``: running applications' folders (:func:`active_folders`), kept whatever their age or rank.
    """
    guarded = {hdfs_path(p).rstrip("/") for p in protect}
    running = {hdfs_path(p).rstrip("/").lower() for p in active}
    items: list[Item] = []
    for run, status in _children(client, hdfs_path(task_folder).rstrip("/")):
        if status["type"] != "DIRECTORY":
            continue
        items.append(Item(run, "run", task_folder, _used(status), _holds_model(client, run, guarded, running)))
        for name, inner in _children(client, run):
            if _DAMAGED.match(posixpath.basename(name)):
                items.append(Item(name, "damaged", run, _used(inner)))
    return items


def references_json(paths: Iterable[str]) -> bytes:
    """The references file's content: the HDFS paths (no scheme, no host) of every file an application localises."""
    return json.dumps({"version": 1, "paths": sorted({hdfs_path(p) for p in paths})}).encode()


def read_references(client: Any, app_dir: str) -> set[str] | None:
    """The files a running application named at submit, or None when they cannot be known.

    None (no file: submitted before references existed, or its folder is
    gone; a file that is not ours) makes :func:`scan` keep every staged file:
    what cannot be proven unused stays.
    """
    path = posixpath.join(hdfs_path(app_dir), REFERENCES_NAME)
    try:
        if client.status(path, strict=False) is None:
            return None
        with client.read(path) as reader:
            raw: bytes = reader.read(MAX_REFERENCES_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_REFERENCES_BYTES else None
    except (OSError, ValueError, ClusterError):  # unreadable now: unknown, so everything staged stays
        return None
    if not isinstance(data, dict) or not isinstance(data.get("paths"), list):
        return None
    return {p for p in data["paths"] if isinstance(p, str)}


def _localised(path: str, referenced: set[str] | None) -> str:
    """Why a staged file must stay because a running application may localise it again."""
    if referenced is None:
        return "a running application's references could not be read: every staged file stays"
    return "a running application localises it" if path in referenced else ""


def scan(
    client: Any,
    base_path: str,
    protect: Iterable[str] = (),
    active: Iterable[str] = (),
    referenced: Iterable[str] | None = (),
) -> list[Item]:
    """Everything under ``base_path`` that retention may consider (one listing per folder level).

    ``referenced``: the files running applications localise (:func:`read_references`
    of each, joined), kept whatever their age; None when one of them is unknown.
    """
    base = hdfs_path(base_path).rstrip("/")
    named = None if referenced is None else {hdfs_path(p) for p in referenced}
    guarded = {hdfs_path(p).rstrip("/") for p in protect}
    running = list(active)
    items: list[Item] = []
    for dag, dag_status in _children(client, f"{base}/checkpoints"):
        if dag_status["type"] != "DIRECTORY":
            continue
        for task, task_status in _children(client, dag):
            if task_status["type"] == "DIRECTORY":
                items += scan_task(client, task, guarded, running)
    for path, status in _children(client, f"{base}/history"):
        if status["type"] == "FILE" and path.endswith(".json"):
            items.append(Item(path, "history", f"{base}/history", _used(status)))
    for path, status in _children(client, f"{base}/tensorboard"):
        if status["type"] == "DIRECTORY":
            items.append(Item(path, "tensorboard", f"{base}/tensorboard", _used(status), _guarded(path, guarded)))
    for kind in _STAGED:
        for path, status in _children(client, f"{base}/{kind}"):
            if status["type"] == "FILE":
                items.append(Item(path, kind, f"{base}/{kind}", _used(status), _localised(path, named)))
    return items


def remove(client: Any, removals: list[tuple[Item, str]]) -> list[str]:
    """Delete what :func:`plan` chose; returns the paths removed."""
    done = []
    for item, _why in removals:
        client.delete(item.path, recursive=True)
        done.append(item.path)
    return done
