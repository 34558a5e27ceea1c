"""The declarative job model shared by the Airflow operator and the in-container runtime.

Why one model: the operator validates a job on the Airflow worker, serialises it
(JSON or YAML) into the YARN application, and the application master and task
executors read the very same document back.  If both sides parse it with this
module, whatever was accepted at submit time means the same thing on the
cluster, and a typo is rejected in the Airflow log (seconds) instead of in a
container log (minutes later, after YARN has queued and launched things).

Style follows skein's ``objects.py``: every object validates itself on
construction, normalises friendly values (``"2 GiB"`` becomes ``2048``),
rejects unknown keys in ``from_dict`` (a misspelt ``memroy`` must not silently
fall back to a default), and ``from_dict(to_dict())`` is an exact round trip.

Every error is a :class:`SpecError` whose ``field`` is a dotted path
(``roles.worker.memory``) and whose message names the value and the fix.

This module imports only the standard library and PyYAML because it is shipped
into YARN containers, where neither Airflow, TensorFlow nor skein may exist.
It is the model alone: the checks only the submitting side can run (the
cluster's limits, files on the submitting machine) are in ``yarn/checks.py``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import posixpath
import re
import reprlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any, ClassVar, NoReturn, TypeVar, get_args, get_type_hints

import yaml

from airflow_provider_tony.runtime import jobyaml
from airflow_provider_tony.runtime.constants import (
    AM_KEYTAB_ALIAS,
    ENV_RESERVED_PREFIX,
    MAX_TASKS,
    RUNTIME_ZIP,
    SRC_ALIAS,
)
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.namenodes import other_namenodes

__all__ = [
    "ARCHIVE_ALIAS",
    "ARCHIVE_SUFFIXES",
    "ROLE_ORDER",
    "SUCCESS_POLICIES",
    "Acls",
    "CheckpointSpec",
    "InputSpec",
    "GATE_MODES",
    "MiB",
    "JobSpec",
    "MAX_SPEC_BYTES",
    "MAX_TASKS",
    "Model",
    "PythonEnv",
    "MemoryRetry",
    "QualityGate",
    "RetentionSpec",
    "RoleSpec",
    "hdfs_folder",
    "numbers_from_text",
    "parse_memory_mib",
    "plain",
    "shown",
]

#: Name under which a packed Python environment is unpacked in every container.
ARCHIVE_ALIAS = "environment"
#: Names in a container's working directory that are the runtime's: a shipped file may not take one.
_RESERVED_FILE_NAMES = frozenset({RUNTIME_ZIP, ARCHIVE_ALIAS, SRC_ALIAS, AM_KEYTAB_ALIAS})

#: Roles in the order task ids are listed; any other role follows alphabetically.
#: Chief first so that ``task_ids()[0]`` is the task that decides success.
ROLE_ORDER: tuple[str, ...] = ("chief", "worker", "ps", "evaluator")

#: ``chief``: the job succeeds when the deciding task (chief:0, else worker:0)
#: succeeds.  ``all_workers``: every tracked task must succeed.
SUCCESS_POLICIES: tuple[str, ...] = ("chief", "all_workers")

# Roles TensorFlow allows only one of: TF_CONFIG names a single chief, and a
# second evaluator would just duplicate evaluation work and summaries.
_SINGLETON_ROLES = ("chief", "evaluator")
_DECIDING_ROLES = ("chief", "worker")
# ``untracked_roles``' default: names it may hold even in a job that defines no such role.
_DEFAULT_UNTRACKED = ("ps", "tensorboard")

_ROLE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Variables the runtime sets itself; a user value would silently break the
# cluster wiring (TF_CONFIG) or GPU isolation (CUDA_VISIBLE_DEVICES).
_RESERVED_ENV = frozenset({"TF_CONFIG", "CUDA_VISIBLE_DEVICES"})
_RESERVED_ENV_PREFIX = ENV_RESERVED_PREFIX
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
_HDFS = "hdfs://"
# YARN's own limits on application tags (ApplicationSubmissionContext.checkTags).
_MAX_TAGS = 10
_MAX_TAG_LEN = 100
_MAX_NAME_LEN = 100
#: The largest JobSpec, as compact JSON. It reaches every container base64-encoded in one environment
#: variable (``TONY_JOB_SPEC``), and Linux refuses to start a process with any single argument or
#: environment string over 128 KiB (``MAX_ARG_STRLEN``: "Argument list too long"): 64 KiB of JSON is
#: 87 KiB encoded, leaving room for what the submitting side adds (staged paths, its own tags).
MAX_SPEC_BYTES = 64 * 1024
# A value shown in an error: enough to recognise it, never the whole of a hostile one.
_SHOWN = reprlib.Repr()
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlevel = 120, 120, 3
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 6

# Memory units.  Single letters follow the JVM/Spark convention (-Xmx2g means
# 2 GiB) because that is what Hadoop users type; "GB" is decimal, "GiB" binary.
_MIB = 2**20
_UNITS: dict[str, int] = {
    "": _MIB,
    "b": 1,
    "k": 2**10,
    "kib": 2**10,
    "kb": 10**3,
    "m": 2**20,
    "mib": 2**20,
    "mb": 10**6,
    "g": 2**30,
    "gib": 2**30,
    "gb": 10**9,
    "t": 2**40,
    "tib": 2**40,
    "tb": 10**12,
}
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")

#: A memory field's type: an int of MiB once validated; given as an int of MiB or
#: a size string (``"2 GiB"``). A named alias so the generated reference and JSON
#: Schema (``scripts/gen_reference.py``) can say that a string is accepted too.
MiB = int


# --------------------------------------------------------------------------- #
# Small validation helpers: one place that raises, so checks read as rules.
# --------------------------------------------------------------------------- #
def _fail(field_: str, message: str) -> NoReturn:
    raise SpecError(field_, message)


def _check(cond: bool, field_: str, message: str | Callable[[], str]) -> None:
    """Raise ``SpecError(field_, message)`` unless ``cond``; keeps rules one line each.

    A message that quotes the value is a ``lambda``: built only when the check
    fails, so a passing check never formats a hostile value (hundreds of
    thousands of tasks' worth of text) it did not need to show.
    """
    if not cond:
        _fail(field_, message() if callable(message) else message)


def shown(value: object) -> str:
    """``repr(value)`` capped in length and depth: what an error message quotes of a value it refuses.

    Built only when the check fails (a message built up front quotes every value,
    however large, on every successful check too).
    """
    return _SHOWN.repr(value)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix and name else prefix or name


def _message(err: SpecError) -> str:
    """The message of ``err`` without the ``field: `` prefix SpecError adds."""
    text = str(err)
    prefix = f"{err.field}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


@contextmanager
def _at(prefix: str) -> Iterator[None]:
    """Re-raise SpecErrors from nested objects with their full dotted path.

    Nested objects validate with fields relative to themselves (``memory``),
    because a RoleSpec does not know which role name it will be filed under;
    the parent adds ``roles.worker`` here so the user sees the whole path.
    """
    try:
        yield
    except SpecError as err:
        if not prefix:
            raise
        raise SpecError(_join(prefix, err.field), _message(err)) from None


def _is_int(value: object) -> bool:
    # bool is an int subclass; ``instances: true`` in YAML is a mistake, not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def _int(value: object, field_: str, minimum: int, fix: str) -> int:
    if not _is_int(value):
        _fail(field_, f"{shown(value)} is not an integer; {fix}")
    assert isinstance(value, int)
    _check(value >= minimum, field_, lambda: f"{value} must be >= {minimum}; {fix}")
    return value


def _seconds(value: object, field_: str) -> float:
    """A positive, finite number of seconds, normalised to float."""
    fix = "give a positive number of seconds"
    number = math.nan if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)
    _check(math.isfinite(number), field_, lambda: f"{shown(value)} is not a number of seconds; {fix}")
    _check(number > 0, field_, lambda: f"{shown(value)} seconds must be > 0; {fix}")
    return number


def _optional_seconds(value: object, field_: str) -> float | None:
    """Like ``_seconds`` but None means "no limit"."""
    return None if value is None else _seconds(value, field_)


def _text(value: object, field_: str, fix: str) -> str:
    """A non-empty single-line string; control characters break YARN's UI and logs."""
    if not isinstance(value, str) or value == "":
        _fail(field_, f"{shown(value)} is not a non-empty string; {fix}")
    if _CONTROL.search(value):
        _fail(field_, f"{shown(value)} contains control characters; {fix}")
    return value


def _optional_text(value: object, field_: str, fix: str) -> str | None:
    return None if value is None else _text(value, field_, fix)


def _scalar_str(value: object, field_: str) -> str:
    """Coerce a number or path to str, the only type a process argument or env value can be.

    Booleans are refused rather than turned into ``"True"``: YAML reads an
    unquoted ``yes``/``on`` as true, and passing ``True`` to a program that
    expected ``yes`` is a silent bug.
    """
    if not isinstance(value, (str, int, float, os.PathLike)) or isinstance(value, bool):
        _fail(
            field_,
            f"{shown(value)} is a {type(value).__name__}, not text; pass a string"
            " (in YAML, quote values such as 'yes', 'on' or 'true')",
        )
    return str(os.fspath(value) if isinstance(value, os.PathLike) else value)


def _str_list(value: object, field_: str, example: str) -> list[str]:
    """A list of strings; a bare string is refused since iterating it would split it into characters."""
    if not isinstance(value, (list, tuple)):
        _fail(field_, f"{shown(value)} is a {type(value).__name__}, not a list; pass a list such as {example}")
    return [_scalar_str(item, f"{field_}[{i}]") for i, item in enumerate(value)]


def _env(value: object, field_: str) -> dict[str, str]:
    """Validate environment variables a user may set in a container."""
    if not isinstance(value, Mapping):
        _fail(field_, f"{shown(value)} is not a mapping; pass {{'NAME': 'value'}}")
    out: dict[str, str] = {}
    for key, val in value.items():
        key_field = f"{field_}.{shown(key) if not isinstance(key, str) else key[:80]}"
        if not isinstance(key, str) or not _ENV_KEY.match(key):
            _fail(
                key_field,
                f"{shown(key)} is not a valid environment variable name; use letters, digits and '_',"
                " not starting with a digit",
            )
        _check(
            not key.startswith(_RESERVED_ENV_PREFIX) and key not in _RESERVED_ENV,
            key_field,
            lambda: (
                f"{shown(key)} is reserved: the TonY runtime sets TF_CONFIG, CUDA_VISIBLE_DEVICES and"
                f" {_RESERVED_ENV_PREFIX}* itself; rename your variable"
            ),
        )
        out[key] = _scalar_str(val, key_field)
    return out


def _relative_path(value: object, field_: str, what: str) -> str:
    """A normalised path inside the container working directory.

    Why: YARN localises resources and user code writes under the container's
    working directory; an absolute path or ``..`` would escape it.
    """
    fix = f"give a relative path inside the container working directory for {what}"
    path = _text(value, field_, fix)
    norm = posixpath.normpath(path)
    _check(not path.startswith("/"), field_, lambda: f"{shown(path)} is absolute; {fix}")
    _check(
        norm != "." and ".." not in norm.split("/"),
        field_,
        lambda: f"{shown(path)} leaves the working directory; {fix}",
    )
    return norm


def _is_hdfs(path: str) -> bool:
    return path.startswith(_HDFS)


def _location(value: object, field_: str, fix: str) -> str:
    """An absolute path or an ``hdfs://`` URL.

    Relative paths are refused because the submitting side and the containers
    have different working directories, so a relative path would mean two things.
    """
    path = _text(value, field_, fix)
    if not (path.startswith("/") or (_is_hdfs(path) and len(path) > len(_HDFS))):
        _fail(field_, f"{shown(path)} is neither an absolute path nor an hdfs:// URL; {fix}")
    _check_components(path, field_, fix)
    rest = path[len(_HDFS) :].partition("/")[2] if _is_hdfs(path) else path
    if not rest.strip("/"):
        # The gate, retention and publishing create, rename and delete beside and under this folder.
        _fail(field_, f"{shown(path)} is the filesystem's root; {fix}, a folder of its own")
    return path


def _check_components(path: str, field_: str, fix: str) -> None:
    """No ``.`` or ``..`` component: WebHDFS clients normalise them away before sending, so
    ``/user/me/tony/../../other`` would name another user's folder, and the gate, retention and
    publishing then rename and delete there. Checked after templates are rendered (a DAG param,
    an asset event's ``extra``, a run id: whatever was templated into the path)."""
    rest = path[len(_HDFS) :].partition("/")[2] if _is_hdfs(path) else path
    dotted = [part for part in rest.split("/") if part in (".", "..")]
    if dotted:
        _fail(
            field_,
            f"{shown(path)} has a {dotted[0]!r} component; {fix}, without '.' or '..' components"
            " (a template's value must not move the folder)",
        )


def hdfs_folder(value: object, field_: str) -> str:
    """An HDFS folder given outside a JobSpec (a connection's ``base_path``), checked as a JobSpec's are."""
    return _location(value, field_, "give an absolute HDFS path like '/user/me/tony'")


def _hdfs_path(value: object, field_: str) -> str | None:
    """An optional HDFS location: absolute path on the default filesystem or an ``hdfs://`` URL."""
    fix = "give an absolute HDFS path like '/user/me/run1' or 'hdfs://namenode:8020/user/me/run1'"
    return None if value is None else _location(value, field_, fix)


def _named_models(
    value: Any, field: str, model: type[_S], *, example: str, pattern: re.Pattern[str], rule: str
) -> dict[str, _S]:
    """A mapping of names to sections (``roles``, ``inputs``): each name checked, each section validated."""
    if not isinstance(value, Mapping):
        _fail(field, f"{shown(value)} is not a mapping; give {example}")
    out: dict[str, _S] = {}
    for name, item in value.items():
        where = f"{field}.{str(name)[:80]}"
        if not isinstance(name, str) or not pattern.match(name):
            _fail(where, f"{shown(name)} is not {rule}")
        section = _coerce(item, model, where)
        with _at(where):
            section.validate()
        out[name] = section
    return out


def _coerce(value: object, cls: type[_S], field_: str) -> _S:
    """Accept a model object or its dict form (friendly for operator kwargs)."""
    if isinstance(value, cls):
        return value
    return cls.from_dict(value, field_)


def plain(value: Any) -> Any:
    """Convert nested model objects to JSON/YAML-safe builtins for ``to_dict``."""
    if isinstance(value, Model):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


# --------------------------------------------------------------------------- #
# Units
# --------------------------------------------------------------------------- #
def parse_memory_mib(value: int | str, field: str) -> int:
    """Return ``value`` as a whole number of MiB, the unit YARN allocates in.

    An int is already MiB.  A string is a number with an optional unit:
    ``"1024"``/``"1024m"``/``"512 MiB"``, ``"1.5 GiB"``/``"2g"`` (single
    letters are binary, as in ``-Xmx2g``), ``"1 GB"`` (decimal, 10**9 bytes).
    Sizes are rounded *up* to whole MiB so a request is never smaller than
    asked.  Anything else, or a size <= 0, raises ``SpecError(field, ...)``.
    """
    fix = "give an int of MiB or a string like '512 MiB', '2 GiB', '2g' or '2048m'"
    if _is_int(value):
        assert isinstance(value, int)
        _check(value > 0, field, lambda: f"{value} MiB must be > 0; ask for at least 128 MiB")
        return value
    _check(
        isinstance(value, str), field, lambda: f"{shown(value)} is a {type(value).__name__}, not a memory size; {fix}"
    )
    assert isinstance(value, str)
    match = _MEMORY.match(value)
    _check(
        match is not None and match.group(2).lower() in _UNITS,
        field,
        lambda: f"{shown(value)} is not a memory size; {fix}",
    )
    assert match is not None
    size = Fraction(match.group(1)) * _UNITS[match.group(2).lower()]
    _check(size > 0, field, lambda: f"{shown(value)} must be > 0; ask for at least 128 MiB")
    return math.ceil(size / _MIB)


# --------------------------------------------------------------------------- #
# Model
# --------------------------------------------------------------------------- #
_S = TypeVar("_S", bound="Model")


class Model:
    """The base of every spec and message class: validate on init, a dict round trip.

    Spec classes (here) refuse unknown keys; message classes
    (``runtime/messages.py``'s ``Message``) build on this base and relax that.
    """

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check and normalise every field in place; raise SpecError on the first problem.

        Called on construction and again by a parent, so it must be idempotent.
        """
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Plain builtins only (dict/list/str/int/float/None): safe for JSON and YAML."""
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[_S], data: object, field: str = "") -> _S:
        """Build from a mapping, refusing unknown keys.

        ``field`` is where this object sits in the enclosing spec
        (``roles.worker``), so errors carry the full dotted path.
        """
        if not isinstance(data, Mapping):
            _fail(
                field or "spec",
                f"{shown(data)} is a {type(data).__name__}, not a mapping; give {cls.__name__} as a dict of fields",
            )
        known = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        for key in data:
            if key not in known:
                _fail(
                    _join(field, str(key)[:80]),
                    f"unknown key {shown(key)} in {cls.__name__}; known keys are {', '.join(known)}",
                )
        with _at(field):
            return cls(**data)


