"""A job's source directory (``JobSpec.src_dir``): checked, packed and named by content.

Why packed here and not by YARN: a training project is a tree of modules and
small data files, and YARN ships single files or archives. The tree becomes
one ``.tar.gz`` that YARN unpacks in every container (a skein archive file).

The archive is reproducible (entries sorted, fixed mtimes, no owners, modes
reduced to 644/755, a gzip header without a timestamp) and named by a hash
of what goes in it, computed from the files without packing them, so a second
submit of an unchanged tree packs and uploads nothing.

What is left out: :data:`DEFAULT_EXCLUDES` (version control, caches, virtual
environments, bytecode) and the glob patterns in the tree's ``.tonyignore``.
A tree larger than :data:`MAX_SOURCE_BYTES` after that is refused before
anything is submitted, naming its biggest entries: data and checkpoints
belong on HDFS, not in every container.

Submit-side only (no Airflow import); the containers never import this.
"""

from __future__ import annotations

import fnmatch
import gzip
import hashlib
import os
import stat
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec

__all__ = [
    "DEFAULT_EXCLUDES",
    "IGNORE_FILE",
    "MAX_SOURCE_BYTES",
    "SourceTree",
    "pack",
    "relative_scripts",
    "scan",
    "validate_source",
]

#: Left out of every source tree: version control, caches, virtual environments, bytecode.
DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git/",
    ".hg/",
    ".svn/",
    "__pycache__/",
    "*.pyc",
    "*.pyo",
    ".venv/",
    ".tox/",
    ".nox/",
    ".mypy_cache/",
    ".pytest_cache/",
    ".ruff_cache/",
    ".ipynb_checkpoints/",
    "*.egg-info/",
    ".DS_Store",
    ".idea/",
    ".vscode/",
)
#: One glob pattern a line (``data/``, ``*.ckpt``, ``notebooks/scratch.ipynb``); ``#`` starts a comment.
IGNORE_FILE = ".tonyignore"
#: Uncompressed size above which a tree is refused: every container unpacks it on every run.
MAX_SOURCE_BYTES = 256 * 2**20

_FIXED_MTIME = 1577836800  # 2020-01-01: any fixed time keeps the archive reproducible
_FORMAT = "tony-src-1"  # part of the content hash: a change of packing changes every name
_MIB = 2**20


@dataclass(frozen=True)
class Entry:
    path: str  # relative, "/"-separated
    kind: str  # "dir", "file" or "link"
    size: int
    executable: bool
    link: str = ""


@dataclass(frozen=True)
class SourceTree:
    """What would be shipped from ``root``, in archive order."""

    root: Path
    entries: tuple[Entry, ...]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    def files(self) -> set[str]:
        return {e.path for e in self.entries if e.kind != "dir"}

    def biggest(self, n: int = 5) -> list[tuple[str, int]]:
        """The top-level entries (a folder counts with everything in it) by size, largest first."""
        totals: dict[str, int] = {}
        for e in self.entries:
            top, sep, _ = e.path.partition("/")
            # A folder's own entry and the files in it are one total (it was also listed alone, at 0 bytes).
            name = top + "/" if sep or e.kind == "dir" else top
            totals[name] = totals.get(name, 0) + e.size
        return sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def digest(self) -> str:
        """sha256 of every entry's name, kind, mode and content: the archive's identity."""
        h = hashlib.sha256(_FORMAT.encode())
        for e in self.entries:
            h.update(f"\0{e.kind}\0{e.path}\0{int(e.executable)}\0{e.link}\0".encode())
            if e.kind == "file":
                with open(self.root / e.path, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
        return h.hexdigest()


def _patterns(root: Path) -> list[str]:
    ignore = root / IGNORE_FILE
    extra = []
    if ignore.is_file():
        for line in ignore.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                extra.append(line)
    return [*DEFAULT_EXCLUDES, *extra]


def _excluded(rel: str, is_dir: bool, patterns: Iterable[str]) -> bool:
    """``name`` patterns match at any depth; ``a/b`` patterns match the path; a trailing ``/`` only folders."""
    name = rel.rsplit("/", 1)[-1]
    for pattern in patterns:
        dir_only = pattern.endswith("/")
        pattern = pattern.strip("/")
        if dir_only and not is_dir:
            continue
        target = rel if "/" in pattern else name
        if fnmatch.fnmatchcase(target, pattern):
            return True
    return False


def scan(root: str | os.PathLike[str]) -> SourceTree:
    """Everything under ``root`` that would be shipped (stat only: nothing is read)."""
    base = Path(root)
    if not base.is_dir():
        raise SpecError(
            "src_dir",
            f"{str(root)!r} is not a directory on this machine; fix the path (a relative"
            " src_dir is read from the JobSpec YAML's or the DAG file's folder)",
        )
    patterns = _patterns(base)
    entries: list[Entry] = []
    for current, dirs, files in os.walk(base):
        rel_dir = Path(current).relative_to(base).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        keep_dirs = []
        for d in sorted(dirs):
            full = Path(current) / d
            if full.is_symlink():
                files.append(d)  # stored as a link, never followed out of the tree
            elif not _excluded(prefix + d, True, patterns):
                keep_dirs.append(d)
                entries.append(Entry(prefix + d, "dir", 0, True))
        dirs[:] = keep_dirs
        for f in sorted(files):
            rel, full = prefix + f, Path(current) / f
            if _excluded(rel, False, patterns):
                continue
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                entries.append(Entry(rel, "link", 0, False, os.readlink(full)))
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, "file", st.st_size, bool(st.st_mode & stat.S_IXUSR)))
    return SourceTree(base, tuple(sorted(entries, key=lambda e: e.path)))


