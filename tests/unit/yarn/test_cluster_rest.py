"""The submitting side's one door to the cluster's HTTP APIs (``yarn/rest.py``), against fakes over MockTransport.

Three parts, each checked by what a caller or the cluster sees:

- ``cluster_error``: which exception a failure becomes (the caller waits,
  gives up, or fixes credentials by it) and that its message names the call,
  the status and the server's answer on one line;
- ``ClusterHttp``: the request that leaves (method, URL, the ``user.name``
  of pseudo authentication, redirects, timeouts, the Accept header) and the
  error that comes back;
- ``WebHdfs``: every operation against a small in-memory NameNode and
  DataNode that speaks WebHDFS's own shapes and refuses a wrong method, so
  a wrong operation, parameter or path shows as a wrong file system.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime.errors import (
    ClusterError,
    ClusterForbidden,
    ClusterUnreachable,
    KerberosError,
    NotFound,
    RenameFailed,
)
from airflow_provider_tony.yarn.http import HttpSettings
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls, WebHdfs, cluster_error

APP = "application_1700000000000_0042"


# --- cluster_error ---------------------------------------------------------------------------------


def _status_error(status: int, text: str) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "http://rm:8088/ws/v1/cluster/x")
    return httpx.HTTPStatusError("x", request=request, response=httpx.Response(status, text=text, request=request))


@pytest.mark.parametrize(
    ("status", "kind", "message"),
    [
        (404, NotFound, "the RM: not found (HTTP 404) no such app"),
        (500, ClusterUnreachable, "the RM: the server failed (HTTP 500) no such app"),
        (501, ClusterUnreachable, "the RM: the server failed (HTTP 501) no such app"),
        (499, ClusterError, "the RM: refused (HTTP 499) no such app"),
        (400, ClusterError, "the RM: refused (HTTP 400) no such app"),
    ],
)
def test_an_error_answer_names_the_call_the_status_and_the_body_on_one_line(
    status: int, kind: type[ClusterError], message: str
) -> None:
    """A 5xx is the server failing (worth waiting for: 500 too), any other 4xx a refusal; the body's
    words are kept, its line breaks and runs of blanks folded so the log holds one line."""
    err = cluster_error("the RM", _status_error(status, "  no\n such\t\tapp \n"))
    assert type(err) is kind
    assert str(err) == message


@pytest.mark.parametrize("status", [404, 500, 400])
def test_an_error_answer_without_a_body_ends_at_the_status(status: int) -> None:
    assert str(cluster_error("the RM", _status_error(status, ""))).endswith(f"(HTTP {status})")


def test_a_long_body_is_cut_at_300_characters() -> None:
    """A Java stack trace in an answer must not flood the log: its first 300 characters only."""
    err = cluster_error("the RM", _status_error(400, "a" * 299 + "bc" + "d" * 500))
    assert str(err) == "the RM: refused (HTTP 400) " + "a" * 299 + "b"


@pytest.mark.parametrize("status", [401, 403])
def test_a_refusal_of_the_caller_says_what_to_check(status: int) -> None:
    """401/403 on a Kerberized cluster: the ticket, the URL's host against the HTTP/<host> principal, the ACLs."""
    err = cluster_error("the RM", _status_error(status, "denied"))
    assert type(err) is ClusterForbidden
    assert str(err).startswith(f"the RM: refused (HTTP {status}) denied; ")
    assert str(err).endswith(
        "check the ticket/keytab, that the URL's host is the one in the server's HTTP/<host> principal, and the ACLs"
    )


def test_a_transport_failure_says_which_and_why() -> None:
    err = cluster_error("the RM at http://rm:8088", httpx.ConnectError("connection refused"))
    assert type(err) is ClusterUnreachable
    assert str(err) == "the RM at http://rm:8088: unreachable (ConnectError: connection refused)"


def test_any_other_failure_is_a_cluster_error_naming_its_kind() -> None:
    err = cluster_error("the RM", ValueError("bad JSON"))
    assert type(err) is ClusterError
    assert str(err) == "the RM: ValueError: bad JSON"
    same = ClusterForbidden("already classified")
    assert cluster_error("the RM", same) is same


# --- ClusterUrls ---------------------------------------------------------------------------------