@dataclass
class PythonEnv(Model):
    """Which Python runs ``module``/``script`` roles on the cluster nodes.

    Give at most one of ``interpreter`` (a python already installed on every
    node) or ``archive`` (a venv-pack/conda-pack file shipped with the job and
    unpacked as ``environment``).  Neither means "the same interpreter path as
    the submitting side" (``sys.executable``), resolved later by the hook,
    which suits clusters whose nodes share an image with the Airflow workers.
    """

    interpreter: str | None = None
    """Absolute path of a Python already installed on every node, like ``/opt/venvs/train/bin/python``."""
    archive: str | None = None
    """A packed environment (venv-pack or conda-pack ``.tar.gz``/``.tgz``/``.zip``), local or ``hdfs://``; uploaded to
    HDFS once per content and unpacked as ``environment`` in every container."""
    am_interpreter: str | None = None
    """Absolute path of a Python on every node, with skein installed, that runs the application master alone (the
    tasks keep ``interpreter`` or ``archive``). With an ``archive``, the AM otherwise runs the archive's Python, and
    with it the archive's packages and any ``.pth`` file in them; ``kerberos.refresh_tokens`` puts the keytab in the
    AM's container, so that pair needs it."""

    def validate(self) -> None:
        fix = "give the python's full path on the nodes, like '/usr/bin/python3'"
        for name in ("interpreter", "am_interpreter"):
            value = _optional_text(getattr(self, name), name, fix)
            _check(
                value is None or value.startswith("/"), name, lambda: f"{shown(value)} is not an absolute path; {fix}"
            )
            setattr(self, name, value)
        fix = "give a .tar.gz, .tgz or .zip made by venv-pack/conda-pack, as a local absolute path or hdfs:// URL"
        self.archive = None if self.archive is None else _location(self.archive, "archive", fix)
        if self.archive is not None:
            _check(
                self.archive.endswith(ARCHIVE_SUFFIXES),
                "archive",
                lambda: f"{shown(self.archive)} is not an archive; {fix}",
            )
            _check(
                self.interpreter is None,
                "archive",
                lambda: (
                    f"{shown(self.archive)} given together with interpreter {shown(self.interpreter)};"
                    " give exactly one of them"
                ),
            )

    def python_command(self) -> str:
        """The python to put at the head of a role's argv ("" = let the hook choose)."""
        if self.interpreter:
            return self.interpreter
        if self.archive:
            return f"./{ARCHIVE_ALIAS}/bin/python"
        return ""


