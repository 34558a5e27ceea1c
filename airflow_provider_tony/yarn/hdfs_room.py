"""Before submit: may the job's user write its HDFS folders, and is there room under their quotas?

A checkpoint or model folder over its space quota, or one the job's user may
not write, fails the job for good once it runs (``runtime/hdfs_refusal.py``):
after its containers were allocated, its interpreter started and its first
steps trained. Both are facts the NameNode tells before anything is
submitted, so they are asked here, for every folder the job will write:

- **permission**: WebHDFS ``CHECKACCESS`` with ``fsaction=-w-`` on the folder,
  or on its nearest existing ancestor when the folder does not exist yet (the
  job creates it there). The NameNode answers for the caller, who is the
  job's user (the same ``user.name`` or Kerberos principal submits and runs).
- **quota headroom**: ``GETQUOTAUSAGE`` (``GETCONTENTSUMMARY`` where the
  NameNode lacks it) on that folder and each ancestor up to ``/``, since any
  of their quotas binds. HDFS reserves a whole block times the replication
  for each block it allocates, so a space quota with less than that left
  refuses the first write however small the file; the need is the cluster's
  block size times its replication (``GETSERVERDEFAULTS``). A name quota with
  no name left refuses the first file.

A refusal names the job's field, the folder, and the NameNode's numbers.
Other trouble asking (an old NameNode without an operation, a flaky answer)
is no refusal: the runtime still recognises a refusal when it happens.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Any

from airflow_provider_tony.runtime.errors import ClusterError, ClusterForbidden, NotFound, SpecError
from airflow_provider_tony.yarn.rest import WebHdfs

__all__ = ["Folder", "QuotaUse", "check_room", "headroom_problem"]

log = logging.getLogger(__name__)

#: What one block costs under a space quota when the NameNode's defaults cannot be read.
FALLBACK_BLOCK_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Folder:
    """One folder the job will write, and the JobSpec or connection field that names it."""

    field: str
    path: str


@dataclass(frozen=True)
class QuotaUse:
    """A folder's quotas and what is used below it (-1: no quota), as the NameNode counts them."""

    path: str
    space_quota: int = -1
    space_consumed: int = 0
    name_quota: int = -1
    names_used: int = 0

    @classmethod
    def from_answer(cls, path: str, data: Any) -> QuotaUse:
        """From GETQUOTAUSAGE's ``QuotaUsage`` or GETCONTENTSUMMARY's ``ContentSummary``."""
        body: dict[str, Any] = {}
        if isinstance(data, dict):
            body = data.get("QuotaUsage") or data.get("ContentSummary") or {}
        names = body.get("fileAndDirectoryCount")
        if names is None:  # a content summary counts files and folders apart
            names = int(body.get("fileCount") or 0) + int(body.get("directoryCount") or 0)
        return cls(
            path=path,
            space_quota=int(body.get("spaceQuota", -1)),
            space_consumed=int(body.get("spaceConsumed") or 0),
            name_quota=int(body.get("quota", -1)),
            names_used=int(names or 0),
        )


def headroom_problem(use: QuotaUse, needed_bytes: int) -> str | None:
    """What a folder's quotas leave too little of for one more block and one more file; None: room."""
    if use.space_quota >= 0 and use.space_quota - use.space_consumed < needed_bytes:
        left = max(use.space_quota - use.space_consumed, 0)
        return (
            f"the space quota of {use.path} has {left} bytes left (spaceQuota {use.space_quota}, "
            f"spaceConsumed {use.space_consumed}); HDFS needs {needed_bytes} (a block times the replication) "
            "to write any file"
        )
    if use.name_quota >= 0 and use.name_quota - use.names_used < 1:
        return (
            f"the name quota of {use.path} is used up (quota {use.name_quota}, fileAndDirectoryCount {use.names_used})"
        )
    return None


def _nearest_existing(fs: WebHdfs, path: str) -> str:
    folder = posixpath.normpath(fs.resolve(path)) or "/"
    while folder != "/" and fs.status(folder, strict=False) is None:
        folder = posixpath.dirname(folder)
    return folder


def _ancestors(folder: str) -> list[str]:
    out = [folder]
    while folder != "/":
        folder = posixpath.dirname(folder)
        out.append(folder)
    return out


def _needed_bytes(fs: WebHdfs) -> int:
    try:
        defaults = fs._op("GET", "/", "GETSERVERDEFAULTS").json().get("FsServerDefaults") or {}
        return int(defaults["blockSize"]) * max(int(defaults.get("replication") or 1), 1)
    except (ClusterError, KeyError, TypeError, ValueError) as exc:
        log.info("the NameNode's block size and replication not read (%s): assuming one 128 MiB block", exc)
        return FALLBACK_BLOCK_BYTES


def _quota_use(fs: WebHdfs, path: str) -> QuotaUse | None:
    for op in ("GETQUOTAUSAGE", "GETCONTENTSUMMARY"):
        try:
            return QuotaUse.from_answer(path, fs._op("GET", path, op).json())
        except ClusterForbidden:
            return None  # may not look: a quota there still refuses at run time (and is recognised then)
        except ClusterError as exc:  # an older NameNode lacks GETQUOTAUSAGE (HTTP 400)
            log.debug("WebHDFS %s %s: %s", op, path, exc)
    return None


def _may_write(fs: WebHdfs, folder: str) -> str | None:
    """None when the caller may write ``folder``; else the NameNode's refusal."""
    try:
        fs._op("GET", folder, "CHECKACCESS", fsaction="-w-")
    except ClusterForbidden as exc:  # 403 AccessControlException
        return str(exc)
    except NotFound:  # removed meanwhile: the runtime creates it
        return None
    except ClusterError as exc:  # an older NameNode without CHECKACCESS: no answer is no refusal
        log.debug("WebHDFS CHECKACCESS %s: %s", folder, exc)
    return None


def check_room(fs: WebHdfs, folders: list[Folder]) -> None:
    """Refuse the job (``SpecError``, nothing submitted) when a folder is not writable or has no room."""
    needed: int | None = None
    uses: dict[str, QuotaUse | None] = {}
    for folder in folders:
        target = posixpath.normpath(fs.resolve(folder.path))
        existing = _nearest_existing(fs, target)
        where = target if existing == target else f"{target} (its nearest existing ancestor {existing})"
        denied = _may_write(fs, existing)
        if denied is not None:
            raise SpecError(
                folder.field,
                f"{where} is not writable by the job's user: {denied}; choose a folder the "
                "job's user may write, or have its owner grant write access",
            )
        for path in _ancestors(existing):
            if path not in uses:
                uses[path] = _quota_use(fs, path)
            use = uses[path]
            if use is None or (use.space_quota < 0 and use.name_quota < 0):
                continue
            needed = _needed_bytes(fs) if needed is None else needed
            problem = headroom_problem(use, needed)
            if problem is not None:
                raise SpecError(
                    folder.field,
                    f"no room to write {target}: {problem}; raise the quota "
                    "(hdfs dfsadmin -setSpaceQuota / -setQuota), free space there, or choose another folder",
                )