def test_urls_are_joined_with_one_slash_whatever_the_configuration_ends_with() -> None:
    urls = ClusterUrls("http://rm:8088/", "http://nn:9870/")
    assert urls.rm("/scheduler") == "http://rm:8088/ws/v1/cluster/scheduler"
    assert urls.app(APP) == f"http://rm:8088/ws/v1/cluster/apps/{APP}"
    assert urls.app(APP, "/state") == f"http://rm:8088/ws/v1/cluster/apps/{APP}/state"
    assert ClusterUrls.nm("node1:8042", "/containers/c_1/logs") == "http://node1:8042/ws/v1/node/containers/c_1/logs"
    assert urls.proxy(APP) == f"http://rm:8088/proxy/{APP}/"
    assert urls.webhdfs("/user/alice/a b") == "http://nn:9870/webhdfs/v1/user/alice/a%20b"
    # A folder whose name starts or ends with an X is still the folder named.
    assert urls.webhdfs("/XGBoost/runX") == "http://nn:9870/webhdfs/v1/XGBoost/runX"


def test_an_application_id_cannot_leave_its_place_in_the_url() -> None:
    """Quoted whole (slashes too): whatever an id holds, it names one application, never another path."""
    assert ClusterUrls("http://rm:8088").app("a/../../x") == "http://rm:8088/ws/v1/cluster/apps/a%2F..%2F..%2Fx"


def test_webhdfs_without_its_url_names_the_settings_to_give() -> None:
    with pytest.raises(ClusterError, match="^no WebHDFS URL configured") as refused:
        ClusterUrls("http://rm:8088").webhdfs("/x")
    assert str(refused.value).endswith("(TONY_WEBHDFS_URL or the connection's webhdfs_url)")


# --- ClusterHttp -----------------------------------------------------------------------------------


def _http(handler: Any, *, user: str | None = "alice", follow_redirects: bool = False) -> ClusterHttp:
    http = ClusterHttp(HttpSettings(), user=user)
    http._client = httpx.Client(transport=httpx.MockTransport(handler), timeout=7.0, follow_redirects=follow_redirects)
    return http


def test_the_client_is_built_from_the_settings_once_and_closed_for_good() -> None:
    """The settings (SPNEGO, CA bundle, timeout) reach the client; close() closes it, and a later call
    gets a new one rather than a closed one."""
    http = ClusterHttp(HttpSettings(timeout=3.5))
    first = http.client
    assert isinstance(first, httpx.Client) and http.client is first
    assert first.timeout == httpx.Timeout(3.5)
    http.close()
    assert first.is_closed
    second = http.client
    assert isinstance(second, httpx.Client) and second is not first and not second.is_closed
    http.close()
    http.close()  # twice: nothing to close


