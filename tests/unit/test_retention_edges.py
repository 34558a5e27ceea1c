"""Retention's edges (``retention.py``) that mutation testing found unguarded.

What ``--protect`` guards (a folder holding a protected path, not only the path
itself) and what "used" means (HDFS's access time counts as well as its
modification time), on ``test_retention``'s timed fake HDFS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony import retention
from airflow_provider_tony.retention import Policy, plan
from tests.unit.support.retention import BASE, DAY, NOW, TimedHdfs, names, plant, planted

RUNS = f"{BASE}/checkpoints/nightly/train"


def test_protect_guards_every_folder_holding_a_protected_path_and_only_those(tmp_path: Path) -> None:
    hdfs = planted(tmp_path)
    inside = f"{RUNS}/run2/ckpt-000000000010"
    items = {i.path: i.protected for i in retention.scan(hdfs, BASE, protect=[inside, f"{RUNS}/run1x"])}
    assert items[f"{RUNS}/run2"] == f"{inside} is protected", "run2 holds a protected path"
    assert items[f"{RUNS}/run1"] == "", "a protected run1x is not inside run1"
    assert names(plan(retention.scan(hdfs, BASE, protect=[inside]), Policy(keep_runs=1), NOW)) == {
        "checkpoints/nightly/train/run1"
    }


class AccessedHdfs(TimedHdfs):
    """HDFS's ``accessTime`` set by hand per path (the local files' atimes are not reliable)."""

    def __init__(self, root: Path, accessed: dict[str, float]) -> None:
        super().__init__(root)
        self.accessed = accessed

    def list(self, path: str, status: bool = False) -> list[Any]:
        listed = super().list(path, status=status)
        if not status:
            return listed
        return [
            (n, {**st, "accessTime": int(self.accessed.get(f"{path.rstrip('/')}/{n}", 0) * 1000)}) for n, st in listed
        ]


def test_an_item_read_lately_counts_as_used_though_written_long_ago(tmp_path: Path) -> None:
    """A staged archive jobs still localise is read, not written: its access time keeps it."""
    read, unread = f"{BASE}/src/read.tar.gz", f"{BASE}/src/unread.tar.gz"
    hdfs = AccessedHdfs(tmp_path / "hdfs", {read: NOW - 1 * DAY, unread: NOW - 50 * DAY})
    plant(hdfs, read, 40)
    plant(hdfs, unread, 40)
    used = {i.path: i.used for i in retention.scan(hdfs, BASE)}
    assert abs(used[read] - (NOW - DAY)) < 1 and abs(used[unread] - (NOW - 40 * DAY)) < 1, "the later of the two"
    assert names(plan(retention.scan(hdfs, BASE), Policy(max_age_days=30), NOW)) == {"src/unread.tar.gz"}


def test_scan_names_each_item_by_kind_and_group_and_skips_what_is_not_retentions(tmp_path: Path) -> None:
    hdfs = planted(tmp_path)
    plant(hdfs, f"{BASE}/checkpoints/000-stray.txt", 40)  # files among the folders, listed first
    plant(hdfs, f"{RUNS}/000-stray.txt", 40)
    plant(hdfs, f"{BASE}/history/notes.txt", 40)  # not a history file
    plant(hdfs, f"{BASE}/tensorboard/application_1_0009/events.out.tfevents.1.h", 40)
    items = {
        (i.path.removeprefix(f"{BASE}/"), i.kind, i.group.removeprefix(f"{BASE}/")) for i in retention.scan(hdfs, BASE)
    }
    assert items == {
        ("checkpoints/nightly/evaluate/only", "run", "checkpoints/nightly/evaluate"),
        *((f"checkpoints/nightly/train/run{i}", "run", "checkpoints/nightly/train") for i in range(4)),
        (
            "checkpoints/nightly/train/run3/ckpt-000000000010.damaged-1-0-7",
            "damaged",
            "checkpoints/nightly/train/run3",
        ),
        ("history/application_1_0001.json", "history", "history"),
        ("history/application_1_0002.json", "history", "history"),
        ("tensorboard/application_1_0009", "tensorboard", "tensorboard"),
        ("src/aaaa.tar.gz", "src", "src"),
        ("envs/bbbb.tar.gz", "envs", "envs"),
        ("cache/tony_runtime-old.zip", "cache", "cache"),
        ("cache/launch-new.sh", "cache", "cache"),
    }
    assert {i.path for i in retention.scan(hdfs, BASE + "/")} == {f"{BASE}/{p}" for p, _k, _g in items}
    direct = retention.scan_task(hdfs, RUNS + "/", protect=[f"hdfs://nn:8020{RUNS}/run2/"])
    assert {i.path.removeprefix(f"{RUNS}/"): i.protected != "" for i in direct if i.kind == "run"} == {
        "run0": True,  # holds a model
        "run1": False,
        "run2": True,  # protected, named with a trailing slash
        "run3": False,
    }
    removals = plan(retention.scan(hdfs, BASE), Policy(max_age_days=30), NOW)
    assert retention.remove(hdfs, removals) == [item.path for item, _why in removals] and removals


def test_age_is_strictly_over_the_limit_and_the_policy_takes_any_age_from_zero() -> None:
    at_limit = retention.Item("/b/history/a.json", "history", "/b/history", NOW - 30 * DAY)
    over = retention.Item("/b/history/b.json", "history", "/b/history", NOW - 30 * DAY - 1)
    assert [i.path for i, _ in plan([at_limit, over], Policy(max_age_days=30), NOW)] == ["/b/history/b.json"]
    assert Policy(max_age_days=0).active and Policy(max_age_days=0.5).max_age_days == 0.5
    with pytest.raises(ValueError, match=r"max_age_days=-1: give a number of days >= 0"):
        Policy(max_age_days=-1)
