"""Fresh HDFS delegation tokens (``kerberos.refresh_tokens``) without a cluster.

The schedule, the token's dates, the message, the executors' token swap and
its refusal past a token's end, the AM's refresher loop against a stand-in
WebHDFS, and the submit-side shipping of the keytab to the AM alone. The
secure-cluster proof is ``tests/integration/test_secure.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import token_refresh as tr
from airflow_provider_tony.runtime.errors import ClusterError, KeytabCopyLeft, SpecError
from airflow_provider_tony.runtime.hadoop_tokens import Token, _text, _vint
from airflow_provider_tony.runtime.messages import DelegationToken, TokenPointer
from airflow_provider_tony.runtime.spec import JobSpec

T0 = 1_800_000_000.0  # a wall-clock instant, seconds


def identifier(issued: float, max_date: float, owner: str = "tony") -> bytes:
    """``AbstractDelegationTokenIdentifier.write`` as Hadoop does it (milliseconds)."""
    return (
        b"\x00"
        + _text(owner)
        + _text(owner)
        + _text("")
        + _vint(int(issued * 1000))
        + _vint(int(max_date * 1000))
        + _vint(7)
        + _vint(3)
    )


def token(issued: float, max_date: float, password: bytes = b"pw") -> Token:
    return Token(
        alias="",
        kind="HDFS_DELEGATION_TOKEN",
        service="127.0.0.1:8020",
        identifier=identifier(issued, max_date),
        password=password,
    )


# ---------------------------------------------------------------- dates and schedule


def test_identifier_dates_read_hadoops_layout() -> None:
    dates = tr.identifier_dates(identifier(T0, T0 + 604_800))
    assert dates == tr.TokenDates(T0, T0 + 604_800)
    # Not a delegation token identifier we know: no dates rather than wrong ones.
    assert tr.identifier_dates(b"\x01" + identifier(T0, T0 + 1)[1:]) is None
    assert tr.identifier_dates(identifier(T0, T0 + 1)[:6]) is None
    assert tr.identifier_dates(identifier(T0, T0 - 1)) is None


@pytest.mark.parametrize(
    "expires, max_date, due",
    [
        (T0 + 86_400, T0 + 604_800, T0 + 64_800),  # Hadoop's defaults: 18 h after a renewal that gave a day
        (T0 + 86_400, T0 + 3_600, T0 + 2_700),  # the maximum date comes first: it decides
        (None, T0 + 240, T0 + 180),  # no expiry told: the maximum date alone
        (T0 + 60, None, T0 + 45),  # no maximum date read: the expiry alone
        (None, None, T0 + tr.FALLBACK_REFRESH_S),
        (T0 + 2, T0 + 600, T0 + tr.MIN_REFRESH_S),  # never a busy loop
        (T0 - 10, None, T0 + tr.MIN_REFRESH_S),  # already past: as soon as allowed
    ],
)
def test_next_refresh_is_three_quarters_of_the_time_left(
    expires: float | None, max_date: float | None, due: float
) -> None:
    assert tr.next_refresh(T0, expires, max_date) == pytest.approx(due)


def test_retry_delay_doubles_up_to_a_cap() -> None:
    assert [tr.retry_delay(n) for n in (1, 2, 3, 4)] == [5.0, 10.0, 20.0, 40.0]
    assert tr.retry_delay(20) == tr.RETRY_MAX_S


def test_the_message_round_trips_and_keeps_the_token_out_of_its_repr() -> None:
    secret = token(T0, T0 + 100).url_string()
    msg = DelegationToken(token=secret, seq=3, issued=T0, expires=T0 + 60, max_date=T0 + 100)
    assert DelegationToken.from_json(msg.to_json()) == msg
    assert secret not in repr(msg)


# ---------------------------------------------------------------- the executors' token source


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Store:
    """The key the AM writes, read the way the executor reads it; counts reads."""

    def __init__(self) -> None:
        self.raw: bytes | None = None
        self.reads = 0

    def fetch(self) -> bytes | None:
        self.reads += 1
        return self.raw

    def publish(self, msg: DelegationToken) -> None:
        self.raw = msg.to_json()


def test_the_source_swaps_to_each_newer_published_token() -> None:
    own = token(T0, T0 + 240, b"own")
    clock, store = Clock(T0 + 1), Store()
    source = tr.TokenSource(own, store.fetch, refreshing=True, poll_s=10, clock=clock)
    assert source.current() == own.url_string() and source.seq == -1 and source.end == T0 + 240
    fresh = token(T0 + 5, T0 + 245, b"fresh")
    store.publish(DelegationToken(token=fresh.url_string(), seq=0, expires=T0 + 65, max_date=T0 + 245))
    clock.now += 5
    assert source.current() == own.url_string(), "looked again before poll_s"
    clock.now += 5
    assert source.current() == fresh.url_string() and source.seq == 0 and source.end == T0 + 65
    # An older message (a reordered read) never replaces a newer token.
    store.publish(DelegationToken(token=own.url_string(), seq=0, expires=T0 + 999))
    clock.now += 10
    assert source.current() == fresh.url_string()
    assert store.reads == 3


def test_past_its_end_the_source_looks_at_once_then_refuses_with_the_cause() -> None:
    own = token(T0, T0 + 240)
    clock, store = Clock(T0 + 100), Store()
    source = tr.TokenSource(own, store.fetch, refreshing=True, poll_s=600, clock=clock)
    source.current()
    clock.now = T0 + 240
    with pytest.raises(ClusterError, match="stopped working at .* no fresh one: see the AM's log") as err:
        source.current()
    assert own.url_string() not in str(err.value)
    assert store.reads == 2, "the end forces a look despite poll_s"
    fresh = token(T0 + 230, T0 + 470)
    store.publish(DelegationToken(token=fresh.url_string(), seq=0, expires=T0 + 290, max_date=T0 + 470))
    assert source.current() == fresh.url_string(), "a late token still rescues the upload"


def test_without_refresh_the_error_says_how_to_turn_it_on() -> None:
    source = tr.TokenSource(token(T0, T0 + 240), None, clock=Clock(T0 + 241))
    with pytest.raises(ClusterError, match="maximum lifetime.*set kerberos.refresh_tokens"):
        source.current()


def test_a_corrupt_message_is_ignored() -> None:
    own = token(T0, T0 + 240)
    store = Store()
    store.raw = b"{not json"
    source = tr.TokenSource(own, store.fetch, refreshing=True, clock=Clock(T0))
    assert source.current() == own.url_string()


class FakeWebHdfs(BaseHTTPRequestHandler):
    """A NameNode's WebHDFS as far as these tests need: records each request's query."""

    calls: list[tuple[str, dict[str, list[str]]]]
    answers: dict[str, Any]

    def _answer(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        self.calls.append((self.command, query))
        body = json.dumps(self.answers.get(query.get("op", [""])[0], {})).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhdfs() -> Iterator[tuple[str, type[FakeWebHdfs]]]:
    handler = type("Handler", (FakeWebHdfs,), {"calls": [], "answers": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_executors_client_sends_the_newest_token_and_stops_at_the_end(webhdfs) -> None:
    from hdfs import HdfsError

    from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

    url, handler = webhdfs
    handler.answers["GETFILESTATUS"] = {"FileStatus": {"type": "FILE", "length": 1}}
    own, fresh = token(T0, T0 + 240, b"own"), token(T0 + 60, T0 + 300, b"fresh")
    clock, store = Clock(T0 + 1), Store()
    client = DelegationTokenClient(url, tr.TokenSource(own, store.fetch, refreshing=True, poll_s=0, clock=clock))
    client.status("/a")
    store.publish(DelegationToken(token=fresh.url_string(), seq=0, expires=T0 + 120, max_date=T0 + 300))
    client.status("/a")
    sent = [q["delegation"][0] for _, q in handler.calls]
    assert sent == [own.url_string(), fresh.url_string()]
    clock.now = T0 + 120
    with pytest.raises(HdfsError, match="stopped working"):
        client.status("/a")
    assert len(handler.calls) == 2, "a dead token is not even sent"


def test_client_from_env_reads_the_pointed_file_only_for_a_refreshing_job(tmp_path: Path, webhdfs) -> None:
    """The executor's client: the pointer from the store, the token from the file it names, read with its own."""
    from airflow_provider_tony.runtime.hdfs_io import client_from_env
    from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient
    from tests.unit.test_kerberos import _writable

    url, handler = webhdfs
    own, fresh = token(T0, T0 + 240, b"own"), token(T0, T0 + 500, b"fresh")
    tokens = tmp_path / "container_tokens"
    tokens.write_bytes(_writable(own))
    env = {
        C.ENV_WEBHDFS_URL: url,
        C.ENV_WEBHDFS_AUTH: C.WEBHDFS_AUTH_DELEGATION,
        "HADOOP_TOKEN_FILE_LOCATION": str(tokens),
    }
    handler.answers["OPEN"] = DelegationToken(token=fresh.url_string(), seq=0).to_dict()
    kv = {C.KV_TOKEN_POINTER: TokenPointer(path="/user/tony/.skein/app_1/tony-hdfs-token-0", seq=0).to_json()}
    plain = client_from_env(env, kv=kv)
    assert isinstance(plain, DelegationTokenClient) and plain._source._fetch is None
    refreshing = client_from_env({**env, C.ENV_TOKENS_REFRESHED: "1"}, kv=kv)
    assert refreshing.token() == fresh.url_string()
    ((method, query),) = handler.calls
    assert method == "GET" and query["op"] == ["OPEN"] and query["delegation"] == [own.url_string()]
    assert refreshing.token() == fresh.url_string() and len(handler.calls) == 1, "one pointer, one read"


