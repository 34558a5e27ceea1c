"""A task run's identity on the cluster: its YARN tags and its HDFS folders.

What a retry or a restarted worker finds its application by (the tags, never the try
number), where the run keeps its checkpoints (the same for every try, so a retry
resumes) and the folder of all the task's runs (what ``retention`` prunes).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any


def tag(prefix: str, value: object) -> str:
    """A YARN tag (lower-cased by YARN, at most 100 chars, no commas)."""
    text = f"{prefix}:{value}".lower().replace(",", "_")
    if len(text) > 100:
        text = f"{prefix}:sha1-{hashlib.sha1(str(value).encode(), usedforsecurity=False).hexdigest()}"
    return text


def safe_component(value: object) -> str:
    """One HDFS folder name from a dag id, task id or run id (HDFS names allow no ':').

    Characters outside ``A-Za-z0-9._-`` become ``_``; a name of dots only
    (Airflow's run-id pattern allows a run id ``.`` or ``..``) becomes
    ``~dots-<n>``, which no other id maps to (``~`` is never left by the first rule),
    so the folder stays the run's own and never its parent's.
    """
    text = re.sub(r"[^A-Za-z0-9._-]", "_", str(value))
    if text.strip(".") == "":
        return f"~dots-{len(text)}"
    return text


def identity_tags(ti: Any) -> list[str]:
    """What a retry or a restarted worker matches on (never the try number)."""
    return [
        tag("tony-dag", ti.dag_id),
        tag("tony-task", ti.task_id),
        tag("tony-run", ti.run_id),
        tag("tony-map", getattr(ti, "map_index", -1)),
    ]


def task_folder(base_path: str, ti: Any) -> str:
    """The folder of every run of the task: ``<base_path>/checkpoints/<dag>/<task>`` (retention's scope)."""
    return "/".join([base_path.rstrip("/"), "checkpoints", safe_component(ti.dag_id), safe_component(ti.task_id)])


def checkpoint_dir(base_path: str, ti: Any) -> str:
    """The run's checkpoint folder, stable across its tries: ``<task folder>/<run>[/map-<i>]``."""
    parts = [task_folder(base_path, ti), safe_component(ti.run_id)]
    if getattr(ti, "map_index", -1) not in (None, -1):
        parts.append(f"map-{ti.map_index}")
    return "/".join(parts)


__all__ = ["checkpoint_dir", "identity_tags", "safe_component", "tag", "task_folder"]