_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")
#: Joins a role and a task index into the name of a one-task skein service
#: (``worker.2``); role names cannot contain it, so the two never collide.
PLACED_SERVICE_SEP = "."
# ``worker.elsewhere``: not a task index, so no first-gang container maps to a task through it.
FALLBACK_SERVICE_SUFFIX = "elsewhere"


@dataclass
class Placement(Model):
    """Where a role's containers may run, for roles that care (``placement`` of a role).

    Written as ``placement: spread``, as a list of hosts (``placement: [node1, node2]``),
    or as this mapping. YARN places strictly (no relaxed locality): a task waits for
    room on its node rather than landing elsewhere.
    """

    spread: bool = False
    """Put each task of the role on a different node, chosen at submit time among the running nodes (with the
    role's ``node_label``, else the unlabelled ones, or among ``nodes``); with more tasks than nodes they are
    dealt round-robin, so no node holds two before every node holds one."""
    nodes: list[str] = field(default_factory=list)
    """Only these hosts (YARN node host names, without the port)."""

    def validate(self) -> None:
        _check(
            isinstance(self.spread, bool),
            "spread",
            lambda: f"{shown(self.spread)} is not true or false; give true or false",
        )
        hosts = _str_list(self.nodes, "nodes", "['node1.example.com', 'node2.example.com']")
        for i, host in enumerate(hosts):
            _check(
                bool(_HOST.match(host)),
                f"nodes[{i}]",
                lambda: f"{shown(host)} is not a host name; give the node's host name as YARN lists it, without a port",
            )
        _check(
            len(set(hosts)) == len(hosts), "nodes", lambda: f"{shown(hosts)} lists a host twice; list each host once"
        )
        self.nodes = hosts
        _check(
            self.spread or bool(self.nodes),
            "spread",
            "placement says nothing: set spread: true, or list nodes (or remove placement)",
        )

    @classmethod
    def coerce(cls, value: object, field_: str) -> Placement | None:
        """``"spread"``, a list of hosts, a mapping, a Placement, or None."""
        if value is None or isinstance(value, Placement):
            return value
        if isinstance(value, str):
            _check(
                value == "spread",
                field_,
                lambda: (
                    f"{shown(value)} is not a placement;"
                    " write 'spread', a list of hosts, or {spread: true, nodes: [...]}"
                ),
            )
            return cls(spread=True)
        if isinstance(value, (list, tuple)):
            with _at(field_):
                return cls(nodes=list(value))
        return cls.from_dict(value, field_)


@dataclass
class RoleSpec(Model):
    """One TensorFlow task type (``worker``, ``ps``, ...): how many, how big, what to run.

    The program is exactly one of ``command`` (a full argument list, run
    without a shell so no quoting surprises), ``module`` (``python -m``) or
    ``script`` (a ``.py`` path; relative paths must be shipped with ``files``, or lie in the
    job's ``src_dir``).
    ``args`` go after ``module``/``script``.  ``memory`` accepts strings such
    as ``"4 GiB"`` and is normalised to MiB.
    """

    instances: int = 1
    """How many tasks of this role; ``chief`` and ``evaluator`` allow only 1; a job runs at most 4,096 tasks in all."""
    memory: MiB = 1024
    """Memory per container: an int of MiB or a size such as ``"4 GiB"``, ``"2g"``, ``"512 MiB"``; at most the
    cluster's ``yarn.scheduler.maximum-allocation-mb``."""
    vcores: int = 1
    """Virtual cores per container."""
    gpus: int = 0
    """GPUs per container (YARN resource ``yarn.io/gpu``); the task sees exactly these in ``CUDA_VISIBLE_DEVICES``."""
    node_label: str | None = None
    """Run only on nodes with this YARN node label."""
    placement: Placement | None = None
    """Optional: ``spread`` the tasks over distinct nodes, or pin them to a list of hosts; see Placement."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables for this role's tasks, over the job-wide ``env``; ``TF_CONFIG``, ``CUDA_VISIBLE_DEVICES``
    and ``TONY_*`` are reserved."""
    command: list[str] | None = None
    """The full argument list to run (no shell), like ``["python", "train.py"]``; exclusive with ``module`` and
    ``script``."""
    module: str | None = None
    """A Python module to run as ``python -m MODULE``; exclusive with ``command`` and ``script``."""
    script: str | None = None
    """A ``.py`` file to run: absolute (shipped from the submitting machine) or relative to the container's working
    directory (shipped with ``files``)."""
    args: list[str] = field(default_factory=list)
    """Arguments after ``module`` or ``script`` (with ``command``, put them in the list)."""

    def validate(self) -> None:
        self.instances = _int(self.instances, "instances", 1, "ask for at least 1 instance or remove the role")
        if self.instances > MAX_TASKS:
            _fail("instances", f"{self.instances} tasks asked for; a job may run at most {MAX_TASKS} tasks in all")
        self.memory = parse_memory_mib(self.memory, "memory")
        self.vcores = _int(self.vcores, "vcores", 1, "ask for at least 1 vcore")
        self.gpus = _int(self.gpus, "gpus", 0, "use 0 for CPU-only tasks")
        self.node_label = _optional_text(self.node_label, "node_label", "give a YARN node label name or null")
        self.placement = Placement.coerce(self.placement, "placement")
        self.env = _env(self.env, "env")
        self.args = _str_list(self.args, "args", "['--epochs', '3']")
        self._validate_program()

    def _validate_program(self) -> None:
        fix = "set exactly one of command, module or script"
        programs = {"command": self.command, "module": self.module, "script": self.script}
        given = [k for k, v in programs.items() if v is not None]
        _check(len(given) > 0, "command", f"no program given; {fix}")
        _check(
            len(given) == 1,
            "command",
            lambda: f"{' and '.join(f'{k} {shown(programs[k])}' for k in given)} both given; {fix}",
        )
        if isinstance(self.command, str):
            _fail(
                "command",
                f"{self.command!r} is a string; pass a list like {self.command.split()!r}"
                " (no shell is used, so a string would not be split into arguments)",
            )
        if self.command is not None:
            self.command = _str_list(self.command, "command", "['python', 'train.py']")
            _check(
                len(self.command) > 0,
                "command",
                "[] is empty; give the program and its arguments, like ['python', 'train.py']",
            )
            _check(
                not self.args, "args", lambda: f"{shown(self.args)} given with command; append them to command instead"
            )
        elif self.module is not None:
            self.module = _text(self.module, "module", "give a dotted module name like 'trainer.main'")
            _check(
                bool(_MODULE.match(self.module)),
                "module",
                lambda: f"{shown(self.module)} is not a dotted Python module name; give one like 'trainer.main'",
            )
        else:
            fix = "give a .py path relative to the container working directory (shipped with files) or absolute"
            path = _text(self.script, "script", fix)
            _check(path.endswith(".py"), "script", lambda: f"{shown(path)} is not a .py file; {fix}")
            self.script = path if path.startswith("/") else _relative_path(path, "script", "the script")

    def argv(self, python: str) -> list[str]:
        """The full argument list of one task; ``python`` comes from ``PythonEnv.python_command()``.

        ``-u`` keeps stdout unbuffered so logs reach YARN as they happen, not when the task dies.
        """
        if self.command is not None:
            return list(self.command)
        _check(
            bool(python),
            "python",
            lambda: f"{shown(python)} is not an interpreter; pass PythonEnv.python_command() or sys.executable",
        )
        target = ["-m", self.module] if self.module is not None else [str(self.script)]
        return [python, "-u", *target, *self.args]