def test_the_pointer_round_trips_names_no_token_and_refuses_odd_paths() -> None:
    pointer = TokenPointer(path="/user/tony/.skein/app_1/tony-hdfs-token-3", seq=3)
    assert TokenPointer.from_json(pointer.to_json()) == pointer
    assert json.loads(pointer.to_json()) == {"path": pointer.path, "seq": 3}, "a path and a number, nothing more"
    for bad in (
        {"path": ".skein/app_1/t", "seq": 1},
        {"path": "/user/x/../bob/t", "seq": 1},
        {"path": "/a/./t", "seq": 1},
        {"path": "/a\n/t", "seq": 1},
        {"path": "/" + "a" * 1001, "seq": 1},
        {"path": "/a/t", "seq": -1},
        {"path": "/a/t", "seq": "x"},
        {"path": 7, "seq": 1},
    ):
        with pytest.raises(SpecError, match="TokenPointer"):
            TokenPointer.from_dict(bad)


class TokenFolder:
    """The part of ``hdfs.Client`` the AM's token writer uses, over a dict: records the token each call used."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, str | None]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.token = ""

    def write(self, path: str, data: bytes, overwrite: bool = False, permission: str | None = None) -> None:
        self.calls.append(("write", path, self.token))
        self.files[path] = (data, permission)

    def rename(self, src: str, dst: str) -> None:
        self.calls.append(("rename", src, self.token))
        assert dst not in self.files
        self.files[dst] = self.files.pop(src)

    def delete(self, path: str) -> bool:
        self.calls.append(("delete", path, self.token))
        return self.files.pop(path, None) is not None


def test_the_am_writes_each_token_to_a_private_file_and_only_a_pointer_to_the_store() -> None:
    folder, kv = TokenFolder(), {}

    def client_for(tok: str) -> TokenFolder:
        folder.token = tok
        return folder

    writer = tr.TokenFileWriter(client_for, "/user/tony/.skein/app_1/", kv.__setitem__)
    for seq in range(4):
        writer(DelegationToken(token=f"tok-{seq}", seq=seq, expires=T0 + seq))
        path = f"/user/tony/.skein/app_1/{C.TOKEN_FILE_PREFIX}{seq}"
        data, mode = folder.files[path]
        assert mode == "600" and DelegationToken.from_json(data).token == f"tok-{seq}"
        assert TokenPointer.from_json(kv[C.KV_TOKEN_POINTER]) == TokenPointer(path=path, seq=seq)
        assert b"tok-" not in b"".join(kv.values()), "no token in the store"
    # Written under a temporary name, then renamed; with the fresh token itself; two back deleted.
    assert folder.calls[:2] == [("write", f"{path[:-1]}0.tmp", "tok-0"), ("rename", f"{path[:-1]}0.tmp", "tok-0")]
    assert sorted(folder.files) == [f"/user/tony/.skein/app_1/{C.TOKEN_FILE_PREFIX}{n}" for n in (2, 3)]


def test_the_reader_reads_each_pointer_once_and_retries_a_failed_read() -> None:
    kv: dict[str, bytes] = {}
    reads: list[str] = []
    answers: list[Any] = [OSError("refused"), b"token-0", b"token-1"]

    def read(path: str) -> bytes:
        reads.append(path)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    reader = tr.TokenFileReader(kv.get, read)
    assert reader() is None and reads == [], "no pointer yet: no read"
    kv[C.KV_TOKEN_POINTER] = b'{"path": "relative/t", "seq": 0}'
    assert reader() is None and reads == [], "a malformed pointer is not followed"
    kv[C.KV_TOKEN_POINTER] = TokenPointer(path="/s/t0", seq=0).to_json()
    assert reader() is None, "a failed read gives nothing"
    assert reader() == b"token-0", "and is tried again"
    assert reader() is None and reads == ["/s/t0", "/s/t0"], "a pointer already taken is not read again"
    kv[C.KV_TOKEN_POINTER] = TokenPointer(path="/s/t1", seq=1).to_json()
    assert reader() == b"token-1"


class KvApp:
    def __init__(self) -> None:
        self.kv: dict[str, bytes] = {}


class UnreachableHdfs:
    def walk(self, root: str) -> Any:
        raise ConnectionError(f"http://nn:1/webhdfs/v1/{root}?op=LISTSTATUS&delegation=SECRETTOKEN refused")


def test_a_keytab_copy_the_am_cannot_remove_stops_the_job(tmp_path: Path, monkeypatch) -> None:
    """Issue 35.7: not an event and on with the job, but ``KeytabCopyLeft`` before any thread starts."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / C.AM_KEYTAB_ALIAS).write_bytes(b"\x05\x02the-key")
    env = {
        C.ENV_WEBHDFS_URL: "http://nn:1",
        C.ENV_AM_PRINCIPAL: "tony@TONY.LOCAL",
        C.ENV_SKEIN_APPLICATION_ID: "application_1_0007",
    }
    app = KvApp()
    with pytest.raises(KeytabCopyLeft, match=r"stopped before any of its code ran: delete ~/.skein/application_1_0007"):
        tr.start_for_am(app, env, hdfs=UnreachableHdfs())
    text = json.dumps({k: v.decode() for k, v in app.kv.items()})
    assert "could not remove the keytab's staged copy" in text
    assert "SECRETTOKEN" not in text and str(tmp_path) not in text
    assert C.KV_TOKEN_POINTER not in app.kv