def test_pseudo_authentication_adds_the_caller_unless_the_call_or_its_url_names_one() -> None:
    """A DataNode's redirect carries its caller already: a second ``user.name`` would be a second caller."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    http = _http(handle)
    http.request("GET", "http://rm:8088/ws/v1/cluster/apps?states=RUNNING", what="the RM")
    http.request("GET", "http://rm:8088/x", what="the RM", params={"user.name": "bob"})
    http.request("PUT", "http://dn:9864/webhdfs/v1/f?op=CREATE&user.name=carol", what="the DataNode")
    assert [r.url.params.get_list("user.name") for r in seen] == [["alice"], ["bob"], ["carol"]]
    assert seen[0].url.params["states"] == "RUNNING", "the URL's own query is kept"
    _http(handle, user=None).request("GET", "http://rm:8088/x", what="the RM")
    assert "user.name" not in seen[-1].url.params  # Kerberos says who it is


def test_a_redirect_is_followed_unless_the_caller_reads_it_itself() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.host == "standby":
            return httpx.Response(307, headers={"Location": "http://active:8088/ws/v1/cluster/info"})
        if request.url.path == "/missing":
            return httpx.Response(404, text="gone")
        return httpx.Response(200, json={"host": request.url.host})

    for http in (_http(handle), _http(handle, follow_redirects=True)):
        assert http.request("GET", "http://standby:8088/x", what="the RM").json() == {"host": "active"}
        answer = http.request("GET", "http://standby:8088/x", what="the RM", follow_redirects=False)
        assert answer.status_code == 307 and answer.headers["location"].startswith("http://active:8088/")
        with pytest.raises(NotFound, match="the RM: not found"):
            http.request("GET", "http://active:8088/missing", what="the RM", follow_redirects=False)


def test_a_call_waits_its_own_timeout_or_the_clients() -> None:
    timeouts: list[Any] = []

    def handle(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        return httpx.Response(200)

    http = _http(handle)
    http.request("GET", "http://rm:8088/x", what="the RM")
    http.request("GET", "http://rm:8088/x", what="the RM", timeout=2.0)
    assert timeouts == [7.0, 2.0]


def test_a_kerberos_failure_names_the_endpoint_it_was_for() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        raise KerberosError("no ticket for HTTP/rm@REALM")

    with pytest.raises(KerberosError) as failed:
        _http(handle).request("GET", "http://rm:8088/x", what="the RM at http://rm:8088")
    assert str(failed.value) == "the RM at http://rm:8088: no ticket for HTTP/rm@REALM"


def test_get_json_reads_an_answer_and_says_when_it_is_not_json() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.method != "GET":
            return httpx.Response(405)
        if request.url.path == "/html":
            return httpx.Response(200, text="<html>" + "x" * 300)
        return httpx.Response(200, json={"clusterInfo": {"state": "STARTED"}, "q": request.url.params["q"]})

    http = _http(handle)
    assert http.get_json("http://rm:8088/info", what="the RM", params={"q": "1"}) == {
        "clusterInfo": {"state": "STARTED"},
        "q": "1",
    }
    with pytest.raises(ClusterError) as failed:
        http.get_json("http://rm:8088/html", what="the RM's info")
    assert str(failed.value) == "the RM's info: not JSON (HTTP 200): " + repr("<html>" + "x" * 194)
    with pytest.raises(ClusterError, match="^the RM's info: refused"):
        _http(lambda r: httpx.Response(400)).get_json("http://rm:8088/info", what="the RM's info")


def test_get_text_asks_for_plain_text() -> None:
    """A NodeManager refuses ``Accept: application/json`` (the client's default) for a log file."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method != "GET":
            return httpx.Response(405)
        if request.url.path.endswith("/gone"):
            return httpx.Response(404)
        return httpx.Response(200, text="line 1\nline 2\n")

    http = ClusterHttp(HttpSettings(), user="alice")
    http._client = httpx.Client(transport=httpx.MockTransport(handle), headers={"Accept": "application/json"})
    url = ClusterUrls.nm("node1:8042", "containerlogs/c_1/stderr")
    assert http.get_text(url, what="the log") == "line 1\nline 2\n"
    assert seen[0].headers["accept"] == "text/plain, */*" and seen[0].url.params["user.name"] == "alice"
    assert str(seen[0].url).startswith("http://node1:8042/ws/v1/node/containerlogs/c_1/stderr")
    with pytest.raises(NotFound, match="^stderr of c_1: not found"):
        http.get_text(url + "/gone", what="stderr of c_1")


# --- WebHdfs ---------------------------------------------------------------------------------------

METHODS = {
    "GETHOMEDIRECTORY": "GET",
    "GETFILESTATUS": "GET",
    "LISTSTATUS": "GET",
    "OPEN": "GET",
    "MKDIRS": "PUT",
    "CREATE": "PUT",
    "RENAME": "PUT",
    "DELETE": "DELETE",
}


def _remote(status: int, exception: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"RemoteException": {"exception": exception, "message": message}})