@dataclass
class CheckpointSpec(Model):
    """Where checkpoints live, so that a restarted attempt resumes instead of starting over.

    User code writes into ``local_dir`` inside the container; the runtime
    looks for a new complete checkpoint every ``poll_interval`` seconds and
    uploads the newest to ``dir`` on HDFS, keeping the newest ``keep``, and
    fails the job if uploads keep failing for ``upload_failure_window`` seconds
    (training on without saving is wasted).

    ``poll_interval`` is 30 s because each upload costs the nodes that train
    DataNode and NameNode work (three WebHDFS creates plus a listing, a rename
    and pruning, whatever the checkpoint's size): a script that checkpoints
    every few seconds gets one upload per interval (the newest), and a retry
    resumes from a checkpoint at most that much older than the newest one
    saved. The last checkpoint is always uploaded when the script ends.
    """

    dir: str | None = None
    """Where checkpoints live on HDFS (absolute path or ``hdfs://`` URL); the operator's default is one folder per task
    run, so a retry resumes."""
    warm_start_from: str | None = None
    """Another run's checkpoint folder to start from when ``dir`` has no checkpoint yet."""
    keep: int = 3
    """How many of the newest checkpoints to keep on HDFS."""
    keep_best: int = 0
    """How many of the best checkpoints to keep on HDFS besides the newest ``keep``, judged by ``quality_gate.metric``
    (its ``mode``) as the script last reported it before the checkpoint was uploaded; 0 keeps only the newest."""
    upload_failure_window: float = 600.0
    """Seconds a new checkpoint may stay un-uploaded (HDFS trouble) before the job fails as retryable."""
    poll_interval: float = 30.0
    """Seconds between looks for a new complete checkpoint to upload (the newest one each time)."""
    model_dir: str | None = None
    """HDFS folder the deciding task's ``$TONY_MODEL_DIR`` is published to when the job succeeds."""
    local_dir: str = "checkpoints"
    """The folder user code writes checkpoints to (``$TONY_CHECKPOINT_DIR``), relative to the container's working
    directory."""

    def validate(self) -> None:
        self.dir = _hdfs_path(self.dir, "dir")
        self.warm_start_from = _hdfs_path(self.warm_start_from, "warm_start_from")
        self.model_dir = _hdfs_path(self.model_dir, "model_dir")
        self.keep = _int(self.keep, "keep", 1, "keep at least the newest checkpoint")
        self.keep_best = _int(self.keep_best, "keep_best", 0, "give 0 (only the newest) or how many best to keep")
        self.upload_failure_window = _seconds(self.upload_failure_window, "upload_failure_window")
        self.poll_interval = _seconds(self.poll_interval, "poll_interval")
        self.local_dir = _relative_path(self.local_dir, "local_dir", "checkpoints")


GATE_MODES = ("max", "min")


@dataclass
class QualityGate(Model):
    """Publish the model only when it is at least as good as the last published one.

    The deciding task's last ``progress.report`` carries the job's evaluation
    metric (``metric``); the model goes to a candidate folder beside
    ``checkpoint.model_dir`` and the submitting side (the operator, ``tony
    submit``) compares its figure with the last published model's, read from
    the pointer on HDFS. Passing publishes the model as
    ``<model_dir>.versions/<application id>`` and switches the pointer (and
    emits the model asset's event); failing leaves it as
    ``<model_dir>.rejected-<application id>`` and fails the task without
    retries (a retry trains the same model again). A job with no published
    model yet passes.
    """

    metric: str | None = None
    """The evaluation metric to judge the model by, as the script reports it (``progress.report(val_accuracy=...)``
    or a Keras log name); null turns the gate off."""
    mode: str = "max"
    """``max``: higher is better (accuracy); ``min``: lower is better (loss). A tie passes."""
    record: str | None = None
    """The pointer: the HDFS file naming the published model (its record: application id, figures, version folder),
    replaced atomically on each pass; null uses ``<checkpoint.model_dir>.versions/current.json``. Set it to share one
    pointer between jobs or when ``model_dir`` changes per run (``/models/digits/{{ ds }}``)."""
    tolerance: float | str | None = None
    """How much worse than the published model a model may be and still pass: a number in the metric's units
    (``0.005``: at most 0.005 below for ``max``, above for ``min``) or a percentage of the published figure (``"1%"``).
    A night scored on another day's held-out data varies a little; null (the default): at least as good."""

    def validate(self) -> None:
        if self.metric is not None:
            self.metric = _text(self.metric, "metric", "give the metric's name as the script reports it")
        self.mode = _text(self.mode, "mode", "use 'max' or 'min'")
        _check(
            self.mode in GATE_MODES,
            "mode",
            lambda: f"{shown(self.mode)} is not a mode; use 'max' (higher is better) or 'min'",
        )
        self.record = _hdfs_path(self.record, "record")
        if isinstance(self.tolerance, str):  # a rendered template is text: "0.005" is the number
            text = self.tolerance.strip()
            self.tolerance = float(text) if _FLOAT_TEXT.match(text) else text
        if self.tolerance is not None:
            self.allowance(1.0)  # the field's own check, with the message naming it

    def allowance(self, previous: float) -> float:
        """How far past ``previous`` (in the worse direction) a figure may be and still pass."""
        fix = "give a number >= 0 in the metric's units (0.005) or a percentage of the published figure ('1%')"
        tol = self.tolerance
        if tol is None:
            return 0.0
        if isinstance(tol, str):
            text = tol.strip()
            _check(_PERCENT.match(text) is not None, "tolerance", lambda: f"{shown(tol)} is not a tolerance; {fix}")
            return abs(previous) * float(text[:-1]) / 100.0
        _check(
            isinstance(tol, (int, float)) and not isinstance(tol, bool) and math.isfinite(tol) and tol >= 0,
            "tolerance",
            lambda: f"{shown(tol)} is not a tolerance; {fix}",
        )
        return float(tol)

    @property
    def enabled(self) -> bool:
        return self.metric is not None


#: The largest ``memory_retry.factor``: a request grown more per try is a guess, not a retry.
MAX_MEMORY_RETRY_FACTOR = 8.0


@dataclass
class MemoryRetry(Model):
    """Opt-in: after YARN killed a task's container for its memory, the next Airflow try asks for more.

    A container killed for memory (``out_of_memory``) fails the job without a
    retry by default: the same request would be killed again. With ``factor``
    set, the operator's next try gives the killed task's role
    ``memory * factor`` MiB (rounded up, at most ``max``) and is retried; once
    the request has reached ``max`` an out-of-memory failure is final again.
    In-application restarts (``max_restarts``) are never spent on it.
    """

    factor: float | None = None
    """Multiply the killed role's memory by this for the next Airflow try (more than 1, at most 8); null (the
    default) turns the retry off."""
    max: MiB | None = None
    """The most memory a try may ask for one task of that role (an int of MiB or a size string); required with
    ``factor``, and not below the memory of every role."""

    def validate(self) -> None:
        if self.factor is None:
            _check(self.max is None, "max", "is set without factor; give factor (like 1.5) too, or remove max")
            return
        factor = self.factor
        fix = f"give a number above 1 and at most {MAX_MEMORY_RETRY_FACTOR:g}, like 1.5 or 2"
        ok = not isinstance(factor, bool) and isinstance(factor, (int, float)) and math.isfinite(factor)
        _check(ok, "factor", lambda: f"{shown(factor)} is not a number; {fix}")
        _check(1 < factor <= MAX_MEMORY_RETRY_FACTOR, "factor", lambda: f"{shown(factor)} is out of range; {fix}")
        self.factor = float(factor)
        _check(
            self.max is not None,
            "max",
            "is missing; give the most memory a retry may ask for, like '8 GiB' (the cluster's maximum container"
            " size at most)",
        )
        assert self.max is not None
        self.max = parse_memory_mib(self.max, "max")

    @property
    def enabled(self) -> bool:
        return self.factor is not None

    def next_request(self, requested_mib: int) -> int | None:
        """What the next try asks for after ``requested_mib`` was killed: None when it cannot grow (off, or at max)."""
        if self.factor is None or self.max is None:
            return None
        grown = min(math.ceil(requested_mib * self.factor), self.max)
        return grown if grown > requested_mib else None


