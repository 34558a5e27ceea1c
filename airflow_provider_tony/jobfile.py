"""Reading a job file (a JobSpec as YAML): one reader for the ``tony`` command and the operator.

Strict YAML (``runtime/jobyaml.py``: no aliases, repeated keys or deep nesting),
and every fault reported as ``FILE:LINE:COLUMN: what; the fix`` in one line,
whoever asked: a data scientist reads the same words in a terminal and in a task log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.reader import ReaderError

from airflow_provider_tony.runtime import jobyaml
from airflow_provider_tony.runtime.errors import JobFileError

_JINJA_MARKERS = ("{{", "{%", "{#")


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset (PyYAML's reader reports offsets only)."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


def _jinja_hint(text: str, line: int, templated: bool) -> str:
    """Why a Jinja construct near ``line`` broke the YAML: ``tony`` reads job files as plain YAML (only
    Airflow renders them); under Airflow (``templated``) a value that starts with a tag must be quoted."""
    lines = text.splitlines()
    near = lines[max(0, line - 2) : line]  # PyYAML often marks the line after the culprit
    if not any(marker in candidate for candidate in near for marker in _JINJA_MARKERS):
        return ""
    if templated:
        return "; a value that starts with a template tag, like {{ params.x }}, must be quoted in YAML"
    return (
        "; the file holds a Jinja template tag, which `tony` does not render (only Airflow does, for job=...):"
        " put a plain value there, or quote the tag"
    )


def read_job_file(path: str | Path, *, shown_as: str | None = None, templated: bool = False) -> dict[str, Any]:
    """The job file's top-level mapping, or a :class:`JobFileError` naming the file and the
    line and column of the fault: a traceback from the YAML parser tells a user nothing.

    ``shown_as`` is the name messages give the file (the operator's ``job`` as the DAG wrote
    it; ``path`` by default); ``templated``: Airflow renders the file's values afterwards
    (the hint for a broken template tag differs). A missing file is the caller's ``OSError``.
    """
    raw = Path(path).read_bytes()
    path = shown_as or str(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8")  # valid up to the bad byte
        line, column = _position(before, len(before))
        raise JobFileError(
            f"{path}:{line}:{column}: not UTF-8 text (byte 0x{raw[exc.start]:02x}); a job file is a JobSpec YAML"
        ) from exc
    try:
        data = jobyaml.load(text)  # strict: no aliases, repeated keys, deep nesting
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = "; ".join(str(part) for part in (exc.context, exc.problem) if part)
        if mark is None:
            raise JobFileError(f"{path}: not valid YAML: {problem}") from exc
        where = f"{path}:{mark.line + 1}:{mark.column + 1}"
        raise JobFileError(f"{where}: not valid YAML: {problem}{_jinja_hint(text, mark.line + 1, templated)}") from exc
    except ReaderError as exc:
        line, column = _position(text, exc.position)
        raise JobFileError(
            f"{path}:{line}:{column}: not a text file: character #x{exc.character:04x} ({exc.reason})"
        ) from exc
    except yaml.YAMLError as exc:  # no position known
        raise JobFileError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if data is None:
        raise JobFileError(f"{path}: holds no job (empty, or only comments); give a JobSpec mapping, e.g. roles: ...")
    if not isinstance(data, dict):
        root = yaml.compose(text)  # parsed once already: this cannot fail, and a non-None value has a node
        where = f"{path}:{root.start_mark.line + 1}:{root.start_mark.column + 1}" if root is not None else path
        raise JobFileError(
            f"{where}: holds a {type(data).__name__}, not a JobSpec mapping;"
            " give the job's fields (roles: ...) at the top level of the file"
        )
    return data
