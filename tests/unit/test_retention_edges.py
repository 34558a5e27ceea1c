"""Retention's edges (``runtime/retention.py``) that mutation testing found unguarded.

What ``--protect`` guards (a folder holding a protected path, not only the path
itself) and what "used" means (HDFS's access time counts as well as its
modification time), on ``test_retention``'s timed fake HDFS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import retention
from airflow_provider_tony.runtime.retention import Policy, plan
from tests.unit.test_retention import BASE, DAY, NOW, TimedHdfs, names, plant, planted

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
