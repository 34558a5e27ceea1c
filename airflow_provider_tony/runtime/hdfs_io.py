"""WebHDFS from inside containers (and the submitting side): atomic publish of files and directories.

TensorFlow 2.21 cannot write ``hdfs://`` paths, so the executor moves files
with the ``hdfs`` package. A directory becomes visible under its final name
only once complete (upload to a temporary sibling, then rename), so a reader
never sees half a model or half a checkpoint.
"""

from __future__ import annotations

import logging
import os
import posixpath
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable, TypeVar

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import namenodes
from airflow_provider_tony.runtime.errors import NameNodeError
from airflow_provider_tony.runtime.hdfs_refusal import refusal

log = logging.getLogger("tony.hdfs")
T = TypeVar("T")


def client_from_env(env: dict[str, str] | None = None, kv: Any = None) -> Any | None:
    """The WebHDFS client the submitting side configured, or None when it gave none.

    ``kv`` (the application's key-value store) lets a delegation-token client
    take the fresh tokens the AM publishes when the job refreshes them
    (``kerberos.refresh_tokens``); without it the application's own token is used.
    An HA cluster's every NameNode comes comma-separated: the client fails over between them
    (``runtime/webhdfs_failover.py``). This is the default NameNode's client; a location on
    another one takes its own (``runtime/namenodes.py``), and so does its token: a job on
    several NameNodes holds one each, and this client takes the default's by its service.
    """
    env = dict(os.environ) if env is None else env
    url = env.get(C.ENV_WEBHDFS_URL)
    if not url:
        return None
    if env.get(C.ENV_WEBHDFS_AUTH) == C.WEBHDFS_AUTH_DELEGATION:
        from airflow_provider_tony.runtime.hadoop_tokens import hdfs_delegation_token
        from airflow_provider_tony.runtime.token_refresh import TokenFileReader, TokenSource, read_token_file
        from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

        refreshing = env.get(C.ENV_TOKENS_REFRESHED) == "1"
        sources: list[TokenSource] = []  # the reader reads with the token its source sends now
        fetch = None
        if kv is not None and refreshing:
            fetch = TokenFileReader(kv.get, lambda path: read_token_file(url, sources[0].in_use, path))
        own = hdfs_delegation_token(env, namenodes.default_token_service(env))
        sources.append(TokenSource(own, fetch, refreshing=refreshing))
        sources[0].start_polling()  # None without fetch
        return DelegationTokenClient(url, sources[0])
    from airflow_provider_tony.runtime.webhdfs_failover import FailoverInsecureClient

    return FailoverInsecureClient(url, user=env.get(C.ENV_WEBHDFS_USER) or None)


