"""Stands in for HDFS (``hdfs.Client`` over a local directory) and for the checkpoints a job writes.

``FakeHdfs`` records its calls and can break a method (NameNode down); ``write_ckpt``
writes a TensorFlow checkpoint's files; ``make_sync`` builds a ``CheckpointSync`` on
the fake. Shared by the checkpoint, gate, retention and outcome tests.
"""

from __future__ import annotations

import io
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from airflow_provider_tony.runtime.checkpoint import CheckpointSync

REMOTE = "/user/alice/job/ckpts"


class FakeHdfsError(Exception):
    pass


class FakeHdfs:
    """The calls ``checkpoint.py`` makes on ``hdfs.Client``, on a local directory tree."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.calls: list[tuple[str, str]] = []
        self.broken: set[str] = set()  # method names that raise (NameNode down)
        self.fail_times: dict[str, int] = {}  # method name -> raise this many more times
        self.crash_upload_after: int | None = None  # write N files, then die without cleanup (once)

    def _p(self, path: str) -> Path:
        assert path.startswith("/"), path
        return self.root / path.lstrip("/")

    def _enter(self, name: str, path: str) -> None:
        self.calls.append((name, path))
        if name in self.broken:
            raise FakeHdfsError(f"{name} {path}: NameNode unreachable")
        if self.fail_times.get(name):
            self.fail_times[name] -= 1
            raise FakeHdfsError(f"{name} {path}: transient")

    def count(self, name: str) -> int:
        return sum(1 for call, _ in self.calls if call == name)

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        self._enter("status", path)
        p = self._p(path)
        if not p.exists():
            if strict:
                raise FakeHdfsError(f"File does not exist: {path}")
            return None
        kind = "DIRECTORY" if p.is_dir() else "FILE"
        return {"type": kind, "length": 0 if p.is_dir() else p.stat().st_size, "pathSuffix": ""}

    def list(self, path: str, status: bool = False) -> list[Any]:
        self._enter("list", path)
        p = self._p(path)
        if not p.is_dir():
            raise FakeHdfsError(f"{path} does not exist or is not a directory")
        names = sorted(os.listdir(p))
        if not status:
            return names
        return [
            (
                n,
                {
                    "type": "DIRECTORY" if (p / n).is_dir() else "FILE",
                    "length": 0 if (p / n).is_dir() else (p / n).stat().st_size,
                },
            )
            for n in names
        ]

    @contextmanager
    def read(self, path: str, offset: int = 0, length: int | None = None) -> Iterator[io.BytesIO]:
        self._enter("read", path)
        p = self._p(path)
        if not p.is_file():
            raise FakeHdfsError(f"File does not exist: {path}")
        data = p.read_bytes()[offset:]
        yield io.BytesIO(data if length is None else data[:length])

    def write(self, hdfs_path: str, data: bytes, overwrite: bool = False, **kwargs: Any) -> None:
        self._enter("write", hdfs_path)
        target = self._p(hdfs_path)
        if target.exists() and not overwrite:
            raise FakeHdfsError(f"Remote path {hdfs_path} already exists.")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def makedirs(self, path: str, permission: Any = None) -> None:
        self._enter("makedirs", path)
        self._p(path).mkdir(parents=True, exist_ok=True)

    def upload(
        self, hdfs_path: str, local_path: str, n_threads: int = 1, overwrite: bool = False, **kwargs: Any
    ) -> str:
        self._enter("upload", hdfs_path)
        target = self._p(hdfs_path)
        if target.is_dir():  # hdfs.Client: "If it already exists and is a directory, files will be uploaded inside"
            target = target / os.path.basename(local_path)
        if target.exists():
            if not overwrite:
                raise FakeHdfsError(f"Remote path {hdfs_path} already exists.")
            _remove(target)
        src = Path(local_path)
        pairs = (
            [(f, target / f.relative_to(src)) for f in sorted(src.rglob("*")) if f.is_file()]
            if src.is_dir()
            else [(src, target)]
        )
        for i, (file, dst) in enumerate(pairs):
            if self.crash_upload_after == i:
                self.crash_upload_after = None
                raise FakeHdfsError("connection reset mid-upload (and the cleanup failed too)")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, dst)
        return hdfs_path

    def download(
        self, hdfs_path: str, local_path: str, n_threads: int = 1, overwrite: bool = False, **kwargs: Any
    ) -> str:
        self._enter("download", hdfs_path)
        src = self._p(hdfs_path)
        if not src.exists():
            raise FakeHdfsError(f"File does not exist: {hdfs_path}")
        local = Path(os.path.realpath(local_path))
        if local.is_dir():  # hdfs.Client: "If it already exists and is a directory, ... inside of it"
            local = local / src.name
        if local.exists():
            if not overwrite:
                raise FakeHdfsError(f"Path {local} already exists.")
            _remove(local)
        elif not local.parent.is_dir():
            raise FakeHdfsError(f"Parent directory of {local} does not exist.")
        if src.is_dir():
            shutil.copytree(src, local)
        else:
            shutil.copyfile(src, local)
        return str(local)

    def rename(self, src: str, dst: str) -> None:
        self._enter("rename", src)
        source, target = self._p(src), self._p(dst)
        if target.is_dir():  # WebHDFS RENAME onto a directory moves into it
            target = target / source.name
        if not source.exists() or target.exists() or not target.parent.is_dir():
            raise FakeHdfsError(f"Unable to rename {src} to {dst}.")
        source.rename(target)

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        """HDFS's rename2 (``renameoptions``): never into a folder; ``overwrite`` replaces a file."""
        self._enter("move", src)
        source, target = self._p(src), self._p(dst)
        if not source.exists() or not target.parent.is_dir():
            raise FakeHdfsError(f"rename source {src} or destination parent of {dst} not found")
        if target.exists() and not (overwrite and target.is_file()):
            raise FakeHdfsError(f"rename destination {dst} already exists")
        source.replace(target)

    def delete(self, path: str, recursive: bool = False) -> bool:
        self._enter("delete", path)
        p = self._p(path)
        if not p.exists():
            return False
        if p.is_dir() and any(p.iterdir()) and not recursive:
            raise FakeHdfsError(f"{path} is non empty")
        _remove(p)
        return True

    def walk(self, path: str) -> Iterator[tuple[str, list[str], list[str]]]:
        self._enter("walk", path)
        top = self._p(path)
        if not top.exists():
            raise FakeHdfsError(f"File does not exist: {path}")
        for dirpath, dirs, files in os.walk(top):
            dirs.sort()
            rel = Path(dirpath).relative_to(self.root).as_posix()
            yield "/" + rel, list(dirs), sorted(files)

    # test-side views
    def tree(self, path: str) -> dict[str, bytes]:
        return tree(self._p(path))

    def put(self, path: str, data: bytes) -> None:
        target = self._p(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _remove(p: Path) -> None:
    shutil.rmtree(p) if p.is_dir() else p.unlink()


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` as ``{relative posix path: bytes}`` ({} when missing)."""
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def write_state(state_dir: Path, prefix: str, *older: str) -> None:
    """TensorFlow's ``checkpoint`` state file naming ``prefix`` as the latest."""
    state_dir.mkdir(parents=True, exist_ok=True)
    lines = [f'model_checkpoint_path: "{prefix}"'] + [f'all_model_checkpoint_paths: "{p}"' for p in (*older, prefix)]
    (state_dir / "checkpoint").write_text("\n".join(lines) + "\n")


def write_ckpt(
    state_dir: Path,
    step: int,
    *,
    shards: int = 1,
    skip: tuple[str, ...] = (),
    state: bool = True,
    data: bytes | None = None,
) -> list[str]:
    """Files of checkpoint ``ckpt-<step>`` (minus the names in ``skip``); the state file names it."""
    state_dir.mkdir(parents=True, exist_ok=True)
    prefix = f"ckpt-{step}"
    names = [f"{prefix}.index"] + [f"{prefix}.data-{i:05d}-of-{shards:05d}" for i in range(shards)]
    for name in names:
        if name not in skip:
            (state_dir / name).write_bytes(data if data is not None else f"{name} payload".encode())
    if state:
        write_state(state_dir, prefix)
    return names


def make_sync(
    fake: FakeHdfs, local: Path, events: list[str], fatal: list[str] | None = None, **kwargs: Any
) -> CheckpointSync:
    options: dict[str, Any] = {"keep": 3, "poll_interval": 0.0, "window": 60.0, "tag": "1-4242"}
    options.update(kwargs)
    return CheckpointSync(
        fake, local, REMOTE, on_event=events.append, on_fatal=(fatal if fatal is not None else []).append, **options
    )
