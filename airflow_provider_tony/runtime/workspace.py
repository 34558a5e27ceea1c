"""How a task's program finds the job's code: import path, working directory, argv.

Why this module: YARN localises every shipped file as a symlink into a cache
folder of its own, and Python puts a script's *real* folder at the head of
``sys.path``, so ``main.py`` could not import ``helpers.py`` shipped beside it.
Here the container's working directory (where YARN links every shipped file)
and the unpacked source tree go first on ``PYTHONPATH``, and a script is run
so that ``sys.path[0]`` is the folder it was named in, not its symlink target.

A source tree (``JobSpec.src_dir``) is unpacked once per node by YARN and
shared by the job's containers there; its top-level entries are linked into
each container's working directory (TonY unzips its ``--src_dir`` there), so
relative paths in the user's code work while files it writes stay private to
its container. Pure functions apart from :func:`link_source`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.spec import RoleSpec

# Run a script the way ``python script.py`` does, except that sys.path[0] is
# the folder the script was *named* in (the working directory, where its
# siblings are linked), not the folder its symlink resolves to.
_RUN_SCRIPT = (
    "import os, runpy, sys; sys.argv = sys.argv[1:]; "
    "sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0])); "
    "runpy.run_path(sys.argv[0], run_name='__main__')"
)


def task_argv(role: RoleSpec, python: str) -> list[str]:
    """The role's argument list; a ``script`` goes through the small launcher above."""
    argv = role.argv(python)
    if role.script is None:
        return argv
    return [python, "-u", "-c", _RUN_SCRIPT, *argv[2:]]


def python_path(workdir: Path, has_source: bool, user: str | None, inherited: str | None) -> str:
    """Ours first (source tree, then working directory), then the user's, then the runtime's.

    The source tree comes before the working directory so that a package of
    the tree named like one of the runtime's folders (``model``) is still the
    one imported.
    """
    ours = ([str(workdir / C.SRC_ALIAS)] if has_source else []) + [str(workdir)]
    parts = [*ours, *(user or "").split(os.pathsep), *(inherited or "").split(os.pathsep)]
    return os.pathsep.join(dict.fromkeys(p for p in parts if p))


def link_source(source: Path, workdir: Path, reserved: Iterable[str]) -> list[str]:
    """Link each top-level entry of the unpacked ``source`` into ``workdir``.

    Entries whose name is taken (a shipped file, the runtime's own folders,
    YARN's launch files) are left out: the runtime and ``files`` win, and the
    skipped names are returned so the caller can say so.
    """
    taken = set(reserved)
    skipped: list[str] = []
    for entry in sorted(source.iterdir(), key=lambda p: p.name):
        target = workdir / entry.name
        if entry.name in taken or target.exists() or target.is_symlink():
            skipped.append(entry.name)
            continue
        target.symlink_to(entry)
    return skipped


def tony_env(
    role: str,
    index: int,
    addresses: Mapping[str, str],
    tracked_tasks: int,
    is_chief: bool,
    app_id: str,
    port: int | None,
) -> dict[str, str]:
    """The variables TonY's task executors export, for scripts written for TonY.

    ``CLUSTER_SPEC`` lists every role, as TonY's does, each ordered by index.
    ``TB_PORT`` is the reserved port of a ``tensorboard`` task.
    """
    by_role: dict[str, dict[int, str]] = {}
    for task_id, address in addresses.items():
        name, _, i = task_id.rpartition(":")
        by_role.setdefault(name, {})[int(i)] = address
    cluster = {name: [slots[i] for i in sorted(slots)] for name, slots in sorted(by_role.items())}
    env = {
        C.ENV_TONY_JOB_NAME: role,
        C.ENV_TONY_TASK_INDEX: str(index),
        C.ENV_TONY_TASK_NUM: str(tracked_tasks),
        C.ENV_TONY_JOB_ID: app_id,
        C.ENV_TONY_CLUSTER_SPEC: json.dumps(cluster, sort_keys=True),
        C.ENV_TONY_DISTRIBUTED_MODE: "GANG",
        C.ENV_TONY_SESSION_ID: "0",
    }
    if is_chief:
        env[C.ENV_TONY_IS_CHIEF] = "true"
    if role == "tensorboard" and port is not None:
        env[C.ENV_TONY_TB_PORT] = str(port)
    return env