# ---------------------------------------------------------------- the AM's side


def test_the_am_obtains_renews_once_and_reads_the_dates(webhdfs) -> None:
    import requests

    url, handler = webhdfs
    fresh = token(T0, T0 + 240)
    handler.answers["GETDELEGATIONTOKEN"] = {"Token": {"urlString": fresh.url_string()}}
    handler.answers["RENEWDELEGATIONTOKEN"] = {"long": int((T0 + 60) * 1000)}
    tokens = tr.WebHdfsTokens(url, "tony@TONY.LOCAL", "/nonexistent.keytab")
    tokens._session = requests.Session  # type: ignore[method-assign] # SPNEGO is the secure suite's part
    msg = tokens.obtain()
    assert (msg.token, msg.issued, msg.expires, msg.max_date) == (fresh.url_string(), T0, T0 + 60, T0 + 240)
    (m1, q1), (m2, q2) = handler.calls
    assert (m1, q1["op"], m2, q2["op"]) == ("GET", ["GETDELEGATIONTOKEN"], "PUT", ["RENEWDELEGATIONTOKEN"])
    assert "renewer" not in q1, "the AM itself must be the renewer, WebHDFS's default"
    assert q2["token"] == [fresh.url_string()]
    assert "keytab" not in repr(tokens)


