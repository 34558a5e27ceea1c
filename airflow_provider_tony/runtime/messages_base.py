"""The base every message is built on, and the bounded coercions each field goes through.

Why a module of its own: :class:`Message` is what makes a message lenient
where a JobSpec is strict (unknown keys ignored, missing ones defaulted, a
newer layout version refused: the rules are in ``messages.py``'s module doc),
and the caps here are what a hostile training script cannot get past (see
SECURITY.md), for every message alike. The messages themselves are in
``messages_tasks.py`` (inside the application) and ``messages_state.py`` (the
AM's account for the submitting side).

Like the rest of ``runtime/``, this module imports only the standard library
(and the spec module), because it is shipped into YARN containers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from airflow_provider_tony.runtime import constants
from airflow_provider_tony.runtime.errors import DocumentVersionError, SpecError
from airflow_provider_tony.runtime.model import Model
from airflow_provider_tony.runtime.model import plain as model_plain

_M = TypeVar("_M", bound="Message")

# Caps on what a container writes (the training code is not trusted: see SECURITY.md).
# Applied when a message is built or read, so a hostile script can neither make its
# executor's key-value put exceed skein's gRPC limit nor flood the AM, the Airflow
# side (trigger event, XCom, task log) or the job page.
#: A serialised state document (or any message but the history) larger than this is refused.
MAX_DOCUMENT_BYTES = 8 << 20
#: The history adds each task's metric points (for the job page).
MAX_HISTORY_BYTES = 16 << 20
MAX_PROGRESS_BYTES = 128 << 10
MAX_METRICS = 64  # metrics per report: the rest are dropped
MAX_NAME_CHARS = 100  # a metric name, a task id, a host
MAX_VALUE_CHARS = 1000  # a metric's text value (a TF_CONFIG a test reports fits)
MAX_TEXT_CHARS = 1000  # an event, a stderr line, a task's message
MAX_STDERR_LINES = 60
MAX_EVENTS = 200  # the newest are kept
MAX_TASKS = constants.MAX_TASKS  # the JobSpec refuses a job with more
MAX_HISTORY_POINTS = 2000  # per task on the job page
MAX_BEAT_POINTS = 64  # recent progress reports a heartbeat or exit record carries
MAX_DIAGNOSTICS_CHARS = 16000


def _text(value: Any, limit: int = MAX_TEXT_CHARS) -> str:
    """``value`` as a string of at most ``limit`` characters (longer ones end in an ellipsis)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


_MAX_INT = 2**63 - 1  # a step or count beyond a Java long (or a float's range) is not one


def _int_or_none(value: Any) -> int | None:
    """An int from an int, an integral float or a digit string; None for anything else (``step="ten"``)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if abs(value) <= _MAX_INT else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_INT:
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 20:
        return int(value)
    return None


def finite_number(value: Any) -> float | None:
    """A metric's figure: a finite real number as a float; None for text, a bool, NaN or an infinity.

    What the quality gate judges, the median rule compares, a sweep ranks by, best-N checkpoint
    retention keeps by and the job page charts: a script may report anything, and none of those
    is a figure. Nor is an int beyond any float: JSON from elsewhere (a sweep folder's curve) holds one.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _metric_value(value: Any) -> Any:
    """A metric as JSON has it: numbers and booleans as they are, anything else as short text."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= _MAX_INT else _text(value, MAX_VALUE_CHARS)  # float() of it would overflow
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    return _text(value, MAX_VALUE_CHARS)


def _mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(where, f"{type(value).__name__} where a JSON object belongs")
    return value


def _sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise SpecError(where, f"{type(value).__name__} where a JSON list belongs")
    return list(value)


class Message(Model):
    """A ``Model`` whose ``from_dict`` tolerates unknown and missing keys (see ``messages.py``'s module doc)."""

    def validate(self) -> None:
        """Nothing to check by default; nested messages are coerced by their parent."""

    def to_dict(self) -> dict[str, Any]:
        """Plain builtins, like ``Model.to_dict``, by a faster path: the AM turns its whole
        state document (a summary per task) into a dict on every tick."""
        return {name: _plain(getattr(self, name)) for name in _field_names(type(self))}

    @classmethod
    def from_dict(cls: type[_M], data: object, field: str = "") -> _M:
        if not isinstance(data, Mapping):
            raise SpecError(
                field or cls.__name__,
                f"{data!r} is a {type(data).__name__}, not a mapping; a {cls.__name__} message is a JSON object",
            )
        known = _field_names(cls)
        if "version" in known:
            _check_version(cls, data.get("version"), field)
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except SpecError:
            raise
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:  # missing or mistyped fields
            raise SpecError(
                field or cls.__name__,
                f"{cls.__name__} message is incomplete or mistyped ({_text(exc, 300)}); "
                "it was written by an incompatible version of the provider, or by something else",
            ) from None

    def to_json(self) -> bytes:
        """The bytes that go into skein's key-value store."""
        return json.dumps(self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls: type[_M], raw: bytes | str, max_bytes: int = MAX_DOCUMENT_BYTES) -> _M:
        """The message from its JSON; refused (``SpecError``) when larger than ``max_bytes``."""
        if len(raw) > max_bytes:
            raise SpecError(cls.__name__, f"{len(raw)} bytes, more than the {max_bytes} allowed; ignored")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise SpecError(cls.__name__, f"not JSON ({exc}); the message was truncated or corrupted") from None
        return cls.from_dict(data)


def _check_version(cls: type[Message], version: object, where: str) -> None:
    """Refuse a versioned message (``StateDocument``, ``JobHistory``) from a newer major version.

    The version is raised only when a field changes meaning or disappears
    (see the module doc), so a newer one cannot be read right; an older or
    equal one, or none (version 1), can.
    """
    known = cls.__dataclass_fields__["version"].default  # type: ignore[attr-defined]
    major = _int_or_none(version)
    if major is not None and major > known:  # absent (the first layout had none) or older: readable
        raise DocumentVersionError(
            _join_field(where, "version"),
            f"a {cls.__name__} of layout version {major}, newer than the {known} this provider reads; "
            "it was written by a newer version of airflow-provider-tony: upgrade the provider here "
            "(on the Airflow workers and triggerer, or where the CLI runs)",
        )


def _join_field(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    """A message class's field names, computed once per class (``fields()`` is slow on every tick)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _plain(value: Any) -> Any:
    """Builtins for JSON: concrete types first (``isinstance`` on ``Mapping`` is slow)."""
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return model_plain(value)


def _nested(value: Any, cls: type[_M], where: str) -> _M | None:
    """A nested message from its object or dict form (None stays None)."""
    if value is None or isinstance(value, cls):
        return value
    return cls.from_dict(value, where)
