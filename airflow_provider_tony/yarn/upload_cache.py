"""The upload cache on HDFS: what jobs ship, uploaded once per content hash and reused only when provably ours.

``<base_path>/envs`` (python environments), ``/src`` (source trees) and
``/cache`` (the runtime zip, skein's jar, the AM's launch files) hold files
named by the hash of their content. The name proves nothing if someone else
can write there, so a copy is reused only from folders of ours that no one
else may write to, owned by us, of the expected size (``check_dir`` and
``reusable``), and a new one is published with a rename that never replaces a
good copy a racing submit just made (``put_once``). The client holds one per
cluster (``ClusterAccess.cache``, yarn/cluster_access.py).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime.errors import ClusterError, RenameFailed, cluster_errors
from airflow_provider_tony.yarn import source as src

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=16)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:24]


def _digest(path: str) -> str:
    """A local file's content hash, computed once per process while it stays unchanged."""
    st = os.stat(path)
    return _file_digest(path, st.st_size, st.st_mtime_ns)


@dataclass
class StagedSource:
    """Where a job's source tree went on HDFS, and what that cost (for the log and the bench)."""

    url: str
    digest: str
    size: int
    uploaded: bool
    scan_s: float
    pack_s: float
    upload_s: float


def _same_file(now: dict[str, Any] | None, seen: dict[str, Any]) -> bool:
    """Whether the status ``now`` is of the very file ``seen`` described (owner, length, modification time)."""
    keys = ("owner", "length", "modificationTime", "fileId")
    return now is not None and all(now.get(k) == seen.get(k) for k in keys)