def test_a_refused_request_reports_without_the_token(webhdfs) -> None:
    import requests

    url, handler = webhdfs
    fresh = token(T0, T0 + 240)
    handler.answers["GETDELEGATIONTOKEN"] = {"Token": {"urlString": fresh.url_string()}}
    tokens = tr.WebHdfsTokens(url.replace("127.0.0.1:", "127.0.0.1:1"), "tony@TONY.LOCAL", "/k", timeout=2)
    tokens._session = requests.Session  # type: ignore[method-assign]
    with pytest.raises(ClusterError, match="GETDELEGATIONTOKEN failed"):
        tokens.obtain()


def test_the_refresher_publishes_on_schedule_and_retries_failures_without_leaking() -> None:
    clock, store, events = Clock(T0), Store(), []
    answers: list[Any] = [
        DelegationToken(token="tok-A", expires=T0 + 60, max_date=T0 + 240),
        ClusterError("WebHDFS RENEWDELEGATIONTOKEN failed: GET /?token=tok-B&delegation=tok-B"),
        ClusterError("again"),
        DelegationToken(token="tok-C", expires=T0 + 100, max_date=T0 + 240),
    ]

    def obtain() -> DelegationToken:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    refresher = tr.TokenRefresher(obtain, store.publish, events.append, clock=clock)
    assert refresher.refresh_once() == pytest.approx(45.0)
    assert DelegationToken.from_json(store.raw or b"").seq == 0
    assert refresher.refresh_once() == tr.retry_delay(1)
    assert refresher.refresh_once() == tr.retry_delay(2)
    assert refresher.refresh_once() == pytest.approx(75.0)
    published = DelegationToken.from_json(store.raw or b"")
    assert (published.token, published.seq, refresher.refreshed) == ("tok-C", 1, 2)
    assert len(events) == 3, events  # two refreshes and the first failure of the run (not every retry)
    assert "refreshed the HDFS delegation token from the keytab (2)" in events[-1]
    assert not any("tok-" in e for e in events), events


