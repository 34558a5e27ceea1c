"""What a job ships into its containers beside the runtime: the Python that runs it, files, its source.

Why a module of its own: ``PythonEnv`` (an interpreter on the nodes, or a packed environment
unpacked as ``environment``), ``files`` and ``src_dir`` all become names in a container's working
directory, fetched from the submitting machine or HDFS; so they share the rules of which names are
the runtime's own (its zip, the environment, the source tree, the AM's keytab) and where a source
may live (a local absolute path or an ``hdfs://`` URL).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from airflow_provider_tony.runtime.constants import AM_KEYTAB_ALIAS, RUNTIME_ZIP, SRC_ALIAS
from airflow_provider_tony.runtime.model import (
    Model,
    _check,
    _is_hdfs,
    _location,
    _optional_text,
    _relative_path,
    shown,
)

#: Name under which a packed Python environment is unpacked in every container.
ARCHIVE_ALIAS = "environment"
#: Names in a container's working directory that are the runtime's: a shipped file may not take one.
_RESERVED_FILE_NAMES = frozenset({RUNTIME_ZIP, ARCHIVE_ALIAS, SRC_ALIAS, AM_KEYTAB_ALIAS})
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")


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


def validated_files(value: dict[str, str]) -> dict[str, str]:
    """A job's ``files``: each shipped by a plain name the runtime does not use itself, from an absolute path or
    an ``hdfs://`` URL."""
    _check(
        isinstance(value, Mapping),
        "files",
        lambda: f"{shown(value)} is not a mapping; give {{'train.py': '/local/path/train.py'}}",
    )
    files: dict[str, str] = {}
    for dest, src in value.items():
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


def validated_src_dir(value: str | None) -> str | None:
    """The project directory shipped with the job: a local directory (packed and staged
    by the submitting side) or an archive already on HDFS. Roles run inside it."""
    fix = (
        "give the project's local directory as an absolute path (relative to the YAML or DAG file"
        " where those load it) or an hdfs:// .tar.gz/.tgz/.zip archive"
    )
    if value is None:
        return None
    path = _location(os.fspath(value) if isinstance(value, os.PathLike) else value, "src_dir", fix)
    _check(
        not _is_hdfs(path) or path.endswith(ARCHIVE_SUFFIXES),
        "src_dir",
        lambda: f"{shown(path)} is an hdfs:// URL but not an archive; {fix}",
    )
    return path.rstrip("/") if not _is_hdfs(path) and path != "/" else path