class UploadCache:
    """The cluster's upload cache under ``base_path``, written with ``webhdfs()`` as ``owner()``.

    Callables, not values: the client makes its WebHDFS connection and reads
    ``fs.defaultFS`` only when a job first needs them, and tests stand in for them.
    """

    def __init__(
        self, base_path: str, webhdfs: Callable[[], Any], owner: Callable[[], str], default_fs: Callable[[], str]
    ) -> None:
        self.base_path = base_path
        self.webhdfs = webhdfs
        self.owner = owner
        self.default_fs = default_fs
        self._trusted_dirs: set[str] = set()  # folders check_dir passed, once per folder and cache

    def archive(self, archive: str) -> str:
        """Upload a local environment archive to HDFS once per content hash."""
        if archive.startswith("hdfs://"):
            return archive
        digest = hashlib.sha256()
        with open(archive, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        suffix = "".join(Path(archive).suffixes[-2:]) or ".tar.gz"
        remote = f"{self.base_path}/envs/{digest.hexdigest()[:24]}{suffix}"
        client = self.webhdfs()
        with cluster_errors(f"could not upload the python environment {archive} to {remote} on HDFS"):
            if self.put_once(
                client, remote, lambda tmp: client.upload(tmp, archive, overwrite=True), size=os.path.getsize(archive)
            ):
                log.info("uploaded python environment %s to %s", archive, remote)
        return f"{self.default_fs()}{remote}"

    def file(self, local: str, name: str) -> str:
        """``local`` uploaded once per content hash to ``<base_path>/cache/<name>-<hash><suffix>``; its HDFS path.

        For what every job ships unchanged (skein's jar, the runtime zip): reused
        only under the same trust checks as environments (``reusable``).
        """
        remote = f"{self.base_path}/cache/{name}-{_digest(local)}{Path(local).suffix}"
        client = self.webhdfs()
        with cluster_errors(f"could not upload {local} to {remote} on HDFS"):
            self.put_once(
                client, remote, lambda tmp: client.upload(tmp, local, overwrite=True), size=os.path.getsize(local)
            )
        return remote

    def data(self, data: bytes, name: str, suffix: str, private: bool) -> str:
        """``data`` written once per content hash to ``<base_path>/cache/<name>-<hash><suffix>``; its HDFS path.

        For the small files skein's AM needs that are the same job after job
        (the launch scripts, the TLS certificate and key of the connection's
        skein folder): each write is a NameNode and a DataNode round trip and
        may wait for the block report, so writing them with every job was most
        of a submit's time. ``private`` data (the key) is written 0600 from the
        first byte and reused only while no one else may read it.
        """
        remote = f"{self.base_path}/cache/{name}-{hashlib.sha256(data).hexdigest()[:24]}{suffix}"
        client = self.webhdfs()
        with cluster_errors(f"could not write {remote} on HDFS"):
            mode = "600" if private else "644"
            write = functools.partial(client.write, data=data, overwrite=True, permission=mode)
            self.put_once(client, remote, write, size=len(data), private=private)
        return remote

    def put_once(
        self, client: Any, remote: str, write: Callable[[str], None], size: int | None = None, private: bool = False
    ) -> bool:
        """Make ``remote`` (named by its content hash) hold our copy; True when this call wrote it.

        A good copy is never replaced: a job staged at the same moment may have
        taken its modification time, and YARN refuses to localise a file that
        changed since ("changed on src filesystem"). So the new copy is written
        under a temporary name and renamed into place only where nothing is;
        when a racing submit got there first with the same bytes, ours goes.
        Only a copy that is not provably ours (``reusable``) is removed first.
        """
        seen: list[dict[str, Any] | None] = []
        if self.reusable(client, remote, size=size, private=private, seen=seen):
            return False
        # Only the very copy judged not ours goes: one seen absent, or replaced since (a racing
        # submit's good copy, published between the two looks), stays; the rename below then loses.
        if seen and seen[0] is not None and _same_file(client.status(remote, strict=False), seen[0]):
            client.delete(remote)
        tmp = f"{remote}.tmp-submit-{os.getpid()}-{threading.get_ident()}"
        write(tmp)
        try:
            client.rename(tmp, remote)
        except RenameFailed:  # the name is taken: a racing submit's copy, judged just below
            pass
        client.delete(tmp)
        if not self.reusable(client, remote, size=size, private=private):
            raise ClusterError(f"{remote} on HDFS changed under this submit: try again")
        return True

    def source(self, src_dir: str, *, tree: src.SourceTree | None = None) -> StagedSource:
        """Pack a local source directory and upload it once per content hash.

        The hash comes from the files themselves, so an unchanged tree is
        neither packed nor uploaded again. An ``hdfs://`` archive is used as is.
        ``tree`` is the check phase's scan of ``src_dir``, when it made one.
        """
        if src_dir.startswith("hdfs://"):
            return StagedSource(src_dir, "", 0, False, 0.0, 0.0, 0.0)
        started = time.monotonic()
        if tree is None:
            tree = src.scan(src_dir)
            src.check_size(tree)
        digest = tree.digest()
        scanned = time.monotonic()
        remote = f"{self.base_path}/src/{digest[:24]}.tar.gz"
        client = self.webhdfs()
        pack_s = upload_s = 0.0
        with cluster_errors(f"could not check {remote} on HDFS"):
            uploaded = not self.reusable(client, remote)
        if uploaded:  # HDFS is the cache: the local archive lives only as long as the upload
            with tempfile.TemporaryDirectory(prefix="tony-src-") as tmp:
                local = src.pack(tree, Path(tmp) / "src.tar.gz")
                packed = time.monotonic()
                with cluster_errors(f"could not upload {src_dir} to {remote} on HDFS"):
                    self.put_once(client, remote, lambda dest: client.upload(dest, str(local), overwrite=True))
            pack_s, upload_s = packed - scanned, time.monotonic() - packed
            log.info("uploaded source tree %s (%d entries) to %s", src_dir, len(tree.entries), remote)
        return StagedSource(
            f"{self.default_fs()}{remote}", digest, tree.size, uploaded, scanned - started, pack_s, upload_s
        )

    def check_dir(self, client: Any, directory: str) -> None:
        """Refuse to use a cache folder (``<base_path>/envs``, ``/src``) someone else could write to.

        A cached upload is named by its content hash, but the name proves
        nothing if another user can put a file there: it would run in every
        container. The folder and ``base_path`` must be ours and writable by
        no one else; above them, no folder may be writable by everyone
        without the sticky bit (that user could move ours aside). Checked once
        per folder and client; a folder not yet made is made by us (0755).
        """
        if directory in self._trusted_dirs:
            return
        base = self.base_path.rstrip("/")
        parts = [p for p in directory.strip("/").split("/") if p]
        for i in range(len(parts) + 1):
            path = "/" + "/".join(parts[:i])
            status = client.status(path, strict=False)
            if status is None:
                continue
            mode = int(str(status.get("permission") or "0"), 8)
            owner = status.get("owner")
            ours = path == base or path.startswith(base + "/")
            if ours and (owner != self.owner() or mode & 0o022):
                raise ClusterError(
                    f"{path} on HDFS belongs to {owner!r} with mode {mode:o}: the provider reuses uploads under "
                    f"base_path only from a folder of {self.owner()!r} that no one else may write to; "
                    f"`hdfs dfs -chmod -R go-w {path}` (as its owner), or set the connection's base_path "
                    "to a folder of your own"
                )
            if not ours and mode & 0o002 and not mode & 0o1000:
                raise ClusterError(
                    f"{path} on HDFS is writable by everyone without the sticky bit (mode {mode:o}): "
                    "another user could replace the folders below it; `hdfs dfs -chmod +t` it, "
                    "or choose a base_path elsewhere"
                )
        self._trusted_dirs.add(directory)

    def reusable(
        self,
        client: Any,
        remote: str,
        size: int | None = None,
        private: bool = False,
        seen: list[dict[str, Any] | None] | None = None,
    ) -> bool:
        """Whether ``remote`` (named by its content hash) is our upload and may be reused as it is.

        It must be a file of ours that no one else may write to (nor read, when
        ``private``), in a folder that passes :meth:`check_dir`, of the
        expected ``size`` when known. A file that fails is uploaded again over it.
        ``seen`` (when given) receives the status judged, so the caller deletes only that copy.
        """
        self.check_dir(client, remote.rsplit("/", 1)[0])
        status = client.status(remote, strict=False)
        if seen is not None:
            seen.append(status)
        if status is None:
            return False
        mode = int(str(status.get("permission") or "0"), 8)
        ok = (
            status.get("type") == "FILE"
            and status.get("owner") == self.owner()
            and not mode & (0o077 if private else 0o022)
            and (size is None or status.get("length") == size)
        )
        if not ok:
            log.warning(
                "not reusing %s on HDFS (owner %r, mode %o, %s bytes): uploading it again",
                remote,
                status.get("owner"),
                mode,
                status.get("length"),
            )
        return ok