class FakeWebHdfs:
    """A NameNode and a DataNode over one dict of files and a set of folders, in WebHDFS's shapes.

    Each operation answers only to its own HTTP method (a wrong one is a 400, as WebHDFS
    refuses it); ``sent`` keeps each call as ``(method, path, params)`` without the caller.
    """

    def __init__(self, home: str = "/user/alice") -> None:
        self.home = home
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/", "/user", "/user/alice"}
        self.modes: dict[str, str] = {}
        self.sent: list[tuple[str, str, dict[str, str]]] = []
        self.pieces: list[int] = []  # the sizes of the pieces of the last DataNode write
        self.length_header: str | None = None
        self.location_in_header = False  # an older NameNode: the DataNode in a header, no JSON
        self.ignore_length = False  # a server that sends the rest of the file whatever length asked

    def handle(self, request: httpx.Request) -> httpx.Response:
        params = {k: v for k, v in request.url.params.items() if k != "user.name"}
        path = urllib.parse.unquote(request.url.path).removeprefix("/webhdfs/v1") or "/"
        path = path.rstrip("/") or "/" if path.startswith("/") else path  # HDFS reads /d/ as /d
        self.sent.append((request.method, path, params))
        op = params.get("op", "")
        if METHODS.get(op) != request.method:
            return _remote(400, "IllegalArgumentException", f"Invalid value for webhdfs parameter op: {op}")
        if request.url.host == "dn":
            return self._datanode(request, path)
        if op != "GETHOMEDIRECTORY" and ("//" in path or not path.startswith("/")):
            return _remote(400, "InvalidPathException", f"Invalid path name {path}")
        return getattr(self, op.lower())(path, params)

    def _datanode(self, request: httpx.Request, path: str) -> httpx.Response:
        pieces = list(request.stream)  # type: ignore[arg-type]
        self.pieces = [len(p) for p in pieces]
        self.length_header = request.headers.get("content-length")
        self.files[path] = b"".join(pieces)
        return httpx.Response(201, headers={"Location": f"hdfs://nn:8020{path}"})

    def _missing(self, path: str) -> httpx.Response:
        return _remote(404, "FileNotFoundException", f"File does not exist: {path}")

    def _status(self, path: str) -> dict[str, Any]:
        name = path.rstrip("/").rpartition("/")[2]
        if path in self.dirs:
            return {"pathSuffix": name, "type": "DIRECTORY", "length": 0, "permission": self.modes.get(path, "755")}
        return {"pathSuffix": name, "type": "FILE", "length": len(self.files[path])}

    def gethomedirectory(self, path: str, params: dict[str, str]) -> httpx.Response:
        if path != "/":
            return _remote(400, "IllegalArgumentException", "GETHOMEDIRECTORY is asked of /")
        return httpx.Response(200, json={"Path": self.home})

    def getfilestatus(self, path: str, params: dict[str, str]) -> httpx.Response:
        if path not in self.dirs and path not in self.files:
            return self._missing(path)
        return httpx.Response(200, json={"FileStatus": {**self._status(path), "pathSuffix": ""}})

    def liststatus(self, path: str, params: dict[str, str]) -> httpx.Response:
        if path not in self.dirs:
            return self._missing(path)
        prefix = path.rstrip("/") + "/"
        children = sorted(p for p in [*self.dirs, *self.files] if p != "/" and p.rpartition("/")[0] + "/" == prefix)
        return httpx.Response(200, json={"FileStatuses": {"FileStatus": [self._status(p) for p in children]}})

    def mkdirs(self, path: str, params: dict[str, str]) -> httpx.Response:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            self.dirs.add("/" + "/".join(parts[:i]))
        self.modes[path] = params.get("permission", "755")
        return httpx.Response(200, json={"boolean": True})

    def create(self, path: str, params: dict[str, str]) -> httpx.Response:
        if path in self.files and params.get("overwrite", "false") != "true":
            return _remote(403, "FileAlreadyExistsException", f"{path} already exists")
        self.modes[path] = params.get("permission", "644")
        location = f"http://dn:9864/webhdfs/v1{urllib.parse.quote(path)}?op=CREATE&namenoderpcaddress=nn:8020"
        if self.location_in_header:
            return httpx.Response(200, headers={"Location": location})
        return httpx.Response(200, json={"Location": location})

    def open(self, path: str, params: dict[str, str]) -> httpx.Response:
        if path not in self.files:
            return self._missing(path)
        data = self.files[path][int(params.get("offset", "0")) :]
        if "length" in params and not self.ignore_length:
            data = data[: int(params["length"])]
        return httpx.Response(200, content=data)

    def rename(self, path: str, params: dict[str, str]) -> httpx.Response:
        dst = params["destination"]
        options = params.get("renameoptions")
        if options is None:  # rename: false for a missing source or a file at the destination
            if path not in self.files or dst in self.files:
                return httpx.Response(200, json={"boolean": False})
            if dst in self.dirs:
                dst = f"{dst}/{path.rpartition('/')[2]}"
            self.files[dst] = self.files.pop(path)
            return httpx.Response(200, json={"boolean": True})
        if options not in ("NONE", "OVERWRITE"):
            return _remote(400, "IllegalArgumentException", f"Invalid value for renameoptions: {options}")
        if path not in self.files or dst.rpartition("/")[0] not in self.dirs:
            return self._missing(path)
        if (dst in self.files and options == "NONE") or dst in self.dirs:
            return _remote(403, "FileAlreadyExistsException", f"rename destination {dst} already exists")
        self.files[dst] = self.files.pop(path)
        return httpx.Response(200)

    def delete(self, path: str, params: dict[str, str]) -> httpx.Response:
        recursive = params.get("recursive", "false")
        if recursive not in ("true", "false"):
            return _remote(400, "IllegalArgumentException", f"Invalid value for recursive: {recursive}")
        inside = [p for p in [*self.files, *self.dirs] if p.startswith(path.rstrip("/") + "/")]
        if inside and recursive != "true":
            return _remote(403, "PathIsNotEmptyDirectoryException", f"{path} is non empty")
        for p in [path, *inside]:
            self.files.pop(p, None)
            self.dirs.discard(p)
        return httpx.Response(200, json={"boolean": True})


