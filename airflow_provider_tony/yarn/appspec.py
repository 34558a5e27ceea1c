"""Turn a validated ``JobSpec`` into a skein ``ApplicationSpec``.

The master runs the tony AM and each role is a skein service running the task
executor. The runtime travels as a zip beside the job (``tony_runtime.zip``), so
containers need neither this package nor Airflow installed: only Python with
skein (and hdfs for checkpoints).

The AM and the executors start in Python's isolated mode (``python -I``: no
working directory, ``PYTHONPATH`` or user site on ``sys.path``) through a
one-line boot that puts the runtime zip first and runs the module: a job file
named ``skein.py``, ``sitecustomize.py`` or ``airflow_provider_tony`` in the
working directory is never imported by our processes, and the AM's container
(which may hold the connection's keytab) is given none of the job's files.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import shlex
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Mapping, Sequence

import skein

import airflow_provider_tony
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import ARCHIVE_ALIAS, JobSpec, RoleSpec
from airflow_provider_tony.runtime.transport import encode_spec
from airflow_provider_tony.yarn.jvm import java_tool_options

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(airflow_provider_tony.__file__).resolve().parent


def runtime_zip_bytes() -> bytes:
    """The package's top ``__init__`` and ``runtime/``: all a container imports."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        files = [PACKAGE_DIR / "__init__.py", *sorted((PACKAGE_DIR / "runtime").glob("*.py"))]
        for path in files:
            info = zipfile.ZipInfo(str(path.relative_to(PACKAGE_DIR.parent)), date_time=(2020, 1, 1, 0, 0, 0))
            zf.writestr(info, path.read_bytes())
    return buf.getvalue()


def _private_dir(path: Path) -> bool:
    """Whether ``path`` is a real directory (no symlink) of this user that no one else may enter."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and st.st_mode & 0o077 == 0


_FALLBACK_DIR: Path | None = None


def runtime_cache_dir() -> Path:
    """This user's own directory for the runtime zip: ``<tmp>/tony-<uid>``, mode 0700.

    The temporary directory is shared by every local user: a name another user
    can compute (the old ``tony-runtime-<hash>``) lets them plant a zip that
    then runs in the AM and every executor with the job's tokens. A directory
    that exists but is not ours, not 0700 or a symlink is never used: a fresh
    private one from ``mkdtemp`` (random name, 0700) serves this process instead.
    """
    global _FALLBACK_DIR
    path = Path(tempfile.gettempdir()) / f"tony-{os.geteuid()}"
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        log.warning("cannot create %s (%s): using a private temporary directory", path, exc)
    if _private_dir(path):
        return path
    if _FALLBACK_DIR is None or not _private_dir(_FALLBACK_DIR):
        log.warning(
            "%s is not a private directory of this user (owner, mode 0700, no symlink): "
            "not used for the runtime zip; remove it if you did not create it",
            path,
        )
        _FALLBACK_DIR = Path(tempfile.mkdtemp(prefix=f"tony-{os.geteuid()}-"))
    return _FALLBACK_DIR


def _file_digest(path: Path) -> str | None:
    """The sha256 of a regular file of this user at ``path`` (opened without following a symlink)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        return hashlib.sha256(fh.read()).hexdigest()


