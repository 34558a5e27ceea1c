"""The HDFS partition watcher (``triggers/hdfs_partition.py``): its decision, its walk and its memory.

``decide`` and ``scan`` are pure over a listing; the trigger's ``run`` is driven here
with a fake asset state store standing in for Airflow's (what the triggerer injects),
so a "restart" is a second trigger over the same store.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.triggers import hdfs_partition
from airflow_provider_tony.triggers.hdfs_partition import HdfsPartitionTrigger, Partition, decide, scan

ROOT = "/data/digits"


class Listing:
    """A WebHDFS stand-in over a dict of paths: folders (None) and files (bytes), each with an mtime."""

    def __init__(self, entries: dict[str, int]) -> None:
        self.entries = dict(entries)  # path -> modification time (ms); a path ending in a file name is a file
        self.calls: list[tuple[str, str]] = []

    def _is_dir(self, path: str) -> bool:
        return any(p.startswith(path.rstrip("/") + "/") for p in self.entries) or path == "/"

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        self.calls.append(("status", path))
        if path in self.entries or self._is_dir(path):
            return {"type": "DIRECTORY" if self._is_dir(path) else "FILE"}
        return None

    def list(self, path: str, status: bool = False) -> list[Any]:
        self.calls.append(("list", path))
        prefix = path.rstrip("/") + "/"
        names: dict[str, dict[str, Any]] = {}
        for p, mtime in self.entries.items():
            if p.startswith(prefix):
                name = p[len(prefix) :].split("/", 1)[0]
                child = prefix + name
                kind = "DIRECTORY" if self._is_dir(child) else "FILE"
                names[name] = {"type": kind, "modificationTime": self.entries.get(child, mtime)}
        return sorted(names.items()) if status else sorted(names)


def part(name: str, complete: bool = True, modified: int = 0) -> Partition:
    return Partition(f"{ROOT}/{name}", modified, complete)


# --------------------------------------------------------------------------- decide
def test_the_first_start_remembers_what_is_there_and_fires_nothing() -> None:
    found = [part("day=1"), part("day=2"), part("day=3", complete=False)]
    new, fired = decide(found, None, fire_existing=False)
    assert new == [] and fired == {f"{ROOT}/day=1", f"{ROOT}/day=2"}, "the incomplete one is not remembered"
    new, fired = decide(found, None, fire_existing=True)
    assert [p.path for p in new] == [f"{ROOT}/day=1", f"{ROOT}/day=2"]


def test_a_partition_fires_once_when_it_becomes_complete_and_again_only_when_rewritten() -> None:
    fired: set[str] | None = set()
    new, fired = decide([part("day=1", complete=False)], fired, fire_existing=False)
    assert new == [] and fired == set(), "not complete yet: it waits"
    new, fired = decide([part("day=1")], fired, fire_existing=False)
    assert [p.path for p in new] == [f"{ROOT}/day=1"]
    new, fired = decide([part("day=1"), part("day=2")], fired, fire_existing=False)
    assert [p.path for p in new] == [f"{ROOT}/day=2"], "day=1 does not fire twice"
    new, fired = decide([part("day=2")], fired, fire_existing=False)
    assert new == [] and fired == {f"{ROOT}/day=2"}, "a partition gone is forgotten"
    new, fired = decide([part("day=1"), part("day=2")], fired, fire_existing=False)
    assert [p.path for p in new] == [f"{ROOT}/day=1"], "written again, it is new data"


def test_what_is_remembered_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hdfs_partition, "MAX_REMEMBERED", 2)
    new, fired = decide([part("day=1"), part("day=2"), part("day=3")], set(), fire_existing=False)
    assert len(new) == 3 and fired == {f"{ROOT}/day=2", f"{ROOT}/day=3"}, "the newest by path stay"


def test_the_payload_carries_the_partition_and_its_hive_values() -> None:
    p = Partition(f"{ROOT}/region=eu/day=2026-11-02", 5, True)
    assert p.payload(f"{ROOT}/*/day=*") == {
        "partition": f"{ROOT}/region=eu/day=2026-11-02",
        "name": "day=2026-11-02",
        "values": {"region": "eu", "day": "2026-11-02"},
        "modified_ms": 5,
        "watched": f"{ROOT}/*/day=*",
    }


# --------------------------------------------------------------------------- scan
def test_globs_match_folders_at_any_level_and_markers_are_asked_only_of_new_ones() -> None:
    hdfs = Listing(
        {
            f"{ROOT}/region=eu/day=1/_SUCCESS": 10,
            f"{ROOT}/region=eu/day=2/part-0": 20,  # no marker yet
            f"{ROOT}/region=us/day=1/_SUCCESS": 30,
            f"{ROOT}/region=us/notes.txt": 40,  # a file: never a partition
            f"{ROOT}/other/day=9/_SUCCESS": 50,  # region=* does not match it
        }
    )
    found = scan(hdfs, f"{ROOT}/region=*/day=*", marker="_SUCCESS", quiet_period=None, now_ms=0)
    assert [(p.path, p.complete) for p in found] == [
        (f"{ROOT}/region=eu/day=1", True),
        (f"{ROOT}/region=eu/day=2", False),
        (f"{ROOT}/region=us/day=1", True),
    ]
    hdfs.calls.clear()
    known = {f"{ROOT}/region=eu/day=1", f"{ROOT}/region=us/day=1"}
    scan(hdfs, f"{ROOT}/region=*/day=*", marker="_SUCCESS", quiet_period=None, now_ms=0, known=known)
    markers = [path for op, path in hdfs.calls if op == "status" and path.endswith("_SUCCESS")]
    assert markers == [f"{ROOT}/region=eu/day=2/_SUCCESS"], "a known partition costs no call of its own"


def test_without_a_marker_a_folder_is_complete_after_its_quiet_period() -> None:
    hdfs = Listing(
        {f"{ROOT}/day=1/part-0": 1000, f"{ROOT}/day=1": 1000, f"{ROOT}/day=2/part-0": 5000, f"{ROOT}/day=2": 5000}
    )
    found = scan(hdfs, f"{ROOT}/day=*", marker=None, quiet_period=4, now_ms=5000 + 3999)
    assert [(p.name, p.complete) for p in [_Named(x) for x in found]] == [("day=1", True), ("day=2", False)]
    found = scan(hdfs, f"{ROOT}/day=*", marker=None, quiet_period=4, now_ms=5000 + 4000)
    assert all(p.complete for p in found), "exactly the quiet period: complete"


class _Named:
    def __init__(self, p: Partition) -> None:
        self.name, self.complete = p.path.rsplit("/", 1)[1], p.complete


def test_a_missing_root_is_no_partition() -> None:
    assert scan(Listing({}), f"{ROOT}/day=*", marker="_SUCCESS", quiet_period=None, now_ms=0) == []


# --------------------------------------------------------------------------- the trigger
class Store:
    """Airflow's asset state store as the triggerer hands it to an event trigger (``aget``/``aset``)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    async def aget(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    async def aset(self, key: str, value: Any) -> None:
        self.values[key] = value


