"""The submitting side's one door to the cluster's HTTP APIs: RM, NodeManagers, proxy, WebHDFS.

Why one door: submitting, killing, following and reading logs all speak HTTP
to the same cluster, and a Kerberized cluster wants SPNEGO on every one of
those calls. Before this module the NodeManager calls went through ``urllib``
without SPNEGO (so ``tony logs`` found no containers on a secure cluster),
the RM through ``urllib`` or ``requests``, following through ``httpx``. Now:

- :class:`ClusterHttp` holds one blocking ``httpx.Client`` (built by
  ``http.http_client`` from the same ``HttpSettings`` the async follower uses,
  so the SPNEGO ``httpx.Auth`` and CA bundle enter in one place);
- :func:`cluster_error` is the one classifier of what went wrong
  (unreachable, refused, not found, forbidden) into ``ClusterError``'s family;
- :class:`ClusterUrls` is the one place URLs are built.

On a cluster without Kerberos, Hadoop's pseudo authentication reads the
caller from the ``user.name`` query parameter; it is added to every call
there (a cluster with only the static-user filter ignores it).
"""

from __future__ import annotations

import contextlib
import functools
import os
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import httpx

from airflow_provider_tony.runtime.errors import (
    ClusterError,
    ClusterForbidden,
    ClusterUnreachable,
    KerberosError,
    NotFound,
    RenameFailed,
)
from airflow_provider_tony.yarn import http as web

__all__ = ["ClusterForbidden", "ClusterHttp", "ClusterUrls", "NotFound", "WebHdfs", "cluster_error"]


