"""Each task's metric history, bounded, and where the final one is kept on HDFS.

The state document carries only each task's *latest* progress; the job page
draws curves, so the AM keeps every report the script made: each heartbeat
carries the script's recent reports (``progress.RECENT_POINTS``) and the AM
adds those newer than the last it kept. A long job reports many thousands of
steps: past ``max_points`` per task, or ``max_bytes`` of JSON, the history is
thinned by dropping every other point (the curve keeps its shape and its whole
time span), so memory and the page's size stay bounded however long the job
runs. The bounds per task shrink with the number of tasks (``points_per_task``,
``bytes_per_task``), so a job of a thousand tasks keeps about as much in all as
a job of ten: ``TOTAL_POINTS`` points and ``TOTAL_BYTES`` bytes.

When the job ends, the AM writes the final ``JobHistory`` to HDFS beside the
checkpoints (``<checkpoint.dir>/_tony/<app_id>.json``, a name the checkpoint
listing ignores) and, when the submitting side named one, into its history
folder (``<base_path>/history/<app_id>.json``), where ``tony status`` finds it
by application id alone after YARN has forgotten the application.
"""

from __future__ import annotations

import posixpath
from typing import Any

from airflow_provider_tony.runtime.hdfs_io import hdfs_path
from airflow_provider_tony.runtime.messages import JobHistory, Progress, StateDocument
from airflow_provider_tony.runtime.namenodes import pick

__all__ = [
    "DEFAULT_MAX_POINTS",
    "HISTORY_SUBDIR",
    "MetricHistory",
    "bytes_per_task",
    "history_paths",
    "points_per_task",
    "write_history",
]

DEFAULT_MAX_POINTS = 400
TOTAL_POINTS = 4000  # across all tasks: what the AM keeps, serialises and the page draws at most
DEFAULT_MAX_BYTES = 1 << 20  # one task's points as JSON
TOTAL_BYTES = 6 << 20  # across all tasks: the history stays well under MAX_HISTORY_BYTES beside its state document


def points_per_task(tasks: int) -> int:
    """Per-task bound: ``DEFAULT_MAX_POINTS``, less when many tasks share ``TOTAL_POINTS``."""
    return max(2, min(DEFAULT_MAX_POINTS, TOTAL_POINTS // max(1, tasks)))


def bytes_per_task(tasks: int) -> int:
    """Per-task bound on the points' JSON: ``DEFAULT_MAX_BYTES``, less when many tasks share ``TOTAL_BYTES``."""
    return min(DEFAULT_MAX_BYTES, TOTAL_BYTES // max(1, tasks))


HISTORY_SUBDIR = "_tony"


class MetricHistory:
    """Per task, the distinct progress reports seen, oldest first, at most ``max_points`` and ``max_bytes``."""

    def __init__(self, max_points: int = DEFAULT_MAX_POINTS, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_points < 2:
            raise ValueError(f"max_points={max_points}: keep at least 2 points per task")
        self.max_points = max_points
        self.max_bytes = max_bytes
        self.points: dict[str, list[Progress]] = {}
        self.sizes: dict[str, list[int]] = {}  # each kept point's JSON size, beside ``points``

    def add(self, task_id: str, progress: Progress | None) -> bool:
        """Record ``progress`` unless it is the report last recorded or older; True when it was new.

        Heartbeats carry a window of recent reports that overlaps the previous
        beat's: a report whose time is not after the newest kept one was seen.
        """
        if progress is None or (progress.step is None and progress.epoch is None and not progress.metrics):
            return False
        points = self.points.setdefault(task_id, [])
        sizes = self.sizes.setdefault(task_id, [])
        if points:
            last = points[-1]
            if last.key() == progress.key():
                return False
            if progress.time is not None and last.time is not None and progress.time <= last.time:
                return False
        copy = Progress.from_dict(progress.to_dict())  # a copy: the tracker keeps mutating its own
        points.append(copy)
        sizes.append(len(copy.to_json()))
        while len(points) > 2 and (len(points) > self.max_points or sum(sizes) > self.max_bytes):
            # Thin the older part, keep the newest point: the curve's span and shape survive.
            newest, newest_size = points[-1], sizes[-1]
            del points[1::2]
            del sizes[1::2]
            if points[-1] is not newest:
                points.append(newest)
                sizes.append(newest_size)
        return True

    def observe(self, doc: StateDocument) -> None:
        for task_id, task in doc.tasks.items():
            self.add(task_id, task.progress)

    def document(self, doc: StateDocument | None, **extra: Any) -> JobHistory:
        return JobHistory(state=doc, metrics={t: list(p) for t, p in self.points.items()}, **extra)


def history_paths(app_id: str, checkpoint_dir: str | None, history_dir: str | None) -> list[str]:
    """Where the final history goes: beside the checkpoints, and in the submitter's history folder."""
    name = f"{app_id or 'unknown-application'}.json"
    paths = []
    if checkpoint_dir:
        paths.append(posixpath.join(checkpoint_dir, HISTORY_SUBDIR, name))
    if history_dir:
        paths.append(posixpath.join(history_dir, name))
    return paths


def write_history(client: Any, paths: list[str], history: JobHistory) -> list[str]:
    """Write ``history`` to each path with an ``hdfs`` client; returns the paths written.

    Written once, after the verdict: nobody reads it while it is written. ``client`` may be a
    ``namenodes.Router``: the copy beside the checkpoints goes to their NameNode.
    """
    body = history.to_json()
    written = []
    for location in paths:
        fs, path = pick(client, location), hdfs_path(location)
        fs.makedirs(posixpath.dirname(path))
        fs.write(path, data=body, overwrite=True)
        written.append(path)
    return written