def runtime_zip_path() -> Path:
    """The runtime zip in this user's private directory, written once per content hash.

    An existing file is reused only when its content hash is the one named in
    its file name (so a half-written or altered file is replaced); it is
    written to a fresh ``mkstemp`` name (O_EXCL, no symlink followed) and
    renamed into place.
    """
    data = runtime_zip_bytes()
    digest = hashlib.sha256(data).hexdigest()
    directory = runtime_cache_dir()
    path = directory / f"tony_runtime-{digest[:16]}.zip"
    if _file_digest(path) == digest:
        return path
    fd, tmp = tempfile.mkstemp(prefix=".tony_runtime-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


#: What ``python -I -c`` runs: the runtime zip (argv 1) first on ``sys.path``, then the module (argv 2)
#: as ``__main__``. Isolated mode leaves the working directory (where YARN links the job's files),
#: ``PYTHONPATH`` and the user site off ``sys.path``, so nothing of the job's is imported before ours.
BOOT_CODE = (
    "import sys;z,m=sys.argv[1:3];del sys.argv[1:3];sys.path.insert(0,z);"
    'import runpy;runpy.run_module(m,run_name="__main__",alter_sys=True)'
)
AM_MODULE = "airflow_provider_tony.runtime.am"
EXECUTOR_MODULE = "airflow_provider_tony.runtime.executor"


def _launch_script(python: str, module: str, *, user_path: bool) -> str:
    """A bash script of ours: only quoted paths and constants go in it, never user input.

    ``user_path``: export ``PYTHONPATH`` with the runtime zip for the processes the
    executor starts (the job's code may import the runtime's helpers); the
    executor itself ignores it, being isolated.
    """
    export = f'export PYTHONPATH="$PWD/{C.RUNTIME_ZIP}${{PYTHONPATH:+:$PYTHONPATH}}"\n' if user_path else ""
    boot = shlex.quote(BOOT_CODE)
    return f'{export}exec {shlex.quote(python)} -I -u -c {boot} "$PWD/{C.RUNTIME_ZIP}" {module}\n'


def am_files(files: Mapping[str, skein.File], *, with_archive: bool = True) -> dict[str, skein.File]:
    """What the AM's container localises: the runtime zip, and the environment archive when that is
    the AM's interpreter (``with_archive``: no ``python.am_interpreter``); never the job's ``files``,
    scripts or source tree (skein adds its own)."""
    kept = (C.RUNTIME_ZIP, ARCHIVE_ALIAS) if with_archive else (C.RUNTIME_ZIP,)
    return {k: v for k, v in files.items() if k in kept}


def _file(source: str, archive: bool = False) -> skein.File:
    kind = "archive" if archive else "file"
    if source.startswith("hdfs://"):
        return skein.File(source=source, type=kind)
    return skein.File(source=str(Path(source).resolve()), type=kind)


def job_files(
    spec: JobSpec,
    python_archive_source: str | None,
    source_archive: str | None = None,
    runtime_source: str | None = None,
) -> dict[str, skein.File]:
    """What every container localises; ``runtime_source`` is the runtime zip already on HDFS
    (the submit's cache), else the local copy is shipped with the job."""
    files = {C.RUNTIME_ZIP: _file(runtime_source or str(runtime_zip_path()))}
    if python_archive_source:
        files[ARCHIVE_ALIAS] = _file(python_archive_source, archive=True)
    if source_archive:
        files[C.SRC_ALIAS] = _file(source_archive, archive=True)
    for dest, source in spec.files.items():
        files[dest] = _file(source)
    for role in spec.roles.values():
        if role.script and role.script.startswith("/"):
            files[Path(role.script).name] = _file(role.script)
    return files


def shipped_spec(spec: JobSpec, source_archive: str | None = None) -> JobSpec:
    """The spec as containers see it: absolute local scripts point at their shipped copy
    (shipped by plain name: YARN localises files into the working directory), and
    ``src_dir`` names the staged archive rather than a path on the submitting machine."""
    data = spec.to_dict()
    if source_archive:
        data["src_dir"] = source_archive
    for role in data["roles"].values():
        if role.get("script") and role["script"].startswith("/"):
            role["script"] = Path(role["script"]).name
    return JobSpec.from_dict(data)


def plan_placement(spec: JobSpec, hosts: Mapping[str, Sequence[str]] | None) -> dict[str, list[str]]:
    """For every ``spread`` role, the host each of its tasks is to run on.

    ``hosts`` maps the running nodes' host names to their labels (the RM's
    view at submit time). A role spreads over its ``placement.nodes`` if it
    lists any, else over the nodes with its ``node_label``, else over the
    unlabelled nodes. Tasks are dealt round-robin, continuing from role to
    role in role order, so a spread ``ps`` does not start on the node of
    ``worker:0``. ``hosts`` None means the cluster is not known: only roles
    that list their nodes are planned. Pure: tested without a cluster.
    """
    plan: dict[str, list[str]] = {}
    dealt = 0
    for name in spec.role_names():
        role = spec.roles[name]
        placement = role.placement
        if placement is None or not placement.spread:
            continue
        if placement.nodes:
            candidates = list(placement.nodes)
        elif hosts is None:
            continue
        else:
            candidates = sorted(
                h for h, labels in hosts.items() if (role.node_label in labels if role.node_label else not labels)
            )
        if not candidates:
            where = f"label {role.node_label!r}" if role.node_label else "no label"
            raise SpecError(
                f"roles.{name}.placement.spread",
                f"no running node with {where} to spread over (running: {sorted(hosts or {})!r}); "
                "list the nodes in placement.nodes, or wait for the nodes to come up",
            )
        plan[name] = [candidates[(dealt + i) % len(candidates)] for i in range(role.instances)]
        dealt += role.instances
    return plan


def build_application_spec(
    spec: JobSpec,
    *,
    python: str,
    python_archive_source: str | None = None,
    source_archive: str | None = None,
    extra_env: Mapping[str, str] | None = None,
    placement_plan: Mapping[str, Sequence[str]] | None = None,
    runtime_source: str | None = None,
) -> skein.ApplicationSpec:
    """``python`` is the interpreter command inside containers (an absolute path,
    or ``./environment/bin/python`` for an archive shipped as ``environment``);
    ``source_archive`` is the packed ``src_dir`` (staged on HDFS), unpacked as ``src``;
    ``placement_plan`` is :func:`plan_placement`'s answer (needed only for a role
    that spreads without listing its nodes); ``runtime_source`` is the runtime zip's
    ``hdfs://`` URL when the stage phase put it in the cache."""
    if source_archive is None and spec.src_dir and spec.src_dir.startswith("hdfs://"):
        source_archive = spec.src_dir
    runtime_spec = shipped_spec(spec, source_archive)
    env = {C.ENV_JOB_SPEC: encode_spec(runtime_spec), "PYTHONUNBUFFERED": "1", **(extra_env or {})}
    files = job_files(spec, python_archive_source, source_archive, runtime_source)
    plan = placement_plan if placement_plan is not None else plan_placement(spec, None)
    services = {}
    script = _launch_script(python, EXECUTOR_MODULE, user_path=True)
    am_python = spec.python.am_interpreter
    for name, role in spec.roles.items():
        placement = role.placement

        def service(instances: int, nodes: Sequence[str], role: RoleSpec = role) -> skein.Service:
            return skein.Service(
                instances=instances,
                resources=skein.Resources(memory=f"{role.memory} MiB", vcores=role.vcores, gpus=role.gpus),
                node_label=role.node_label or "",
                nodes=list(nodes),
                relax_locality=False,  # a placed task waits for its node rather than land elsewhere
                max_restarts=0,
                allow_failures=True,  # the tony AM, not skein, applies the failure policy
                files=files,
                env=env,
                script=script,
            )

        if placement is not None and placement.spread:
            hosts = plan.get(name)
            if hosts is None or len(hosts) != role.instances:
                raise SpecError(
                    f"roles.{name}.placement",
                    f"no node plan for the spread role {name!r} "
                    f"(got {hosts!r}); submit through TonyClient, which plans it from the cluster",
                )
            for service_name, host in zip(spec.role_services(name), hosts, strict=True):
                services[service_name] = service(1, [host])
            # Empty until a restart moves a task off a lost node (runtime/am.py).
            fallback = spec.fallback_service(name)
            assert fallback is not None  # a spread role has one
            services[fallback] = service(0, placement.nodes)
        else:
            services[name] = service(role.instances, placement.nodes if placement is not None else [])
    acls = skein.ACLs()
    if spec.acls.view_users or spec.acls.modify_users:
        acls = skein.ACLs(enable=True, view_users=list(spec.acls.view_users), modify_users=list(spec.acls.modify_users))
    return skein.ApplicationSpec(
        name=spec.name,
        queue=spec.queue,
        tags=list(spec.tags),
        max_attempts=1,
        acls=acls,
        master=skein.Master(
            resources=skein.Resources(memory=f"{spec.am_memory} MiB", vcores=spec.am_vcores),
            # the AM runs no user code and is given none (nor the archive, when it has a Python of its own)
            files=am_files(files, with_archive=am_python is None),
            env={"JAVA_TOOL_OPTIONS": java_tool_options(), **env},  # skein's AM JVM: see yarn/jvm.py
            script=_launch_script(am_python or python, AM_MODULE, user_path=False),
        ),
        services=services,
    )