def trigger(store: Store | None, listing: Listing) -> HdfsPartitionTrigger:
    t = HdfsPartitionTrigger(path=f"hdfs://nn:8020{ROOT}/day=*", poll_interval=0.01)
    t.asset_state_store = store  # type: ignore[assignment]
    t.scans = 0  # type: ignore[attr-defined]

    def counted(known: set[str]) -> list[Partition]:
        t.scans += 1  # type: ignore[attr-defined]
        return scan(listing, t.path, marker=t.marker, quiet_period=None, now_ms=0, known=known)

    t._scan = counted  # type: ignore[method-assign]
    return t


def events(t: HdfsPartitionTrigger, polls: int = 3, stop_after: int | None = None) -> list[str]:
    """The partitions the trigger fired in its first ``polls`` looks; with ``stop_after``, the trigger is
    stopped at that event (closed at its ``yield``, as a triggerer restart leaves it)."""
    out: list[str] = []

    async def collect() -> None:
        async for event in t.run():
            out.append(event.payload["partition"])
            if len(out) == stop_after:
                return

    async def go() -> None:
        task = asyncio.create_task(collect())
        deadline = asyncio.get_running_loop().time() + 10
        # A look is over when the next one starts: its events were all taken by then.
        while not task.done() and t.scans <= polls and asyncio.get_running_loop().time() < deadline:  # type: ignore[attr-defined]
            await asyncio.sleep(0.005)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(go())
    return out


