"""One publisher at a time for a model folder: a lock file on HDFS.

Two runs judging the same ``model_dir`` at once would each compare with the
same previous model and both publish. WebHDFS CREATE with ``overwrite=false``
is atomic on the NameNode: of two gates creating ``<model_dir>.lock`` exactly
one succeeds; the other waits (polling the file, with backoff) until it is
gone. The file holds its holder's identity (application id, host, pid, time):

- the same application finds its own lock after a crash and carries on
  (its retry finishes what the dead attempt began);
- a lock older than ``stale_s`` is a dead gate's (a gate takes seconds) and is
  broken: deleted only if it is still the very file judged stale (same
  modification time), then created again, so of two breakers one wins;
- a live holder past ``wait_s``: the error names the file, its holder and the fix.

Released only by its holder (the file still names it).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from airflow_provider_tony.runtime.errors import LockBusy

__all__ = ["LockHolder", "LockBusy", "held", "release", "take"]

MAX_LOCK_BYTES = 4096


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock, as the file says."""

    application_id: str
    host: str = ""
    pid: int = 0
    taken_at: float = 0.0

    def to_json(self) -> bytes:
        return json.dumps(
            {"application_id": self.application_id, "host": self.host, "pid": self.pid, "taken_at": self.taken_at}
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> LockHolder | None:
        try:
            data = json.loads(raw[:MAX_LOCK_BYTES])
            return cls(
                str(data["application_id"])[:200],
                str(data.get("host", ""))[:200],
                int(data.get("pid", 0)),
                float(data.get("taken_at", 0.0)),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


def _read(client: Any, path: str) -> LockHolder | None:
    try:
        with client.read(path) as reader:
            raw: bytes = reader.read(MAX_LOCK_BYTES)
    except Exception:  # noqa: BLE001 - gone between the status and the read: the caller looks again
        return None
    return LockHolder.from_json(raw)


def _age(status: dict[str, Any], now: float) -> float | None:
    mtime = status.get("modificationTime")
    return now - float(mtime) / 1000.0 if isinstance(mtime, (int, float)) and mtime > 0 else None


def take(
    client: Any,
    path: str,
    owner: str,
    *,
    wait_s: float,
    stale_s: float,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Create the lock file ``path`` for application ``owner``, waiting for another holder to let go."""
    deadline = clock() + wait_s
    delay = 0.2
    while True:
        mine = LockHolder(owner, socket.gethostname(), os.getpid(), clock())
        try:
            client.write(path, data=mine.to_json(), overwrite=False)
            return
        except Exception:
            status = client.status(path, strict=False)
            if status is None:  # the create failed for another reason than the lock being taken
                raise
        holder = _read(client, path)
        if holder is not None and holder.application_id == owner:
            return  # our own attempt that died mid-publish: carry on where it stopped
        age = _age(status, clock())
        if age is not None and age > stale_s:
            again = client.status(path, strict=False)
            if again is not None and again.get("modificationTime") == status.get("modificationTime"):
                client.delete(path)
            continue
        if clock() >= deadline:
            who = (
                f"{holder.application_id} (host {holder.host}, pid {holder.pid})" if holder else "an unreadable holder"
            )
            raise LockBusy(
                f"{path} is held by {who}: another run is publishing this model. Retry later; if no run is "
                f"publishing (its worker died), the lock is broken when it is {stale_s:.0f} s old, or remove it "
                f"yourself: hdfs dfs -rm {path}"
            )
        sleep(delay)
        delay = min(delay * 2, 5.0)


def release(client: Any, path: str, owner: str) -> None:
    """Delete the lock if it still names ``owner`` (a lock broken as stale and retaken is not ours)."""
    holder = _read(client, path)
    if holder is not None and holder.application_id == owner:
        client.delete(path)


@contextlib.contextmanager
def held(client: Any, path: str, owner: str, *, wait_s: float, stale_s: float) -> Iterator[None]:
    """The lock held for the ``with`` block; released whatever the block raised."""
    take(client, path, owner, wait_s=wait_s, stale_s=stale_s)
    try:
        yield
    finally:
        release(client, path, owner)
