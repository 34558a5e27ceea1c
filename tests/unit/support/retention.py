"""Stands in for an HDFS tree of old runs and models with times, for ``tony gc``'s retention tests.

``TimedHdfs`` answers with HDFS's millisecond times taken from the local files;
``plant`` ages a file; ``planted`` lists what is left.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from airflow_provider_tony.retention import Item
from airflow_provider_tony.runtime import gate
from tests.unit.support.hdfs import FakeHdfs

NOW = time.time()  # the fake HDFS takes its times from the local files: removing one touches its folder now


DAY = 86400.0


BASE = "/user/airflow/tony"


class TimedHdfs(FakeHdfs):
    """``list(status=True)`` and ``status`` with HDFS's millisecond times, from the local files' mtimes."""

    def _times(self, path: Path) -> dict[str, Any]:
        return {"modificationTime": int(path.stat().st_mtime * 1000), "accessTime": 0}

    def resolve(self, path: str) -> str:
        """WebHDFS's home-relative paths, for the user ``tony gc`` runs as."""
        return path if path.startswith("/") else f"/user/airflow/{path}"

    def list(self, path: str, status: bool = False) -> list[Any]:
        names = super().list(path, status=status)
        if not status:
            return names
        return [(n, {**st, **self._times(self._p(path) / n)}) for n, st in names]


def plant(hdfs: TimedHdfs, path: str, age_days: float, data: bytes | None = b"x") -> None:
    """A file (or, with ``data=None``, a folder) at ``path`` last changed ``age_days`` ago."""
    target = hdfs.root / path.lstrip("/")
    if data is None:
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    when = NOW - age_days * DAY
    os.utime(target, (when, when))


def planted(tmp_path: Path) -> TimedHdfs:
    hdfs = TimedHdfs(tmp_path / "hdfs")
    runs = f"{BASE}/checkpoints/nightly/train"
    plant(hdfs, f"{runs}/run0/model/{gate.MODEL_METADATA}", 100)  # a model published inside a run folder
    plant(hdfs, f"{runs}/run1/ckpt-000000000010/ckpt-10.index", 40)
    plant(hdfs, f"{runs}/run2/ckpt-000000000010/ckpt-10.index", 20)
    plant(hdfs, f"{runs}/run3/ckpt-000000000010.damaged-1-0-7/ckpt-10.index", 40)
    plant(hdfs, f"{runs}/run3/ckpt-000000000020/ckpt-20.index", 1)
    plant(hdfs, f"{BASE}/checkpoints/nightly/evaluate/only/ckpt-000000000010/ckpt-10.index", 100)
    plant(hdfs, f"{BASE}/history/application_1_0001.json", 40)
    plant(hdfs, f"{BASE}/history/application_1_0002.json", 1)
    plant(hdfs, f"{BASE}/src/aaaa.tar.gz", 40)
    plant(hdfs, f"{BASE}/envs/bbbb.tar.gz", 2)
    plant(hdfs, f"{BASE}/cache/tony_runtime-old.zip", 40)
    plant(hdfs, f"{BASE}/cache/launch-new.sh", 1)
    # folder times last: writing inside a folder changes its mtime
    for run, age in (("run0", 100), ("run1", 40), ("run2", 20), ("run3", 1)):
        plant(hdfs, f"{runs}/{run}", age, data=None)
    plant(hdfs, f"{runs}/run3/ckpt-000000000010.damaged-1-0-7", 40, data=None)
    plant(hdfs, f"{BASE}/checkpoints/nightly/evaluate/only", 100, data=None)
    return hdfs


def names(removals: list[tuple[Item, str]]) -> set[str]:
    return {item.path.removeprefix(f"{BASE}/") for item, _why in removals}
