"""The job user's staging folders on HDFS (``~/.skein/<application id>``): which ones may go.

Every submit stages what YARN localises for the application there (skein's
files, the launch scripts, the job's local files and, with
``kerberos.refresh_tokens``, the keytab and the AM's token files). The AM
removes its folder at the end and ``tony kill`` removes the killed one's, but an
AM that never started, or one killed with its node, leaves it behind; ``tony gc``
removes those of ended applications. The selection is pure (tested without a
cluster): a folder goes only when it is named like an application id and the
ResourceManager reports that application ended, or no longer knows it and the
folder has not been touched for the age ``gc`` was given (the RM forgets old
applications, ``yarn.resourcemanager.max-completed-applications``). Anything
else under ``~/.skein`` is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: The staging root, relative to the HDFS user's home (where skein's driver put it too).
STAGING_ROOT = ".skein"
APP_ID = re.compile(r"application_[0-9]{1,20}_[0-9]{1,20}")
#: YARN application states after which nothing of the application runs again.
ENDED_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})


def staging_folder(app_id: str) -> str:
    """``.skein/<app_id>`` (relative to the HDFS home); ``ValueError`` for anything not an application id.

    ``app_id`` may come from a command line: ``../..`` must never become a path to delete.
    """
    if not isinstance(app_id, str) or not APP_ID.fullmatch(app_id):
        raise ValueError(f"{app_id!r} is not a YARN application id (application_<cluster>_<number>)")
    return f"{STAGING_ROOT}/{app_id}"


@dataclass(frozen=True)
class Folder:
    """One entry of ``~/.skein``: its name, whether it is a directory, when it last changed (epoch seconds)."""

    name: str
    is_dir: bool
    modified: float


def folders_of(listing: Iterable[tuple[str, Mapping[str, Any]]]) -> list[Folder]:
    """WebHDFS ``LISTSTATUS`` entries (name, FileStatus) as :class:`Folder` values."""
    return [
        Folder(name, status.get("type") == "DIRECTORY", float(status.get("modificationTime") or 0) / 1000.0)
        for name, status in listing
    ]


def select(
    folders: Iterable[Folder], states: Mapping[str, str], *, now: float, max_age_s: float | None
) -> list[tuple[str, str]]:
    """The staging folders to remove, each with why; ``states`` maps application ids to the RM's state.

    A folder whose application is running (or waiting) stays, whatever its age;
    one the RM does not know stays unless ``max_age_s`` is given and it is older.
    """
    chosen: list[tuple[str, str]] = []
    for folder in folders:
        if not folder.is_dir or not APP_ID.fullmatch(folder.name):
            continue
        state = states.get(folder.name)
        if state in ENDED_STATES:
            chosen.append((folder.name, f"the application is {state.lower()}"))
        elif state is None and max_age_s is not None and now - folder.modified > max_age_s:
            days = max_age_s / 86400
            chosen.append((folder.name, f"the ResourceManager no longer knows it and it is older than {days:g} days"))
    return chosen
