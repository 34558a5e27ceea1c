"""An asset watcher's trigger: fire once per new HDFS partition, whoever wrote it.

The nightly retrain is scheduled on an Asset; a partition that a Spark or Hive
job writes outside Airflow emits no asset event. Airflow 3's asset watchers
run a ``BaseEventTrigger`` in the triggerer and turn each of its events into
an asset event (``extra = {"from_trigger": true, "payload": ...}``), so a DAG
scheduled on the asset runs once per event.

:class:`HdfsPartitionTrigger` polls a path with globs (``/data/digits/day=*``)
through the provider's own WebHDFS client (the ``tony_yarn`` connection:
SPNEGO on a Kerberized cluster, every NameNode of an HA pair) and fires for
each matching folder once it is complete: its marker file (``_SUCCESS``, what
Spark and Hive write last) is there, or, with ``marker=None``, nothing in it
changed for ``quiet_period`` seconds. The partitions already fired are kept
in Airflow's asset state store (Airflow 3.3+; the triggerer hands it to event
triggers), written before the events are yielded, so a restarted triggerer
fires only what is new (a triggerer killed in the instant between the two
loses that event rather than firing it twice). On the first
start the complete partitions already there are recorded, not fired
(``fire_existing=True`` fires them).

The decision (:func:`decide`) and the folder walk (:func:`scan`) are plain
functions of their inputs, unit-tested at their edges; the trigger only
drives them from the event loop.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import logging
import posixpath
import re
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.hdfs_io import hdfs_path
from airflow_provider_tony.runtime.spec import hdfs_folder

__all__ = ["HdfsPartitionTrigger", "Partition", "decide", "scan"]

log = logging.getLogger(__name__)

#: The asset state store key prefix; the rest is a digest of what the trigger watches.
STATE_KEY_PREFIX = "tony-hdfs-partitions"
#: At most this many fired partitions are remembered (the newest by path): a state value must stay small.
MAX_REMEMBERED = 20_000
_GLOB = re.compile(r"[*?\[]")
_MARKER = re.compile(r"^[A-Za-z0-9._-]{1,255}$")


@dataclass(frozen=True)
class Partition:
    """One folder matching the watched path."""

    path: str
    modified_ms: int
    complete: bool

    @property
    def values(self) -> dict[str, str]:
        """The path's ``key=value`` components, as Hive names partitions (``day=2026-11-02`` -> ``{"day": ...}``)."""
        out: dict[str, str] = {}
        for part in self.path.strip("/").split("/"):
            key, sep, value = part.partition("=")
            if sep and key:
                out[key] = value
        return out

    def payload(self, pattern: str) -> dict[str, Any]:
        """The event's payload, which Airflow puts in the asset event's ``extra["payload"]``."""
        return {
            "partition": self.path,
            "name": posixpath.basename(self.path),
            "values": self.values,
            "modified_ms": self.modified_ms,
            "watched": pattern,
        }


def _split(pattern: str) -> tuple[str, list[str]]:
    """The literal folder a pattern starts from and its components from the first glob on."""
    parts = pattern.strip("/").split("/")
    for i, part in enumerate(parts):
        if _GLOB.search(part):
            return "/" + "/".join(parts[:i]), parts[i:]
    return "/" + "/".join(parts[:-1]), parts[-1:]


def scan(
    client: Any,
    pattern: str,
    *,
    marker: str | None,
    quiet_period: float | None,
    now_ms: int,
    known: set[str] | frozenset[str] = frozenset(),
) -> list[Partition]:
    """The folders matching ``pattern`` (globs in any component), each judged complete or not.

    One LISTSTATUS per folder walked; a marker is looked for (GETFILESTATUS)
    only in folders not ``known`` (already fired), so a poll of a thousand
    old partitions costs one listing, not a thousand calls.
    """
    base, globs = _split(pattern)
    level = [base if base != "/" else ""]
    for depth, glob in enumerate(globs):
        last = depth == len(globs) - 1
        found: list[tuple[str, dict[str, Any]]] = []
        for folder in level:
            if client.status(folder or "/", strict=False) is None:
                continue
            for name, status in client.list(folder or "/", status=True):
                if status.get("type") == "DIRECTORY" and fnmatch.fnmatchcase(name, glob):
                    found.append((f"{folder}/{name}", status))
        if not last:
            level = [path for path, _status in found]
            continue
        out = []
        for path, status in sorted(found):
            modified = int(status.get("modificationTime") or 0)
            if path in known:
                out.append(Partition(path, modified, True))
            elif marker is not None:
                out.append(Partition(path, modified, client.status(f"{path}/{marker}", strict=False) is not None))
            else:
                assert quiet_period is not None
                out.append(Partition(path, modified, now_ms - modified >= quiet_period * 1000))
        return out
    return []


def decide(found: list[Partition], fired: set[str] | None, *, fire_existing: bool) -> tuple[list[Partition], set[str]]:
    """Which partitions to fire now, and the set of fired ones to remember.

    ``fired`` None: the watcher's first start; the complete partitions there
    are remembered without firing unless ``fire_existing``. A partition fires
    once, when first seen complete; one that disappears is forgotten (written
    again, it is new data and fires again). Incomplete ones wait.
    """
    complete = [p for p in found if p.complete]
    if fired is None and not fire_existing:
        return [], {p.path for p in complete}
    before = fired or set()
    listed = {p.path for p in found}
    new = [p for p in complete if p.path not in before]
    remembered = {p for p in before if p in listed} | {p.path for p in new}
    if len(remembered) > MAX_REMEMBERED:
        remembered = set(sorted(remembered)[-MAX_REMEMBERED:])
    return new, remembered