@dataclass
class RetentionSpec(Model):
    """What the operator prunes of its own task's earlier runs after a run succeeded (``tony gc`` does all tasks).

    Only the operator's default checkpoint folders
    (``<base_path>/checkpoints/<dag>/<task>/<run>``) are pruned: an older
    run's folder and the ``.damaged-`` copies in it. The newest run and any
    folder holding a published model always stay.
    """

    max_age_days: float | None = None
    """Remove this task's run folders (and ``.damaged-`` checkpoint copies) unused for this many days; null: no age
    limit."""
    keep_runs: int | None = None
    """Keep only this task's newest N run folders; null: no count limit."""

    def validate(self) -> None:
        if self.max_age_days is not None:
            days = self.max_age_days
            ok = not isinstance(days, bool) and isinstance(days, (int, float)) and math.isfinite(days) and days > 0
            _check(
                ok, "max_age_days", lambda: f"{shown(days)} is not a number of days; give a positive number, or null"
            )
            self.max_age_days = float(days)
        if self.keep_runs is not None:
            self.keep_runs = _int(self.keep_runs, "keep_runs", 1, "keep at least the newest run (1), or null")


@dataclass
class Acls(Model):
    """YARN application ACLs: who besides the submitter may view logs or kill the job."""

    view_users: list[str] = field(default_factory=list)
    """Users besides the submitter who may view the application and its logs."""
    modify_users: list[str] = field(default_factory=list)
    """Users besides the submitter who may kill the application."""

    def validate(self) -> None:
        for name in ("view_users", "modify_users"):
            users = _str_list(getattr(self, name), name, "['alice', 'bob']")
            for i, user in enumerate(users):
                # YARN ACL strings are "user1,user2 group1": commas and spaces are separators.
                _check(
                    user != "" and not re.search(r"[,\s]", user),
                    f"{name}[{i}]",
                    lambda: f"{shown(user)} is not a user name; give one user per list item, without commas or spaces",
                )
            setattr(self, name, users)


@dataclass
class KerberosSpec(Model):
    """What a job on a Kerberized cluster needs beyond the connection's login (``kerberos`` of a job).

    HDFS delegation tokens stop working at their maximum lifetime
    (``dfs.namenode.delegation.token.max-lifetime``, 7 days by default, often
    one day), however often YARN renews them; a job that must keep uploading
    checkpoints past that date needs fresh tokens, and only a keytab can get
    them without a person.
    """

    refresh_tokens: bool = False
    """Ship the connection's keytab to the application master's container only (never to task containers), so the AM
    obtains a fresh HDFS delegation token from it before the current one expires and hands it to the executors; for
    jobs that run longer than the cluster's token maximum lifetime. Needs the connection's ``principal`` and
    ``keytab``, and ``gssapi`` with ``requests-gssapi`` in the job's Python."""

    def validate(self) -> None:
        _check(
            isinstance(self.refresh_tokens, bool),
            "refresh_tokens",
            lambda: f"{shown(self.refresh_tokens)} is not true or false; give true or false",
        )


#: ``all``: every file of the input to every task that receives it; ``shard``: the files dealt
#: across those tasks, each file to exactly one task.
SHARDING_POLICIES: tuple[str, ...] = ("all", "shard")
_INPUT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass
class InputSpec(Model):
    """One named input on HDFS (``inputs.<name>`` of a job): a folder, file or glob, staged into the containers.

    Checked on the submitting side before anything is submitted (the path exists and holds files of known
    sizes), then copied to each receiving task's local disk over WebHDFS, with the job's delegation token on
    a Kerberized cluster, before the script starts. The script finds its files in ``$TONY_INPUT_<NAME>_DIR``
    and the list (with sizes) in ``$TONY_INPUT_<NAME>_MANIFEST``.
    """

    path: str = ""
    """Required. An absolute HDFS path or ``hdfs://`` URL: a folder (its files; names starting with ``_`` or ``.``,
    such as ``_SUCCESS``, are skipped as Hadoop skips them), a file, or a glob (``*``, ``?``, ``[...]`` in any
    component, like ``/data/clicks/dt=2026-12-01/part-*``). Templated in the operator: ``/data/clicks/dt={{ ds }}``."""
    sharding: str = "all"
    """``all``: every task that receives the input gets every file; ``shard``: the files are dealt across those
    tasks (by size, deterministically), so the shards are disjoint and together cover every file."""
    roles: list[str] = field(default_factory=list)
    """The roles whose tasks receive the input; empty means the job's tracked roles (those that decide success)."""
    retryable_if_missing: bool = True
    """A missing or empty input fails the Airflow try before submit as retryable (a late partition is normal:
    the next try looks again); false fails it without retries."""
    max_bytes_per_task: int | None = None
    """The most bytes of this input one task may stage (its shard, or every file under ``all``); checked before
    submit and again in each task, where the task's free disk is checked too. Over it, the job fails without
    retries (a retry would fill the disk again). Unset: only the free disk limits."""

    def validate(self) -> None:
        _check(
            self.max_bytes_per_task is None
            or (
                isinstance(self.max_bytes_per_task, int)
                and not isinstance(self.max_bytes_per_task, bool)
                and self.max_bytes_per_task > 0
            ),
            "max_bytes_per_task",
            lambda: (
                f"{str(self.max_bytes_per_task)[:40]!r} is not a positive number of bytes; give one like 50000000000"
            ),
        )
        fix = "give an absolute HDFS path, hdfs:// URL or glob, like '/data/clicks/dt=2026-12-01'"
        self.path = _location(self.path, "path", fix)
        self.sharding = _text(self.sharding, "sharding", "use 'all' or 'shard'")
        _check(
            self.sharding in SHARDING_POLICIES,
            "sharding",
            lambda: (
                f"{shown(self.sharding)} is not a sharding policy; use one of {', '.join(map(repr, SHARDING_POLICIES))}"
            ),
        )
        self.roles = _str_list(self.roles, "roles", "['worker']")
        _check(
            isinstance(self.retryable_if_missing, bool),
            "retryable_if_missing",
            lambda: f"{shown(self.retryable_if_missing)} is not true or false; give true or false",
        )