def test_a_restarted_triggerer_fires_only_the_partitions_that_are_new() -> None:
    store = Store()
    listing = Listing({f"{ROOT}/day=1/_SUCCESS": 1})
    assert events(trigger(store, listing)) == [], "day=1 was there at the first start"
    listing.entries[f"{ROOT}/day=2/_SUCCESS"] = 2
    assert events(trigger(store, listing), stop_after=1) == [f"{ROOT}/day=2"], "stopped right at the event"
    listing.entries[f"{ROOT}/day=3/_SUCCESS"] = 3
    # "restarted": a new trigger over the same store
    assert events(trigger(store, listing)) == [f"{ROOT}/day=3"], "day=2 does not fire again"
    (key,) = store.values
    assert key.startswith("tony-hdfs-partitions:") and store.values[key] == [f"{ROOT}/day={i}" for i in (1, 2, 3)]


def test_without_a_store_the_trigger_remembers_in_memory() -> None:
    listing = Listing({f"{ROOT}/day=1/_SUCCESS": 1})
    t = trigger(None, listing)

    async def go() -> list[str]:
        out: list[str] = []

        async def collect() -> None:
            async for event in t.run():
                out.append(event.payload["partition"])
                listing.entries[f"{ROOT}/day=3/_SUCCESS"] = 3

        task = asyncio.create_task(collect())
        await asyncio.sleep(0.05)
        listing.entries[f"{ROOT}/day=2/_SUCCESS"] = 2
        for _ in range(400):
            if len(out) >= 2:
                break
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)  # more polls: nothing fires twice
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return out

    assert asyncio.run(go()) == [f"{ROOT}/day=2", f"{ROOT}/day=3"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"path": "data/../day=*"}, "path"),  # relative to base_path, but still no way out of it
        ({"path": ""}, "path"),
        ({"path": "/data/../x/day=*"}, "path"),
        ({"path": "/d/day=*", "marker": None}, "marker"),
        ({"path": "/d/day=*", "marker": "a/b"}, "marker"),
        ({"path": "/d/day=*", "marker": None, "quiet_period": -1}, "quiet_period"),
        ({"path": "/d/day=*", "poll_interval": 0}, "poll_interval"),
    ],
)
def test_bad_arguments_are_refused_at_parse_time_naming_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError, match=rf"^{field}: "):
        HdfsPartitionTrigger(**kwargs)


def test_it_serialises_to_what_it_was_made_of() -> None:
    t = HdfsPartitionTrigger(path="hdfs://nn:8020/d/day=*", marker=None, quiet_period=30, fire_existing=True)
    classpath, kwargs = t.serialize()
    assert classpath == "airflow_provider_tony.triggers.hdfs_partition.HdfsPartitionTrigger"
    again = HdfsPartitionTrigger(**kwargs)
    assert again.serialize() == (classpath, kwargs) and kwargs["path"] == "/d/day=*"
    assert again.state_key == t.state_key
    assert HdfsPartitionTrigger(path="/d/day=*").state_key != t.state_key, "another rule, another memory"
    assert HdfsPartitionTrigger(path="data/d/dt=*/").path == "data/d/dt=*", "relative: resolved against base_path"