def _human(size: int) -> str:
    return f"{size / _MIB:.1f} MiB" if size >= _MIB else f"{size / 1024:.1f} KiB"


def check_size(tree: SourceTree, limit: int = MAX_SOURCE_BYTES) -> None:
    """Refuse a tree too large to unpack in every container, saying what to leave out."""
    if tree.size <= limit:
        return
    big = ", ".join(f"{name} ({_human(size)})" for name, size in tree.biggest())
    raise SpecError(
        "src_dir",
        f"{str(tree.root)!r} holds {_human(tree.size)} to ship, more than the {_human(limit)} a source directory"
        f" may (every container unpacks it); the biggest entries are {big}. Exclude data, checkpoints and"
        f" outputs with glob patterns in {str(tree.root / IGNORE_FILE)!r} (one a line, e.g. 'data/' or '*.ckpt')"
        " and read them from HDFS instead",
    )


def pack(tree: SourceTree, dest: Path) -> Path:
    """Write the reproducible ``.tar.gz`` of ``tree`` to ``dest`` (atomically)."""
    tmp = dest.with_name(dest.name + f".{os.getpid()}.tmp")
    # Level 1: a third of level 6's time for an archive a few percent larger (source code
    # compresses well at any level; bundled assets hardly at all).
    with (
        open(tmp, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=1) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar,
    ):
        for e in tree.entries:
            info = tarfile.TarInfo(e.path)
            info.mtime, info.uid, info.gid, info.uname, info.gname = _FIXED_MTIME, 0, 0, "", ""
            info.mode = 0o755 if e.executable else 0o644
            if e.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif e.kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, e.link
                tar.addfile(info)
            else:
                info.size = e.size
                with open(tree.root / e.path, "rb") as fh:
                    tar.addfile(info, fh)
    tmp.replace(dest)
    return dest


def paths_beside_job_file(data: Any, base: Path) -> Any:
    """A job read from a file in folder ``base``, its relative paths made absolute there.

    The one rule the ``tony`` command and ``TonyOperator(job="x.yaml")`` share,
    so a YAML next to its training code runs the same from a terminal and from
    a DAG: a relative ``src_dir`` is read from ``base``; without one, a
    relative role script that exists beside the file becomes absolute (with a
    ``src_dir``, scripts stay relative to the source tree). Anything that is
    not a mapping is returned unchanged for the model to reject.
    """
    if not isinstance(data, dict):
        return data
    data = dict(data)
    src_dir = data.get("src_dir")
    if isinstance(src_dir, str) and src_dir and not src_dir.startswith(("/", "hdfs://")):
        data["src_dir"] = str((base / src_dir).resolve())
    if data.get("src_dir") or not isinstance(data.get("roles"), dict):
        return data
    files = data.get("files") if isinstance(data.get("files"), dict) else {}
    roles = {}
    for name, role in data["roles"].items():
        script = role.get("script") if isinstance(role, dict) else None
        if (
            isinstance(script, str)
            and script
            and not script.startswith("/")
            and script not in files
            and (base / script).is_file()
        ):
            role = {**role, "script": str((base / script).resolve())}
        roles[name] = role
    data["roles"] = roles
    return data


def relative_scripts(spec: JobSpec) -> JobSpec:
    """With a local ``src_dir``, absolute scripts inside it become paths relative to it.

    The CLI and the operator may hand over absolute paths; containers run
    them from the unpacked tree, where only the relative path means anything.
    """
    if spec.src_dir is None or spec.src_dir.startswith("hdfs://"):
        return spec
    root = Path(spec.src_dir).resolve()
    data = spec.to_dict()
    for role in data["roles"].values():
        script = role.get("script")
        if script and script.startswith("/") and Path(script).resolve().is_relative_to(root):
            role["script"] = Path(script).resolve().relative_to(root).as_posix()
    return JobSpec.from_dict(data)


def validate_source(spec: JobSpec, limit: int = MAX_SOURCE_BYTES) -> SourceTree | None:
    """Everything about ``src_dir`` that can be known before submitting; the tree, if local.

    A missing directory, a script outside it or left out of it, and a tree
    too large each raise a ``SpecError`` naming the field and the fix.
    """
    if spec.src_dir is None or spec.src_dir.startswith("hdfs://"):
        return None
    tree = scan(spec.src_dir)
    root = Path(spec.src_dir).resolve()
    shipped = tree.files()
    for name in spec.role_names():
        script = spec.roles[name].script
        if script is None:
            continue
        where = f"roles.{name}.script"
        if script.startswith("/"):
            if not Path(script).resolve().is_relative_to(root):
                raise SpecError(
                    where,
                    f"{script!r} is outside src_dir {spec.src_dir!r}; roles run from the source"
                    " tree: move the script into it, or give its path relative to src_dir",
                )
            script = Path(script).resolve().relative_to(root).as_posix()
        if script in spec.files or script in shipped:
            continue
        why = (
            "it exists but is excluded (the defaults or " + IGNORE_FILE + ")"
            if (root / script).is_file()
            else "no such file"
        )
        raise SpecError(
            where,
            f"{script!r} is not in src_dir {spec.src_dir!r} ({why}); give the script's path"
            " relative to src_dir, like 'trainer/main.py'",
        )
    check_size(tree, limit)
    return tree
