"""The base every JobSpec section and every message builds on, and the checks their fields are made of.

Why a module of its own: each section of a job (``spec_roles.py``, ``spec_shipping.py``,
``spec_data.py``, ``spec_access.py``, and ``JobSpec`` in ``spec.py``) and each message between the
job's components (``messages.py``) is a :class:`Model`: it validates itself on construction,
normalises friendly values (``"2 GiB"`` becomes ``2048``), and ``from_dict(to_dict())`` is an exact
round trip. The field checks here are that contract's vocabulary, shared by every section: one
place raises (``_fail``), so a check reads as a rule; every error is a :class:`SpecError` whose
field is a dotted path (``_at`` adds the parent's part: ``roles.worker.memory``); a refused value is
quoted capped in length (``shown``), and only when its check fails.

Standard library only: it is shipped into YARN containers with the rest of ``runtime/``.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
import reprlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields
from fractions import Fraction
from typing import Any, NoReturn, TypeVar, get_args

from airflow_provider_tony.runtime.constants import ENV_RESERVED_PREFIX
from airflow_provider_tony.runtime.errors import SpecError

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Variables the runtime sets itself; a user value would silently break the
# cluster wiring (TF_CONFIG) or GPU isolation (CUDA_VISIBLE_DEVICES).
_RESERVED_ENV = frozenset({"TF_CONFIG", "CUDA_VISIBLE_DEVICES"})
_RESERVED_ENV_PREFIX = ENV_RESERVED_PREFIX
_HDFS = "hdfs://"
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

    Spec classes (``spec.py`` and its sections) refuse unknown keys; message classes
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


# --------------------------------------------------------------------------- #
# Numbers that arrive as text
# --------------------------------------------------------------------------- #
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