def cluster_error(what: str, exc: BaseException) -> ClusterError:
    """The one classifier: a transport error or an error answer -> the provider's exception.

    ``what`` names the call ("the ResourceManager's scheduler at http://rm:8088");
    the class says what a caller may do about it: wait (``ClusterUnreachable``:
    no connection, a timeout, a 5xx), give up on the object (``NotFound``),
    fix credentials or ACLs (``ClusterForbidden``), or read the message.
    """
    if isinstance(exc, ClusterError):
        return exc
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        body = " ".join(exc.response.text[:300].split())  # one line in a log
        if status == 404:
            return NotFound(f"{what}: not found (HTTP 404) {body}".rstrip())
        if status in (401, 403):
            return ClusterForbidden(
                f"{what}: refused (HTTP {status}) {body}; on a Kerberized cluster check the ticket/keytab, "
                "that the URL's host is the one in the server's HTTP/<host> principal, and the ACLs"
            )
        if status >= 500:
            return ClusterUnreachable(f"{what}: the server failed (HTTP {status}) {body}".rstrip())
        return ClusterError(f"{what}: refused (HTTP {status}) {body}".rstrip())
    if isinstance(exc, (httpx.TransportError, OSError)):
        return ClusterUnreachable(f"{what}: unreachable ({type(exc).__name__}: {exc})")
    return ClusterError(f"{what}: {type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class ClusterUrls:
    """Every cluster URL the submitting side uses, built here and nowhere else."""

    rm_url: str
    webhdfs_url: str | None = None

    def rm(self, path: str) -> str:
        """``/ws/v1/cluster/<path>`` on the ResourceManager."""
        return f"{self.rm_url.rstrip('/')}/ws/v1/cluster/{path.lstrip('/')}"

    def app(self, app_id: str, rest: str = "") -> str:
        return self.rm(f"apps/{urllib.parse.quote(app_id, safe='')}{rest}")

    @staticmethod
    def nm(address: str, path: str) -> str:
        """``/ws/v1/node/<path>`` on the NodeManager at ``address`` (its ``nodeHTTPAddress``)."""
        return f"http://{address}/ws/v1/node/{path.lstrip('/')}"

    def proxy(self, app_id: str) -> str:
        return web.proxy_url(self.rm_url, app_id)

    def webhdfs(self, path: str) -> str:
        if not self.webhdfs_url:
            raise ClusterError("no WebHDFS URL configured (TONY_WEBHDFS_URL or the connection's webhdfs_url)")
        return f"{self.webhdfs_url.rstrip('/')}/webhdfs/v1/{urllib.parse.quote(path.lstrip('/'))}"


class ClusterHttp:
    """One blocking httpx client for every RM, NodeManager, proxy and WebHDFS call.

    :param settings: SPNEGO auth and TLS verification (``http.HttpSettings``).
    :param user: the caller for pseudo authentication (open clusters); None on a Kerberized one.
    """

    def __init__(self, settings: web.HttpSettings, *, user: str | None = None) -> None:
        self.settings = settings
        self.user = user
        self._client: httpx.Client | None = None

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = web.http_client(self.settings)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def request(
        self,
        method: str,
        url: str,
        *,
        what: str,
        params: dict[str, str] | None = None,
        json: Any = None,
        content: bytes | Iterator[bytes] | None = None,
        headers: dict[str, str] | None = None,
        follow_redirects: bool = True,
        timeout: float | None = None,
        accept: str | None = None,
    ) -> httpx.Response:
        """One call; any failure leaves as :func:`cluster_error`'s answer, naming ``what``."""
        # Merged into the URL's own query: httpx's params= would replace it (a DataNode's redirect
        # carries op=CREATE and its caller in its URL).
        target = httpx.URL(url)
        query = dict(params or {})
        if self.user and "user.name" not in query and "user.name" not in target.params:
            query["user.name"] = self.user
        if query:
            target = target.copy_merge_params(query)
        try:
            resp = self.client.request(
                method,
                target,
                json=json,
                content=content,
                follow_redirects=follow_redirects,
                headers={**(headers or {}), **({"Accept": accept} if accept else {})} or None,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
            if not follow_redirects and resp.is_redirect:
                return resp
            resp.raise_for_status()
        except KerberosError as exc:  # credentials or the server's principal: said with the endpoint
            raise KerberosError(f"{what}: {exc}") from exc
        except Exception as exc:
            raise cluster_error(what, exc) from exc
        return resp

    def get_json(self, url: str, *, what: str, params: dict[str, str] | None = None) -> Any:
        resp = self.request("GET", url, what=what, params=params)
        try:
            return resp.json()
        except ValueError as exc:
            raise ClusterError(f"{what}: not JSON (HTTP {resp.status_code}): {resp.text[:200]!r}") from exc

    def get_text(self, url: str, *, what: str) -> str:
        """A plain-text document (a container's log file: the NodeManager refuses ``Accept: application/json``)."""
        return self.request("GET", url, what=what, accept="text/plain, */*").text


class WebHdfs:
    """The few WebHDFS operations submitting needs, over :class:`ClusterHttp` (SPNEGO or ``user.name``).

    Shaped like the ``hdfs`` package's client for those operations (``status``,
    ``makedirs``, ``write``, ``upload``, ``rename``, ``delete``, ``resolve``),
    so the cache checks work with either; but it needs neither ``requests``
    nor that package's import (seconds on a loaded worker), and one httpx
    client may write several files at once from threads.
    """

    def __init__(self, http: ClusterHttp, urls: ClusterUrls) -> None:
        self.http = http
        self.urls = urls
        self._home: str | None = None

    def _op(self, method: str, path: str, op: str, **params: str) -> httpx.Response:
        return self.http.request(
            method, self.urls.webhdfs(path), what=f"WebHDFS {op} {path}", params={"op": op, **params}
        )

    def resolve(self, path: str) -> str:
        if path.startswith("/"):
            return path
        if self._home is None:
            self._home = str(self._op("GET", "/", "GETHOMEDIRECTORY").json()["Path"])
        return f"{self._home.rstrip('/')}/{path}"

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        try:
            return dict(self._op("GET", self.resolve(path), "GETFILESTATUS").json()["FileStatus"])
        except NotFound:
            if strict:
                raise
            return None

    def makedirs(self, path: str, permission: str | None = None) -> None:
        self._op("PUT", self.resolve(path), "MKDIRS", **({"permission": permission} if permission else {}))

    @contextlib.contextmanager
    def read(self, path: str) -> Iterator[_Reader]:
        """As the ``hdfs`` package's ``read``: ``with fs.read(p) as r: r.read(n)``.

        At most ``n`` bytes leave the DataNode: a file a job wrote (a model's
        record, a history) may be any size, the reader takes what it caps at.
        """
        yield _Reader(self, self.resolve(path))

    def walk(self, path: str) -> Iterator[tuple[str, list[str], list[str]]]:
        """As ``os.walk`` (and the ``hdfs`` package's ``walk``): ``(folder, its folders, its files)``, top down."""
        folder = self.resolve(path).rstrip("/") or "/"
        entries = self.list(folder, status=True)
        dirs = [name for name, st in entries if st.get("type") == "DIRECTORY"]
        yield folder, dirs, [name for name, st in entries if st.get("type") != "DIRECTORY"]
        for name in dirs:
            yield from self.walk(f"{folder.rstrip('/')}/{name}")

    def list(self, path: str, status: bool = False) -> list[Any]:
        """LISTSTATUS: the names in a folder, or ``(name, status)`` pairs (as the ``hdfs`` package's ``list``)."""
        found = self._op("GET", self.resolve(path), "LISTSTATUS").json()["FileStatuses"]["FileStatus"]
        return [(f["pathSuffix"], dict(f)) if status else f["pathSuffix"] for f in found]

    def write(
        self, path: str, data: bytes | str | BinaryIO, overwrite: bool = False, permission: str | None = None
    ) -> None:
        """CREATE in its two steps: the NameNode names a DataNode (``noredirect``), the bytes go there.

        ``data`` may be an open file: it is streamed in 1 MiB pieces with its
        length said up front, never read into memory whole (environment archives
        run to gigabytes).
        """
        params = {"overwrite": str(overwrite).lower(), "noredirect": "true"}
        if permission:
            params["permission"] = permission
        path = self.resolve(path)
        answer = self._op("PUT", path, "CREATE", **params)
        location = answer.json().get("Location") if "json" in answer.headers.get("content-type", "") else None
        location = location or answer.headers.get("location")
        if not location:
            raise ClusterError(f"WebHDFS CREATE {path}: the NameNode named no DataNode to write to")
        # The DataNode's URL carries the caller already (user.name, or a delegation token the NameNode chose).
        if isinstance(data, str):
            data = data.encode()
        if isinstance(data, bytes):
            self.http.request("PUT", location, what=f"WebHDFS write of {path}", content=data)
            return
        length = os.fstat(data.fileno()).st_size - data.tell()
        pieces = iter(functools.partial(data.read, 1 << 20), b"")
        headers = {"Content-Length": str(length)}
        self.http.request("PUT", location, what=f"WebHDFS write of {path}", content=pieces, headers=headers)

    def upload(self, path: str, local: str, overwrite: bool = False, permission: str | None = None, **_: Any) -> None:
        """One local file (the submitting side uploads no folders), streamed."""
        if os.path.isdir(local):
            raise ClusterError(f"cannot upload {local} to {path}: a folder (pack it first)")
        with open(local, "rb") as fh:
            self.write(path, fh, overwrite=overwrite, permission=permission)

    def rename(self, src: str, dst: str) -> None:
        """RENAME as the ``hdfs`` package does it: its ``false`` (source missing, a file at ``dst``) is an error.

        Beware: onto an existing folder this moves ``src`` inside it; :meth:`move` never does.
        """
        src, dst = self.resolve(src), self.resolve(dst)
        answer = self._op("PUT", src, "RENAME", destination=dst).json()
        if not answer.get("boolean"):
            raise RenameFailed(src, dst, "WebHDFS answered false (the source is missing or the destination is taken)")

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        """RENAME with ``renameoptions`` (HDFS's rename2): never into a folder, one atomic step.

        Without ``overwrite`` an existing ``dst`` is refused (HTTP 403
        FileAlreadyExistsException); with it a file ``dst`` is replaced
        atomically (readers see the old file or the new one, never none).
        A missing source or parent is HTTP 404. Each refusal raises :class:`RenameFailed`.
        """
        src, dst = self.resolve(src), self.resolve(dst)
        options = "OVERWRITE" if overwrite else "NONE"
        try:
            self._op("PUT", src, "RENAME", destination=dst, renameoptions=options)
        except (NotFound, ClusterForbidden) as exc:
            raise RenameFailed(src, dst, exc) from exc

    def delete(self, path: str, recursive: bool = False) -> None:
        self._op("DELETE", self.resolve(path), "DELETE", recursive=str(recursive).lower())


class _Reader:
    """What ``WebHdfs.read`` yields: one OPEN per ``read``, capped at the size asked for."""

    def __init__(self, fs: WebHdfs, path: str) -> None:
        self.fs, self.path, self.offset = fs, path, 0

    def read(self, size: int = -1) -> bytes:
        params = {"offset": str(self.offset), **({"length": str(size)} if size >= 0 else {})}
        data = self.fs._op("GET", self.path, "OPEN", **params).content
        data = data[:size] if size >= 0 else data
        self.offset += len(data)
        return data