class Clients(namenodes.Router):
    """The WebHDFS clients of one process, one per NameNode, made when first asked for.

    :param env: the container's environment (default: ``os.environ``).
    :param kv: the application's key-value store: the default NameNode's client takes the
        fresh tokens the AM publishes (``kerberos.refresh_tokens``).
    :param default: makes the default NameNode's client (the AM passes its own, which holds the
        refresher's newest token); by default ``hdfs_io.client_from_env(env, kv)``.
    """

    def __init__(
        self, env: Mapping[str, str] | None = None, kv: Any = None, default: Callable[[], Any] | None = None
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        self.kv = kv
        self._make_default = default
        self.default_authority = namenodes.authority_of(self.env.get(C.ENV_DEFAULT_FS) or "")
        self.others = namenodes.decode(self.env.get(C.ENV_NAMENODES) or "")  # a bad value fails here, at start
        self._made: dict[str, Any] = {}
        self._lock = threading.Lock()

    def default(self) -> Any | None:
        """The default NameNode's client (None when the job was given no WebHDFS address)."""
        return self._cached("", self._default_client)

    def for_location(self, location: str) -> Any | None:
        """The client of ``location``'s NameNode; :class:`NameNodeError` for one the job was not given."""
        authority = namenodes.authority_of(location)
        # Without $TONY_DEFAULT_FS (a submitter that did not know it) an authority not listed is taken for the default.
        unknown_default = self.default_authority is None and authority not in self.others
        if authority is None or authority == self.default_authority or unknown_default:
            return self.default()
        namenode = self.others.get(authority)
        if namenode is None:
            raise NameNodeError(
                f"{location} is on NameNode {authority}, which this job was not given"
                f" (default filesystem {self.default_authority or 'unknown'}"
                f"{', others: ' + ', '.join(sorted(self.others)) if self.others else ''}); add {authority!r} to"
                " the job's other_namenodes, with its WebHDFS address in the Hadoop conf dir or the connection's"
                " namenodes extra, or give a path on the default filesystem"
            )
        return self._cached(authority, lambda: self._other_client(namenode))

    def _cached(self, key: str, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key not in self._made:
                self._made[key] = make()
            return self._made[key]

    def _default_client(self) -> Any | None:
        if self._make_default is not None:
            return self._make_default()
        return client_from_env(self.env, kv=self.kv)

    def _other_client(self, namenode: namenodes.NameNode) -> Any:
        """Built as the default's is (failover over every address), with that NameNode's own token.

        Its token is the one the submitter obtained, renewed by the ResourceManager up to its
        maximum lifetime; ``kerberos.refresh_tokens`` refreshes the default NameNode's only.
        """
        url = ",".join(namenode.webhdfs)
        if self.env.get(C.ENV_WEBHDFS_AUTH) == C.WEBHDFS_AUTH_DELEGATION:
            from airflow_provider_tony.runtime.hadoop_tokens import hdfs_delegation_token
            from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

            if not namenode.token_service:
                raise namenodes.bad_env(f"{namenode.authority} has no token_service on a Kerberized cluster")
            return DelegationTokenClient(url, hdfs_delegation_token(self.env, namenode.token_service))
        from airflow_provider_tony.runtime.webhdfs_failover import FailoverInsecureClient

        return FailoverInsecureClient(url, user=self.env.get(C.ENV_WEBHDFS_USER) or None)


def hdfs_path(location: str) -> str:
    """``hdfs://nn:8020/a/b`` or ``/a/b`` -> ``/a/b`` (WebHDFS takes paths; the NameNode is chosen
    from the authority by ``runtime/namenodes.py``)."""
    if location.startswith("hdfs://"):
        rest = location[len("hdfs://") :]
        return "/" + rest.split("/", 1)[1] if "/" in rest else "/"
    return location


def with_retries(what: str, fn: Callable[[], T], attempts: int = 5, first_delay: float = 1.0) -> T:
    """Exponential backoff for a flaky NameNode; the last error propagates."""
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts or refusal(exc) is not None:  # a quota or permission answer stays the same
                raise
            log.warning("%s failed (attempt %d/%d): %s; retrying in %.1fs", what, attempt, attempts, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
    raise AssertionError("unreachable")


def upload_to_temporary(client: Any, local: str, tmp: str) -> None:
    """Upload ``local`` (a file or a directory) as ``tmp``, the first half of an atomic publish.

    A failed earlier try may have left this very name behind: uploading onto it
    would nest the new copy inside the old partial one, so it goes first.
    """
    client.delete(tmp, recursive=True)
    client.upload(tmp, local, overwrite=True, n_threads=1)


def move(client: Any, src: str, dst: str, overwrite: bool = False) -> None:
    """Rename ``src`` to ``dst`` in one atomic step that never lands inside an existing folder.

    A plain WebHDFS RENAME onto an existing folder moves the source *into*
    it, and answers ``false`` (no error) for a missing source; HDFS's rename2
    (``renameoptions``) refuses both. ``overwrite`` replaces a file ``dst``
    atomically (a folder only when empty). Works with the provider's httpx
    client (``move``) and the ``hdfs`` package's; every refusal is a
    :class:`RenameFailed` naming both paths.
    """
    from airflow_provider_tony.runtime.errors import RenameFailed

    mover = getattr(client, "move", None)
    try:
        if mover is not None:
            mover(src, dst, overwrite=overwrite)
        else:  # the hdfs package: its private request helper passes renameoptions through
            client._rename(src, destination=client.resolve(dst), renameoptions="OVERWRITE" if overwrite else "NONE")
    except RenameFailed:
        raise
    except Exception as exc:
        raise RenameFailed(src, dst, exc) from exc


def replace_file(client: Any, path: str, data: bytes, tmp: str) -> None:
    """Write ``data`` as the file ``path``, whole or not at all: to ``tmp`` beside it, then one rename
    over ``path`` (:func:`move` with ``overwrite``), so a reader finds the old file or the new one,
    never a half-written one. ``tmp`` is the caller's: a name its readers skip, unique to the writer."""
    client.makedirs(posixpath.dirname(path) or "/")
    client.write(tmp, data=data, overwrite=True)
    move(client, tmp, path, overwrite=True)


def publish(client: Any, local: str, remote: str, tag: str) -> str:
    """Upload ``local`` (a file or a directory) as ``remote``: temporary name first, then rename.

    An existing ``remote`` is moved aside (``<remote>.previous``) only after
    the new copy is complete, so the old one is never lost to a failed upload.
    Both renames are :func:`move`s: a second publisher racing for ``remote``
    gets an error naming the paths instead of nesting its copy inside ours.
    (A gated model goes to a folder of its own application and is published
    by ``runtime/gate.py`` under a lock.)
    """
    remote = hdfs_path(remote).rstrip("/")
    tmp = f"{remote}.tmp-{tag}"
    parent = remote.rsplit("/", 1)[0] or "/"
    with_retries(f"mkdir {parent}", lambda: client.makedirs(parent))
    with_retries(f"upload {local}", lambda: upload_to_temporary(client, local, tmp))
    if client.status(remote, strict=False) is not None:
        previous = f"{remote}.previous"
        client.delete(previous, recursive=True)
        move(client, remote, previous)
    move(client, tmp, remote)
    return remote