def test_the_am_hook_does_nothing_unless_the_job_shipped_a_keytab(tmp_path: Path, monkeypatch) -> None:
    assert tr.start_for_am(object(), {C.ENV_WEBHDFS_URL: "http://nn:9870"}) is None
    monkeypatch.chdir(tmp_path)  # no keytab in the working directory: logged, not fatal
    env = {C.ENV_WEBHDFS_URL: "http://nn:9870", C.ENV_AM_PRINCIPAL: "tony@TONY.LOCAL"}
    assert tr.start_for_am(object(), env) is None


class StagingDir:
    """The part of ``hdfs.Client`` that ``remove_staged_copies`` uses, over a dict of paths."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def walk(self, root: str) -> Iterator[tuple[str, list[str], list[str]]]:
        folders = sorted({p.rsplit("/", 1)[0] for p in self.files if p.startswith(root + "/")})
        for folder in folders:
            yield folder, [], [p.rsplit("/", 1)[1] for p in self.files if p.rsplit("/", 1)[0] == folder]

    def status(self, path: str) -> dict[str, int]:
        return {"length": len(self.files[path])}

    def read(self, path: str) -> Any:
        import io

        return io.BytesIO(self.files[path])

    def delete(self, path: str) -> bool:
        return self.files.pop(path, None) is not None


def test_the_am_deletes_the_keytabs_staged_copy_found_by_content(tmp_path: Path) -> None:
    keytab = tmp_path / C.AM_KEYTAB_ALIAS
    keytab.write_bytes(b"\x05\x02the-key")
    staged = StagingDir(
        {
            ".skein/app_1/.skein.crt": b"cert",
            ".skein/app_1/13C6/root.keytab": b"\x05\x02the-key",
            ".skein/app_1/58B0/tony_runtime.zip": b"\x05\x02the-kez",  # same size, other bytes
            ".skein/app_2/13C6/root.keytab": b"\x05\x02the-key",  # another application's: not ours to touch
        }
    )
    assert tr.remove_staged_copies(staged, "app_1", str(keytab)) == 1
    assert sorted(staged.files) == [
        ".skein/app_1/.skein.crt",
        ".skein/app_1/58B0/tony_runtime.zip",
        ".skein/app_2/13C6/root.keytab",
    ]


# ---------------------------------------------------------------- the submitting side


def _spec(refresh: bool) -> JobSpec:
    return JobSpec.from_dict(
        {
            "roles": {"worker": {"instances": 2, "command": ["python", "-c", "pass"]}, "ps": {"command": ["true"]}},
            "python": {"interpreter": "/usr/bin/python3"},
            "kerberos": {"refresh_tokens": refresh},
        }
    )


def test_the_keytab_goes_to_the_am_alone(tmp_path: Path) -> None:
    from airflow_provider_tony.yarn.am_keytab import ship_keytab_to_am
    from airflow_provider_tony.yarn.appspec import build_application_spec

    keytab = tmp_path / "secret-place" / "tony.keytab"
    keytab.parent.mkdir()
    keytab.write_bytes(b"\x05\x02keytab")
    spec = _spec(True)
    app_spec = build_application_spec(spec, python="/usr/bin/python3")
    ship_keytab_to_am(app_spec, spec, "tony@TONY.LOCAL", str(keytab))
    master = app_spec.master
    assert master.files[C.AM_KEYTAB_ALIAS].source == f"file://{keytab}"
    assert master.env[C.ENV_AM_PRINCIPAL] == "tony@TONY.LOCAL"
    for name, service in app_spec.services.items():
        assert C.AM_KEYTAB_ALIAS not in service.files, name
        assert C.ENV_AM_PRINCIPAL not in service.env, name
        assert service.env[C.ENV_TOKENS_REFRESHED] == "1"
    every_env = [v for s in [master, *app_spec.services.values()] for v in s.env.values()]
    assert not any("secret-place" in v for v in every_env), "the keytab's location stays off the environment"

    untouched = build_application_spec(_spec(False), python="/usr/bin/python3")
    ship_keytab_to_am(untouched, _spec(False), "tony@TONY.LOCAL", str(keytab))
    assert C.AM_KEYTAB_ALIAS not in untouched.master.files and C.ENV_TOKENS_REFRESHED not in untouched.master.env


def test_refresh_without_a_keytab_is_refused_before_submit(tmp_path: Path) -> None:
    from airflow_provider_tony.yarn.am_keytab import ship_keytab_to_am
    from airflow_provider_tony.yarn.appspec import build_application_spec

    spec = _spec(True)
    app_spec = build_application_spec(spec, python="/usr/bin/python3")
    with pytest.raises(SpecError, match="kerberos.refresh_tokens: .*no 'principal' and 'keytab'"):
        ship_keytab_to_am(app_spec, spec, None, None)
    with pytest.raises(SpecError, match="not a readable file") as err:
        ship_keytab_to_am(app_spec, spec, "tony@TONY.LOCAL", str(tmp_path / "missing.keytab"))
    assert str(tmp_path) not in str(err.value)
    with pytest.raises(SpecError, match="kerberos.refresh_tokens: 'yes' is not true or false"):
        JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "kerberos": {"refresh_tokens": "yes"}})


def test_the_next_file_is_read_with_a_token_that_still_works_and_without_a_call_of_the_job() -> None:
    """A token from the AM ends a quarter of its life after the next one is published: polling does not wait
    for the job's next WebHDFS call, and past the end of the token in use the application's own reads it."""
    own, first = token(T0, T0 + 240, b"own"), token(T0, T0 + 300, b"first")
    clock, kv, used = Clock(T0 + 1), {}, []
    files = {"/s/t0": DelegationToken(token=first.url_string(), seq=0, expires=T0 + 60).to_json()}

    def read(path: str) -> bytes:
        used.append(source.in_use)
        return files[path]

    source = tr.TokenSource(own, tr.TokenFileReader(kv.get, read), refreshing=True, poll_s=600, clock=clock)
    kv[C.KV_TOKEN_POINTER] = TokenPointer(path="/s/t0", seq=0).to_json()
    thread = source.start_polling(interval=0.01)
    assert thread is not None and thread.daemon
    from tests._util import wait_until

    wait_until(lambda: source.seq == 0, 10, "the poller to take token 0 without any request")
    assert used == [own.url_string()]
    second = token(T0 + 50, T0 + 300, b"second")
    files["/s/t1"] = DelegationToken(token=second.url_string(), seq=1, expires=T0 + 120).to_json()
    clock.now = T0 + 61  # token 0 has ended (no renewal): the application's own token reads the next file
    kv[C.KV_TOKEN_POINTER] = TokenPointer(path="/s/t1", seq=1).to_json()
    wait_until(lambda: source.seq == 1, 10, "the poller to take token 1")
    assert used == [own.url_string(), own.url_string()] and source.current() == second.url_string()
    assert tr.TokenSource(own, None).start_polling() is None