class HdfsPartitionTrigger(BaseEventTrigger):
    """Fire once for each new complete HDFS folder matching ``path`` (an asset watcher's trigger).

    :param path: an HDFS path with globs: absolute (``/data/digits/day=*``; ``hdfs://`` URLs too) or
        relative to the connection's ``base_path`` (``data/digits/dt=*``), since a trigger's arguments are
        fixed when the DAG is parsed.
    :param yarn_conn_id: the ``tony_yarn`` connection whose WebHDFS is read.
    :param marker: the file that marks a partition complete (``_SUCCESS``); None uses ``quiet_period``.
    :param quiet_period: with ``marker=None``, seconds a folder must stay unchanged to count as complete.
    :param poll_interval: seconds between looks.
    :param fire_existing: fire for the complete partitions already there at the watcher's first start.
    """

    def __init__(
        self,
        *,
        path: str,
        yarn_conn_id: str = "tony_yarn_default",
        marker: str | None = "_SUCCESS",
        quiet_period: float | None = None,
        poll_interval: float = 60.0,
        fire_existing: bool = False,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__ has no annotations
        if isinstance(path, str) and path and not path.startswith(("/", "hdfs://")):
            hdfs_folder("/" + path, "path")  # the same component checks; resolved against base_path when run
            self.path = path.rstrip("/")
        else:
            self.path = hdfs_path(hdfs_folder(path, "path")).rstrip("/")
        if marker is None and quiet_period is None:
            raise SpecError("marker", "give a marker file (_SUCCESS) or, with marker=None, a quiet_period in seconds")
        if marker is not None and not _MARKER.match(marker):
            raise SpecError("marker", f"{marker!r} is not a file name; give one name such as _SUCCESS")
        if quiet_period is not None and (isinstance(quiet_period, bool) or not quiet_period >= 0):
            raise SpecError("quiet_period", f"{quiet_period!r}: give seconds >= 0")
        if isinstance(poll_interval, bool) or not poll_interval > 0:
            raise SpecError("poll_interval", f"{poll_interval!r}: give seconds > 0")
        self.yarn_conn_id = yarn_conn_id
        self.marker = marker
        self.quiet_period = None if quiet_period is None else float(quiet_period)
        self.poll_interval = float(poll_interval)
        self.fire_existing = bool(fire_existing)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "path": self.path,
                "yarn_conn_id": self.yarn_conn_id,
                "marker": self.marker,
                "quiet_period": self.quiet_period,
                "poll_interval": self.poll_interval,
                "fire_existing": self.fire_existing,
            },
        )

    @property
    def state_key(self) -> str:
        """The asset state store key: one per watched path and completeness rule."""
        digest = hashlib.sha256(f"{self.path}\0{self.marker}\0{self.quiet_period}".encode()).hexdigest()[:16]
        return f"{STATE_KEY_PREFIX}:{digest}"

    async def _load(self) -> set[str] | None:
        store = self.asset_state_store
        if store is None:
            log.warning("no asset state store (Airflow < 3.3 or not a watcher): fired partitions kept in memory only")
            return None
        try:
            value = await store.aget(self.state_key)
        except ValueError as exc:  # several watched assets: the store needs the asset named
            log.warning("asset state store unavailable (%s): fired partitions kept in memory only", exc)
            self.asset_state_store = None
            return None
        if not isinstance(value, list):
            return None
        return {p for p in value if isinstance(p, str)}

    async def _store(self, fired: set[str]) -> None:
        if self.asset_state_store is not None:
            value: list[Any] = sorted(fired)
            await self.asset_state_store.aset(self.state_key, value)

    def _scan(self, known: set[str]) -> list[Partition]:
        from airflow_provider_tony.hooks.yarn import YarnHook

        hook = YarnHook(self.yarn_conn_id)
        path = self.path if self.path.startswith("/") else f"{hook.base_path.rstrip('/')}/{self.path}"
        now_ms = int(time.time() * 1000)
        client = hook.webhdfs()
        return scan(client, path, marker=self.marker, quiet_period=self.quiet_period, now_ms=now_ms, known=known)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        fired = await self._load()
        stored = fired
        looks = 0
        while True:
            try:
                found = await asyncio.to_thread(self._scan, fired or set())
            except Exception as exc:  # noqa: BLE001 - HDFS away for a while: the watcher waits, it does not die
                log.warning("could not list %s: %s; looking again in %gs", self.path, exc, self.poll_interval)
            else:
                first = looks == 0
                new, fired = decide(found, fired, fire_existing=self.fire_existing)
                if first:  # said once per start: what it remembers, and that it now watches
                    log.info("watching %s: %d partitions already fired or there", self.path, len(fired))
                looks += 1
                # Remembered before the events go: a triggerer stopped right after an event (a restart
                # cancels the trigger there) must not fire it again.
                if fired != stored:
                    await self._store(fired)
                    stored = set(fired)
                for partition in new:
                    log.info("new partition %s", partition.path)
                    yield TriggerEvent(partition.payload(self.path))
            await asyncio.sleep(self.poll_interval)