class _Unread(httpx.BaseTransport):
    """As MockTransport, but leaves the request's body unread: the fake sees the pieces it is sent in."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response: httpx.Response = self.handler(request)
        return response


def fs_of(server: FakeWebHdfs) -> WebHdfs:
    http = ClusterHttp(HttpSettings(), user="alice")
    http._client = httpx.Client(transport=_Unread(server.handle))
    return WebHdfs(http, ClusterUrls("http://rm:8088", "http://nn:9870"))


def test_a_relative_path_is_under_the_home_folder_the_namenode_names_once() -> None:
    server = FakeWebHdfs()
    fs = fs_of(server)
    assert fs.resolve("/abs/x") == "/abs/x"
    assert server.sent == [], "an absolute path needs no call"
    assert fs.resolve("tony/x") == "/user/alice/tony/x"
    assert fs.resolve("y") == "/user/alice/y"
    assert server.sent == [("GET", "/", {"op": "GETHOMEDIRECTORY"})], "asked once, remembered"


@pytest.mark.parametrize(("home", "resolved"), [("/user/MAX/", "/user/MAX/x"), ("/", "/x")])
def test_a_home_folder_ending_in_a_slash_gets_no_second_one(home: str, resolved: str) -> None:
    assert fs_of(FakeWebHdfs(home)).resolve("x") == resolved


def test_status_of_a_file_and_of_none() -> None:
    server = FakeWebHdfs()
    server.files["/user/alice/f"] = b"abc"
    fs = fs_of(server)
    assert fs.status("f") == {"pathSuffix": "", "type": "FILE", "length": 3}
    assert fs.status("/nope", strict=False) is None
    with pytest.raises(NotFound, match="^WebHDFS GETFILESTATUS /nope: not found"):
        fs.status("/nope")


def test_makedirs_with_and_without_a_permission() -> None:
    server = FakeWebHdfs()
    fs = fs_of(server)
    fs.makedirs("tony/private", permission="700")
    fs.makedirs("/data/shared")
    assert {"/user/alice/tony/private", "/data/shared"} <= server.dirs
    assert server.sent[1:] == [
        ("PUT", "/user/alice/tony/private", {"op": "MKDIRS", "permission": "700"}),
        ("PUT", "/data/shared", {"op": "MKDIRS"}),
    ]


def test_write_asks_the_namenode_then_puts_the_bytes_on_the_datanode() -> None:
    server = FakeWebHdfs()
    fs = fs_of(server)
    fs.write("notes.txt", "héllo")
    assert server.files["/user/alice/notes.txt"] == "héllo".encode()
    create = server.sent[1]
    assert create == ("PUT", "/user/alice/notes.txt", {"op": "CREATE", "overwrite": "false", "noredirect": "true"})
    with pytest.raises(ClusterError, match="already exists"):
        fs.write("notes.txt", b"again")  # not overwritten unless asked
    fs.write("notes.txt", b"again", overwrite=True, permission="600")
    assert server.files["/user/alice/notes.txt"] == b"again" and server.modes["/user/alice/notes.txt"] == "600"


def test_write_finds_the_datanode_in_a_header_when_the_answer_is_not_json() -> None:
    server = FakeWebHdfs()
    server.location_in_header = True
    fs_of(server).write("/f", b"data")
    assert server.files["/f"] == b"data"


def test_write_without_a_datanode_named_says_so() -> None:
    fs = fs_of(FakeWebHdfs())
    fs.http._client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={})))
    with pytest.raises(ClusterError, match="^WebHDFS CREATE /f: the NameNode named no DataNode to write to$"):
        fs.write("/f", b"data")


def test_a_refused_datanode_write_names_the_file(tmp_path: Path) -> None:
    server = FakeWebHdfs()
    fs = fs_of(server)

    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="disk full") if request.url.host == "dn" else server.handle(request)

    fs.http._client = httpx.Client(transport=httpx.MockTransport(refuse))
    local = tmp_path / "f"
    local.write_bytes(b"stream")
    with pytest.raises(ClusterUnreachable, match="^WebHDFS write of /f: the server failed"):
        fs.write("/f", b"bytes")
    with local.open("rb") as fh, pytest.raises(ClusterUnreachable, match="^WebHDFS write of /f: the server failed"):
        fs.write("/f", fh)


def test_an_open_file_is_streamed_from_where_it_stands_in_pieces_of_a_mebibyte(tmp_path: Path) -> None:
    """Environment archives run to gigabytes: never read whole, the length said up front (a DataNode
    need not take a chunked body)."""
    local = tmp_path / "env.tar.gz"
    content = bytes(range(256)) * (10 * 1024 + 4)  # 2.5 MiB and a kilobyte
    local.write_bytes(content)
    server = FakeWebHdfs()
    fs = fs_of(server)
    with local.open("rb") as fh:
        fh.seek(1000)
        fs.write("/env.tar.gz", fh)
    assert server.files["/env.tar.gz"] == content[1000:]
    assert server.length_header == str(len(content) - 1000)
    assert server.pieces == [1 << 20, 1 << 20, len(content) - 1000 - (2 << 20)]


def test_upload_streams_a_local_file_with_the_options_given(tmp_path: Path) -> None:
    local = tmp_path / "a.zip"
    local.write_bytes(b"zip")
    server = FakeWebHdfs()
    fs = fs_of(server)
    fs.upload("/a.zip", str(local))
    with pytest.raises(ClusterError, match="already exists"):
        fs.upload("/a.zip", str(local))  # not overwritten unless asked
    fs.upload("/a.zip", str(local), overwrite=True, permission="640", n_threads=4)
    assert server.files["/a.zip"] == b"zip" and server.modes["/a.zip"] == "640"
    creates = [params for _, _, params in server.sent if "noredirect" in params]  # to the NameNode
    assert creates[-1] == {"op": "CREATE", "overwrite": "true", "noredirect": "true", "permission": "640"}
    with pytest.raises(ClusterError, match="a folder"):
        fs.upload("/dir", str(tmp_path))


def test_list_and_walk_a_tree_top_down() -> None:
    server = FakeWebHdfs()
    server.dirs |= {"/data", "/data/runX", "/data/runX/ckpt"}
    server.files |= {"/data/a": b"1", "/data/runX/b": b"22", "/data/runX/ckpt/c": b"333"}
    fs = fs_of(server)
    assert fs.list("/data") == ["a", "runX"]
    assert fs.list("/data/", status=True)[0] == ("a", {"pathSuffix": "a", "type": "FILE", "length": 1})
    assert list(fs.walk("/data/")) == [
        ("/data", ["runX"], ["a"]),
        ("/data/runX", ["ckpt"], ["b"]),
        ("/data/runX/ckpt", [], ["c"]),
    ]
    server.dirs |= {"/top"}
    assert [folder for folder, _, _ in fs.walk("/")][:3] == ["/", "/data", "/data/runX"]


def test_read_takes_at_most_what_is_asked_and_goes_on_from_there() -> None:
    """A job's file may be any size: the reader caps what leaves the DataNode and what it returns,
    even from a server that sends more than asked."""
    server = FakeWebHdfs()
    server.files["/user/alice/record"] = b"0123456789abcdef"
    fs = fs_of(server)
    for ignore_length in (False, True):
        server.ignore_length = ignore_length
        with fs.read("record") as reader:
            assert reader.read(4) == b"0123"
            assert reader.read(0) == b""
            assert reader.read(3) == b"456"
            assert reader.read(2) == b"78"
            assert reader.read() == b"9abcdef"
    opens = [params for _, _, params in server.sent if params.get("op") == "OPEN"][:5]
    assert opens == [
        {"op": "OPEN", "offset": "0", "length": "4"},
        {"op": "OPEN", "offset": "4", "length": "0"},
        {"op": "OPEN", "offset": "4", "length": "3"},
        {"op": "OPEN", "offset": "7", "length": "2"},
        {"op": "OPEN", "offset": "9"},
    ]


def test_rename_moves_and_refuses_as_the_hdfs_package_does() -> None:
    """``false`` from WebHDFS (a missing source, a taken destination) is an error naming both paths."""
    server = FakeWebHdfs()
    server.files |= {"/user/alice/a": b"a", "/user/alice/taken": b"t"}
    fs = fs_of(server)
    fs.rename("a", "b")
    assert server.files["/user/alice/b"] == b"a" and "/user/alice/a" not in server.files
    assert server.sent[-1] == ("PUT", "/user/alice/a", {"op": "RENAME", "destination": "/user/alice/b"})
    with pytest.raises(RenameFailed) as refused:
        fs.rename("b", "taken")
    assert (refused.value.src, refused.value.dst) == ("/user/alice/b", "/user/alice/taken")
    assert str(refused.value) == (
        "could not rename /user/alice/b to /user/alice/taken on HDFS: "
        "WebHDFS answered false (the source is missing or the destination is taken)"
    )
    assert server.files["/user/alice/taken"] == b"t"


def test_move_never_lands_inside_a_folder_and_replaces_only_when_asked() -> None:
    server = FakeWebHdfs()
    server.dirs |= {"/user/alice/d"}
    server.files |= {"/user/alice/a": b"new", "/user/alice/old": b"old"}
    fs = fs_of(server)
    with pytest.raises(RenameFailed) as refused:
        fs.move("a", "old")
    assert (refused.value.src, refused.value.dst) == ("/user/alice/a", "/user/alice/old")
    assert str(refused.value).startswith("could not rename /user/alice/a to /user/alice/old on HDFS: WebHDFS RENAME")
    assert "FileAlreadyExistsException" in str(refused.value)
    assert server.sent[-1] == (
        "PUT",
        "/user/alice/a",
        {"op": "RENAME", "destination": "/user/alice/old", "renameoptions": "NONE"},
    )
    with pytest.raises(RenameFailed, match="already exists"):
        fs.move("a", "d", overwrite=True)
    fs.move("a", "old", overwrite=True)
    assert server.files["/user/alice/old"] == b"new" and "/user/alice/a" not in server.files
    assert server.sent[-1][2]["renameoptions"] == "OVERWRITE"
    with pytest.raises(RenameFailed, match="not found"):
        fs.move("a", "b")
    fs.move("old", "fresh")
    assert server.files["/user/alice/fresh"] == b"new"


def test_delete_a_file_and_a_folder_only_when_asked_for_all_of_it() -> None:
    server = FakeWebHdfs()
    server.dirs |= {"/user/alice/d"}
    server.files |= {"/user/alice/f": b"f", "/user/alice/d/g": b"g"}
    fs = fs_of(server)
    fs.delete("f")
    assert server.sent[-1] == ("DELETE", "/user/alice/f", {"op": "DELETE", "recursive": "false"})
    with pytest.raises(ClusterForbidden, match="non empty"):
        fs.delete("d")
    assert "/user/alice/d/g" in server.files
    fs.delete("d", recursive=True)
    assert server.sent[-1] == ("DELETE", "/user/alice/d", {"op": "DELETE", "recursive": "true"})
    assert not any(p.startswith("/user/alice/d") for p in [*server.files, *server.dirs])
    assert "/user/alice/f" not in server.files


def test_an_operation_refused_names_the_operation_and_the_path() -> None:
    fs = fs_of(FakeWebHdfs())
    with pytest.raises(NotFound, match="^WebHDFS LISTSTATUS /none: not found .*FileNotFoundException"):
        fs.list("/none")


def test_a_cookie_goes_back_only_to_the_port_that_set_it() -> None:
    """A NameNode's hadoop.auth cookie must not reach a ResourceManager on the same host (and a
    standby RM's redirect there): Hadoop refuses another server's token type with a 401."""
    from airflow_provider_tony.yarn.http import http_client

    def server(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/login":
            return httpx.Response(200, headers={"set-cookie": "hadoop.auth=nn-token; Path=/"})
        if request.url.port == 9870 and request.url.path == "/hop":  # a standby's redirect to the active one
            return httpx.Response(307, headers={"location": "http://localhost:8088/seen"})
        return httpx.Response(200, json={"cookie": request.headers.get("cookie")})

    client = http_client(HttpSettings())
    client._transport = httpx.MockTransport(server)
    client.get("http://localhost:9870/login")
    assert client.get("http://localhost:9870/seen").json() == {"cookie": "hadoop.auth=nn-token"}
    assert client.get("http://localhost:8088/seen").json() == {"cookie": None}
    assert client.get("http://localhost:9870/hop").json() == {"cookie": None}