@dataclass
class JobSpec(Model):
    """A whole distributed training job: roles, Python, files, timeouts and policies.

    Nested fields accept either model objects or their dict form, so the
    operator can take plain kwargs and a YAML file can be loaded as is.
    """

    name: str = "tony"
    """The YARN application name (1-100 characters, one line)."""
    queue: str = "default"
    """The YARN queue; the operator uses the connection's default queue when the job names none."""
    tags: list[str] = field(default_factory=list)
    """YARN application tags (at most 10, ASCII, lower-cased); the operator adds its own to find a running application
    again."""
    roles: dict[str, RoleSpec] = field(default_factory=dict)
    """The task types by name (``chief``, ``worker``, ``ps``, ``evaluator``, ``tensorboard`` or any other); at least a
    ``chief`` or a ``worker``."""
    python: PythonEnv = field(default_factory=PythonEnv)
    """Which Python runs ``module`` and ``script`` roles on the nodes."""
    files: dict[str, str] = field(default_factory=dict)
    """Files to ship into every container: name in the working directory -> local absolute path or ``hdfs://`` URL."""
    src_dir: str | None = None
    """A training project shipped whole: a local directory (packed and staged on HDFS by content hash) or an
    ``hdfs://`` archive; unpacked in every container, on ``sys.path``, and ``script``/``module`` are relative to it."""
    # Every beat wakes the executor, skein's AM JVM and the AM, on the cores the
    # workers train on: 5 s (Spark's executors beat every 10 s) rather than TonY's
    # 1 s, because a beat costs training time on a busy node (CHANGELOG.md).
    # A start or an exit is sent at once, not with the next beat; only a hang is
    # found by the timeout.
    heartbeat_interval: float = 5.0
    """Seconds between a task executor's heartbeats to the AM (a start or an exit is sent at once)."""
    heartbeat_timeout: float = 25.0
    """A tracked task silent this many seconds is lost and fails the job (retryable); more than twice
    ``heartbeat_interval``."""
    registration_timeout: float = 300.0
    """Seconds for every task to register with the AM (TensorFlow needs them all at once) before the job fails. For a
    gang that replaces one YARN preempted, it runs from when the gang's last container is allocated: the job waits as
    long as its queue's capacity is taken (bounded by ``deadline``)."""
    deadline: float | None = None
    """Seconds the whole job may run; null means no limit."""
    startup_timeout: float = 600.0
    """Seconds the application may wait in YARN's queue (ACCEPTED) before the follower kills it as retryable."""
    progress_stall_timeout: float | None = None
    """Fail (retryable) a tracked task that reported progress and then reported no new step for this many seconds; null
    turns it off."""
    retryable_exit_codes: list[int] = field(default_factory=list)
    """Extra exit codes (1-255) of a tracked task that mark the job's failure retryable, as Kubeflow's exit-code restart
    policy does; 75 and 128-255 (killed by a signal: preemption, OOM) always are, any other non-zero code is the
    script's own failure and fails the Airflow task without retries."""
    max_restarts: int = 0
    """Times the AM may restart the whole gang inside the same YARN application after a retryable task failure (a
    container or node lost, a signal, missed heartbeats): fresh containers, a new TF_CONFIG, every task resuming from
    the latest complete checkpoint. 0 (the default) fails the application at once and leaves the retry to Airflow;
    once the restarts are spent the job fails as retryable. A failure of the user code itself never restarts. A
    container preempted by YARN for another queue restarts the gang even with 0 and does not count (the cluster's
    decision, not the job's fault)."""
    framework: str = "tensorflow"
    """What the tasks' processes are wired for: ``tensorflow`` (``TF_CONFIG``) or ``pytorch`` (``MASTER_ADDR``,
    ``MASTER_PORT``, ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK`` as ``torchrun``
    sets them, one process per container, rank 0 being ``chief:0`` or else ``worker:0``; and TonY's
    ``INIT_METHOD``, ``WORLD``), so ``init_process_group("env://")`` works."""
    success_policy: str = "chief"
    """``chief``: the job succeeds when chief:0 (else worker:0) succeeds; ``all_workers``: every tracked task must
    succeed."""
    untracked_roles: list[str] = field(default_factory=lambda: list(_DEFAULT_UNTRACKED))
    """Roles whose exit does not decide the job; they are stopped when the tracked roles finish. Each must be a role
    of the job, or ``ps``/``tensorboard`` (the defaults) when the job does not define them."""
    acls: Acls = field(default_factory=Acls)
    """Who besides the submitter may view or kill the application."""
    am_memory: MiB = 512
    """Memory of the application master's container (skein's Java AM plus TonY's Python AM), in MiB or a size string."""
    am_vcores: int = 1
    """Virtual cores of the application master's container."""
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    """Where checkpoints and the final model go on HDFS, and how often they are uploaded."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables for every task; a role's own ``env`` wins."""
    kerberos: KerberosSpec = field(default_factory=KerberosSpec)
    """Kerberized clusters: fresh HDFS delegation tokens for jobs longer than the tokens' maximum lifetime."""
    inputs: dict[str, InputSpec] = field(default_factory=dict)
    """Training data on HDFS by name (``a-z``, digits, ``_``): checked before submit and staged to each receiving
    task's local disk before its script starts; see InputSpec."""
    other_namenodes: list[str] = field(default_factory=list)
    """NameNodes besides the default filesystem's that the job's code reads or writes on its own (TonY's
    ``tony.other.namenodes``): ``hdfs://<nameservice>`` or ``hdfs://<host>:<port>``, at most 16. The NameNodes of the
    job's own ``hdfs://`` locations (inputs, checkpoint, model, record, files) are found without it. Each one's WebHDFS
    address comes from the Hadoop conf dir or the connection's ``namenodes`` extra; on a Kerberized cluster the job
    gets a delegation token for each, in the containers' token file."""
    quality_gate: QualityGate = field(default_factory=QualityGate)
    """Publish the model only when its evaluation metric is at least as good as the last published model's."""
    retention: RetentionSpec = field(default_factory=RetentionSpec)
    """How many of this task's earlier runs' checkpoint folders the operator keeps after a run succeeded."""
    memory_retry: MemoryRetry = field(default_factory=MemoryRetry)
    """Opt-in: after a container was killed for its memory, the next Airflow try asks for more (``factor``, capped
    at ``max``); off by default, when such a failure is not retried."""

    _NESTED: ClassVar[dict[str, type[Model]]] = {
        "python": PythonEnv,
        "acls": Acls,
        "checkpoint": CheckpointSpec,
        "kerberos": KerberosSpec,
        "quality_gate": QualityGate,
        "retention": RetentionSpec,
        "memory_retry": MemoryRetry,
    }

    # -- validation --------------------------------------------------------- #
    def validate(self) -> None:
        self.name = _text(self.name, "name", "give a name of 1-100 characters on one line")
        _check(
            len(self.name) <= _MAX_NAME_LEN,
            "name",
            lambda: f"{shown(self.name)} is {len(self.name)} characters; shorten it to at most {_MAX_NAME_LEN}",
        )
        self.queue = _text(self.queue, "queue", "give a YARN queue name like 'default'")
        self.tags = self._validated_tags()
        for name, cls in self._NESTED.items():
            value = _coerce(getattr(self, name), cls, name)
            with _at(name):
                value.validate()
            setattr(self, name, value)
        self.roles = self._validated_roles()
        self.files = self._validated_files()
        self.src_dir = self._validated_src_dir()
        self.env = _env(self.env, "env")
        self._validate_timeouts()
        self.retryable_exit_codes = self._validated_exit_codes()
        self._validate_tracking()
        self._validate_framework()
        self.inputs = self._validated_inputs()
        self.other_namenodes = other_namenodes(self.other_namenodes)
        self._validate_gate()
        self._validate_memory_retry()
        self._validate_am_apart()
        self.am_memory = parse_memory_mib(self.am_memory, "am_memory")
        self.am_vcores = _int(self.am_vcores, "am_vcores", 1, "give the application master at least 1 vcore")
        self.max_restarts = _int(
            self.max_restarts, "max_restarts", 0, "give 0 (Airflow retries) or a small count of in-application restarts"
        )
        self._check_size()

    def _check_size(self) -> None:
        """At most ``MAX_SPEC_BYTES`` of JSON, or the containers could not even start; names the largest part."""
        size = len(self.to_json(indent=None).encode())
        if size <= MAX_SPEC_BYTES:
            return
        parts = {name: plain(getattr(self, name)) for name in ("env", "files", "inputs", "tags")}
        for role, spec in self.roles.items():
            for name in ("args", "command", "env"):
                parts[f"roles.{role}.{name}"] = plain(getattr(spec, name))
        largest = max(parts, key=lambda name: len(json.dumps(parts[name])))
        _fail(
            largest,
            f"the job is {size} bytes as JSON, more than the {MAX_SPEC_BYTES} that reach a container"
            f" (one environment variable); this field is the largest ({len(json.dumps(parts[largest]))} bytes):"
            " ship long argument lists or settings in a file (files: or src_dir) and pass its name",
        )

    def _validated_inputs(self) -> dict[str, InputSpec]:
        inputs = _named_models(
            self.inputs,
            "inputs",
            InputSpec,
            example="{'clicks': {'path': '/data/clicks/dt=2026-12-01'}}",
            pattern=_INPUT_NAME,
            rule="an input name; use 1-32 lowercase letters, digits or '_', starting with a letter"
            " (it becomes part of $TONY_INPUT_<NAME>_DIR)",
        )
        for name, item in inputs.items():
            where = f"inputs.{name}"
            for i, role in enumerate(item.roles):
                _check(
                    role in self.roles,
                    f"{where}.roles[{i}]",
                    lambda: (
                        f"{shown(role)} is not a role of this job (roles: {', '.join(map(repr, self.role_names()))});"
                        " name a role from 'roles', or leave roles empty for the tracked roles"
                    ),
                )
        return inputs

    def input_tasks(self, name: str) -> list[str]:
        """The tasks that receive input ``name``, in task-id order: what ``shard`` deals its files across."""
        wanted = self.inputs[name].roles or self.tracked_roles()
        return [t for t in self.task_ids() if t.split(":")[0] in wanted]

    def _validated_tags(self) -> list[str]:
        """YARN tags: <= 10, ASCII, <= 100 chars; lowercased because YARN stores them lowercased.

        Normalising here means a tag we later search for (e.g. to find an
        already-submitted run) matches what the ResourceManager reports.
        """
        tags = _str_list(self.tags, "tags", "['team-a', 'nightly']")
        out: list[str] = []
        fix = f"give 1-{_MAX_TAG_LEN} ASCII characters without commas"
        for i, tag in enumerate(tags):
            _text(tag, f"tags[{i}]", fix)
            ok = len(tag) <= _MAX_TAG_LEN and tag.isascii() and "," not in tag
            _check(ok, f"tags[{i}]", lambda: f"{shown(tag)} is not a valid YARN tag; {fix}")
            if tag.lower() not in out:
                out.append(tag.lower())
        _check(
            len(out) <= _MAX_TAGS,
            "tags",
            lambda: f"{len(out)} tags given {shown(out)}; YARN accepts at most {_MAX_TAGS}, drop some",
        )
        return out

    def _validated_roles(self) -> dict[str, RoleSpec]:
        roles = _named_models(
            self.roles,
            "roles",
            RoleSpec,
            example="{'worker': {...}}",
            pattern=_ROLE_NAME,
            rule="a valid role name; use 1-32 lowercase letters, digits, '_' or '-', starting with a letter",
        )
        total = sum(role.instances for role in roles.values())
        if total > MAX_TASKS:
            _fail(
                "roles",
                f"{total} tasks asked for in all; a job may run at most {MAX_TASKS} tasks (the AM's state document"
                " holds no more), ask for fewer instances",
            )
        _check(
            any(r in roles for r in _DECIDING_ROLES),
            "roles",
            lambda: (
                f"{shown(sorted(roles))} has no 'chief' or 'worker';"
                " add a 'worker' (or 'chief') role that runs your training"
            ),
        )
        for name in _SINGLETON_ROLES:
            if name in roles:
                n = roles[name].instances
                _check(
                    n == 1,
                    f"roles.{name}.instances",
                    lambda: f"{n} {name}s requested; there can be only one {name}, use workers for more",
                )
        return roles

    def _validated_files(self) -> dict[str, str]:
        _check(
            isinstance(self.files, Mapping),
            "files",
            lambda: f"{shown(self.files)} is not a mapping; give {{'train.py': '/local/path/train.py'}}",
        )
        files: dict[str, str] = {}
        for dest, src in self.files.items():
            where = f"files.{dest}"
            dest_norm = _relative_path(dest, where, "the shipped file")
            # YARN localises each resource as one link in the working directory.
            _check(
                "/" not in dest_norm,
                where,
                lambda: (
                    f"{shown(dest)} has a directory part; YARN ships files by "
                    "plain name: use a name like 'train.py' (ship a directory as an archive)"
                ),
            )
            _check(
                dest_norm not in _RESERVED_FILE_NAMES and not dest_norm.startswith(".skein"),
                where,
                lambda: (
                    f"{shown(dest)} is a name the runtime ships under itself (the runtime zip, the environment, the "
                    "source tree, the AM's keytab, skein's files); rename the shipped file"
                ),
            )
            files[dest_norm] = _location(src, where, "give a local absolute path or hdfs:// URL as the source")
        return files

    def _validated_src_dir(self) -> str | None:
        """The project directory shipped with the job: a local directory (packed and staged
        by the submitting side) or an archive already on HDFS. Roles run inside it."""
        fix = (
            "give the project's local directory as an absolute path (relative to the YAML or DAG file"
            " where those load it) or an hdfs:// .tar.gz/.tgz/.zip archive"
        )
        if self.src_dir is None:
            return None
        path = _location(
            os.fspath(self.src_dir) if isinstance(self.src_dir, os.PathLike) else self.src_dir, "src_dir", fix
        )
        _check(
            not _is_hdfs(path) or path.endswith(ARCHIVE_SUFFIXES),
            "src_dir",
            lambda: f"{shown(path)} is an hdfs:// URL but not an archive; {fix}",
        )
        return path.rstrip("/") if not _is_hdfs(path) and path != "/" else path

    def _validated_exit_codes(self) -> list[int]:
        codes = self.retryable_exit_codes
        fix = "give a list of exit codes from 1 to 255, like [1, 3]"
        _check(isinstance(codes, list), "retryable_exit_codes", lambda: f"{shown(codes)} is not a list; {fix}")
        out = []
        for i, code in enumerate(codes):
            where = f"retryable_exit_codes.{i}"
            _check(
                _is_int(code) and 1 <= code <= 255,
                where,
                lambda: f"{shown(code)} is not an exit code from 1 to 255; {fix}",
            )
            out.append(int(code))
        return sorted(set(out))

    def _validate_timeouts(self) -> None:
        for name in ("heartbeat_interval", "heartbeat_timeout", "registration_timeout", "startup_timeout"):
            setattr(self, name, _seconds(getattr(self, name), name))
        for name in ("deadline", "progress_stall_timeout"):
            setattr(self, name, _optional_seconds(getattr(self, name), name))
        # Two missed heartbeats must not kill a task: one late beat is normal under GC or load.
        _check(
            self.heartbeat_timeout > 2 * self.heartbeat_interval,
            "heartbeat_timeout",
            lambda: (
                f"{self.heartbeat_timeout} s must be > 2 x heartbeat_interval ({self.heartbeat_interval} s);"
                f" raise it above {2 * self.heartbeat_interval} s or lower heartbeat_interval"
            ),
        )

    def _validate_tracking(self) -> None:
        self.success_policy = _text(self.success_policy, "success_policy", "use 'chief' or 'all_workers'")
        _check(
            self.success_policy in SUCCESS_POLICIES,
            "success_policy",
            lambda: (
                f"{shown(self.success_policy)} is not a success policy;"
                f" use one of {', '.join(map(repr, SUCCESS_POLICIES))}"
            ),
        )
        self.untracked_roles = _str_list(self.untracked_roles, "untracked_roles", "['ps', 'tensorboard']")
        self._validate_untracked_names()
        tracked = self.tracked_roles()
        _check(
            any(r in tracked for r in _DECIDING_ROLES),
            "untracked_roles",
            lambda: (
                f"{shown(self.untracked_roles)} untracks every chief/worker role; keep 'chief' or 'worker' tracked,"
                " or nothing would decide whether the job succeeded"
            ),
        )
        decider = self.decider_task().split(":")[0]
        _check(
            self.success_policy != "chief" or decider in tracked,
            "untracked_roles",
            lambda: (
                f"{shown(self.untracked_roles)} untracks {shown(decider)}, which decides success under success_policy"
                f" 'chief'; remove {shown(decider)} from untracked_roles"
            ),
        )

    def _validate_framework(self) -> None:
        from airflow_provider_tony.runtime.frameworks import FRAMEWORKS, TORCH_ENV

        self.framework = _text(self.framework, "framework", "use 'tensorflow' or 'pytorch'")
        _check(
            self.framework in FRAMEWORKS,
            "framework",
            lambda: f"{shown(self.framework)} is not a framework here; use one of {', '.join(map(repr, FRAMEWORKS))}",
        )
        if self.framework != "pytorch":
            return
        _check(
            "ps" not in self.roles,
            "roles.ps",
            "a PyTorch job has no parameter servers (its ranks are chief and workers); remove roles.ps"
            " or set framework: tensorflow",
        )
        for where, env in (("env", self.env), *((f"roles.{n}.env", r.env) for n, r in self.roles.items())):
            taken = sorted(set(env) & set(TORCH_ENV))
            _check(
                not taken,
                f"{where}.{taken[0] if taken else ''}",
                lambda: (
                    f"is set by the runtime for a PyTorch job (the rendezvous); remove {', '.join(taken)} from {where}"
                ),
            )

    def _validate_memory_retry(self) -> None:
        cap = self.memory_retry.max
        if cap is None or not self.roles:
            return
        smallest = min(self.roles, key=lambda name: self.roles[name].memory)
        _check(
            cap >= self.roles[smallest].memory,
            "memory_retry.max",
            lambda: (
                f"{cap} MiB is below every role's memory (the smallest is roles.{smallest}.memory,"
                f" {self.roles[smallest].memory} MiB): no retry could ask for more; raise max"
            ),
        )

    def with_memory(self, role: str, memory_mib: int) -> JobSpec:
        """This job with ``roles.<role>.memory`` set to ``memory_mib`` (the operator's memory retry), validated."""
        _check(
            role in self.roles, f"roles.{role}", lambda: f"is not a role of this job ({', '.join(self.role_names())})"
        )
        roles = dict(self.roles)
        roles[role] = dataclasses.replace(self.roles[role], memory=memory_mib)
        return dataclasses.replace(self, roles=roles)

    def _validate_am_apart(self) -> None:
        """The keytab never shares a process with the job's code: with an archive, the AM would run the
        archive's Python (its packages, any ``.pth`` file) beside the keytab ``refresh_tokens`` ships."""
        _check(
            not (self.kerberos.refresh_tokens and self.python.archive and not self.python.am_interpreter),
            "kerberos.refresh_tokens",
            "puts the connection's keytab in the AM's container, and with python.archive the AM would run the "
            "archive's Python and packages beside it; set python.am_interpreter to a Python on the nodes with "
            "skein installed (the AM then runs none of the archive), or give python.interpreter instead of the "
            "archive, or turn refresh_tokens off",
        )

    def _validate_gate(self) -> None:
        """A gate judges a published model, and best-N retention needs the metric it ranks by."""
        gate = self.quality_gate
        _check(
            not gate.enabled or self.checkpoint.model_dir is not None,
            "quality_gate.metric",
            lambda: (
                f"{shown(gate.metric)} is set but the job publishes no model;"
                " set checkpoint.model_dir, or remove the gate"
            ),
        )
        _check(
            self.checkpoint.keep_best == 0 or gate.enabled,
            "checkpoint.keep_best",
            lambda: (
                f"{self.checkpoint.keep_best} best checkpoints asked for but no metric ranks them; "
                "set quality_gate.metric (and its mode), or keep_best: 0"
            ),
        )

    def _validate_untracked_names(self) -> None:
        """Every name is a role of the job or a default: a typo (``pss``) would silently leave the
        real role (``ps``) tracked, and a job with a PS would then run until its deadline."""
        known = [*self.role_names(), *(r for r in _DEFAULT_UNTRACKED if r not in self.roles)]
        for i, name in enumerate(self.untracked_roles):
            if name in known:
                continue
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            _fail(
                f"untracked_roles[{i}]",
                f"{name!r} is not a role of this job (roles: {', '.join(map(repr, self.role_names()))});"
                f" {hint}name a role from 'roles' (or {' / '.join(map(repr, _DEFAULT_UNTRACKED))}), or remove it",
            )

    # -- convenience -------------------------------------------------------- #
    def role_names(self) -> list[str]:
        """Role names in the canonical order: chief, worker, ps, evaluator, then others A-Z."""
        rank = {name: i for i, name in enumerate(ROLE_ORDER)}
        return sorted(self.roles, key=lambda r: (rank.get(r, len(rank)), r))

    def tracked_roles(self) -> list[str]:
        """Roles whose exit counts toward success (``ps``/``tensorboard`` run forever, so not them)."""
        return [r for r in self.role_names() if r not in self.untracked_roles]

    def task_ids(self) -> list[str]:
        """Every task as ``"role:index"``, in a deterministic order both sides agree on."""
        return [f"{r}:{i}" for r in self.role_names() for i in range(self.roles[r].instances)]

    def role_services(self, role: str) -> list[str]:
        """The skein services that run ``role``'s tasks.

        One service named like the role, whose instance ``i`` is task ``i``;
        a spread role has one single-task service per task (``worker.0``,
        ``worker.1``, ...) because skein asks YARN for one node list per
        service, and spreading needs a different node for each task.
        """
        placement = self.roles[role].placement
        if placement is not None and placement.spread:
            return [f"{role}{PLACED_SERVICE_SEP}{i}" for i in range(self.roles[role].instances)]
        return [role]

    def fallback_service(self, role: str) -> str | None:
        """The spread role's service for a task whose node was lost (None for other roles).

        Declared at submit with no containers; a restarted gang asks it for a
        task whose own single-node service points at a lost node, so the task
        runs elsewhere instead of waiting for that node. It may use any node
        the role may use (its ``placement.nodes``, else its ``node_label``'s).
        """
        placement = self.roles[role].placement
        if placement is None or not placement.spread:
            return None
        return f"{role}{PLACED_SERVICE_SEP}{FALLBACK_SERVICE_SUFFIX}"

    def all_services(self, role: str) -> list[str]:
        """Every skein service of ``role``: ``role_services`` and the fallback, if any."""
        fallback = self.fallback_service(role)
        return [*self.role_services(role), *([fallback] if fallback else [])]

    def decider_task(self) -> str:
        """The task whose result decides success under the ``chief`` policy."""
        return "chief:0" if "chief" in self.roles else "worker:0"

    def role_env(self, role: str) -> dict[str, str]:
        """Job-wide ``env`` overlaid with the role's own ``env`` (the role wins)."""
        return {**self.env, **self.roles[role].env}

    # -- serialisation ------------------------------------------------------ #
    def to_json(self, indent: int | None = 2) -> str:
        """JSON is how the hook hands the spec to the application master (stdlib-only on both ends)."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        """Parse and validate; a syntax error is reported as ``SpecError('spec', ...)``."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            _fail("spec", f"not valid JSON ({err}); check the document's syntax")
        return cls.from_dict(data)

    @classmethod
    def from_rendered(
        cls, data: Mapping[str, Any], *, base_dir: str | None = None, defaults: Mapping[str, Any] | None = None
    ) -> JobSpec:
        """A job from its dict form as a templating engine leaves it (the operator's ``job``).

        Templates render to text, so numeric fields given as text become
        numbers (``numbers_from_text``); a relative local ``src_dir`` is read
        from ``base_dir`` (the DAG's folder, as the CLI reads it from the job
        file's); ``defaults`` fill the fields the job leaves empty (the task's
        name, the connection's queue).
        """
        out = dict(data)
        for key, value in (defaults or {}).items():
            if not out.get(key):
                out[key] = value
        src_dir = out.get("src_dir")
        if isinstance(src_dir, str) and src_dir and not src_dir.startswith(("/", "hdfs://")) and base_dir:
            out["src_dir"] = os.path.realpath(os.path.join(base_dir, src_dir))
        return cls.from_dict(numbers_from_text(out))

    def with_overrides(
        self,
        *,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        python: str | None = None,
        tags: Iterable[str] = (),
        checkpoint_dir: str | None = None,
        warm_start_from: str | None = None,
    ) -> JobSpec:
        """This job with what the submitting side adds to it, validated; empty arguments change nothing.

        :param name: the YARN application name.
        :param env: variables merged over the job's ``env``.
        :param python: an interpreter path, or an environment archive (told apart by its suffix,
            ``ARCHIVE_SUFFIXES``): replaces the job's ``python``.
        :param tags: appended to the job's tags (each once).
        :param checkpoint_dir: ``checkpoint.dir``.
        :param warm_start_from: ``checkpoint.warm_start_from``.
        """
        changes: dict[str, Any] = {}
        if name:
            changes["name"] = name
        if env:
            changes["env"] = {**self.env, **env}
        if python:
            key = "archive" if python.endswith(ARCHIVE_SUFFIXES) else "interpreter"
            changes["python"] = PythonEnv.from_dict({key: python}, "python")
        if tags:
            changes["tags"] = list(dict.fromkeys([*self.tags, *tags]))
        if checkpoint_dir or warm_start_from:
            with _at("checkpoint"):
                changes["checkpoint"] = dataclasses.replace(
                    self.checkpoint,
                    dir=checkpoint_dir or self.checkpoint.dir,
                    warm_start_from=warm_start_from or self.checkpoint.warm_start_from,
                )
        return dataclasses.replace(self, **changes) if changes else self

    def to_yaml(self) -> str:
        """YAML in field order, for humans keeping job definitions next to their DAGs."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=False)

    @classmethod
    def from_yaml(cls, text: str) -> JobSpec:
        """A safe, strict load (``runtime/jobyaml.py``): no Python objects, aliases or repeated keys."""
        try:
            data = jobyaml.load(text)
        except yaml.YAMLError as err:
            _fail("spec", f"not valid YAML ({err}); check the document's syntax")
        return cls.from_dict(data)


def task_of_container(service: str, instance: int) -> str:
    """The task id (``role:index``) a skein container runs; inverse of :meth:`JobSpec.role_services`."""
    role, sep, index = service.partition(PLACED_SERVICE_SEP)
    if sep and index.isdigit() and index.isascii():
        return f"{role}:{int(index)}"
    return f"{service}:{instance}"


# --------------------------------------------------------------------------- #
# Numbers that arrive as text
# --------------------------------------------------------------------------- #
_PERCENT = re.compile(r"^(\d+\.?\d*|\.\d+)%$")
_INT_TEXT = re.compile(r"^\s*[-+]?\d+\s*$")
_FLOAT_TEXT = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")


def _number(value: object, hint: Any) -> object:
    """``value`` as the int or float ``hint`` asks for when it is text spelling one; else unchanged."""
    kinds = set(get_args(hint)) or {hint}
    if not isinstance(value, str):
        return value
    if int in kinds and _INT_TEXT.match(value):
        return int(value)
    if float in kinds and _FLOAT_TEXT.match(value):
        return float(value)
    return value


def numbers_from_text(data: object, cls: type[Model] | None = None) -> object:
    """A copy of ``data`` (a spec in dict form) whose numeric fields given as text are numbers.

    Airflow renders templates to text, so ``instances: "{{ params.workers }}"``
    arrives as ``"2"``. Every ``int`` and ``float`` field of the model (nested
    objects, each role, lists of numbers) is converted here, from the model's
    own type hints, so a new numeric field is covered without a list to keep.
    Text that is not a number is left for validation to reject with the
    field's own message; a memory size like ``"2 GiB"`` stays a string.
    """
    cls = cls or JobSpec
    if not isinstance(data, Mapping):
        return data
    hints = get_type_hints(cls)
    nested: dict[str, type[Model]] = getattr(cls, "_NESTED", {})
    out = dict(data)
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in out:
            continue
        value, hint = out[f.name], hints[f.name]
        if f.name in nested:
            out[f.name] = numbers_from_text(value, nested[f.name])
        elif cls is JobSpec and f.name == "roles" and isinstance(value, Mapping):
            out[f.name] = {k: numbers_from_text(v, RoleSpec) for k, v in value.items()}
        elif isinstance(value, list) and get_args(hint) and get_args(hint)[0] in (int, float):
            out[f.name] = [_number(v, get_args(hint)[0]) for v in value]
        else:
            out[f.name] = _number(value, hint)
    return out
