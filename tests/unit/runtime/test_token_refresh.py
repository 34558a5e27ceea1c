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
    from tests.unit.support.kerberos import _writable

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


def test_a_keytab_copy_the_am_cannot_remove_stops_the_job(
    tmp_path: Path, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 35.7: not an event and on with the job, but ``KeytabCopyLeft`` before any thread starts."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / C.AM_KEYTAB_ALIAS).write_bytes(b"\x05\x02the-key")
    env = {
        C.ENV_WEBHDFS_URL: "http://nn:1",
        C.ENV_AM_PRINCIPAL: "tony@TONY.LOCAL",
        C.ENV_SKEIN_APPLICATION_ID: "application_1_0007",
    }
    app = KvApp()
    with (
        caplog.at_level("ERROR", logger="tony.tokens"),
        pytest.raises(
            KeytabCopyLeft, match=r"stopped before any of its code ran: delete ~/.skein/application_1_0007"
        ) as err,
    ):
        tr.start_for_am(app, env, hdfs=UnreachableHdfs())
    text = json.dumps({k: v.decode() for k, v in app.kv.items()})
    assert "could not remove the keytab's staged copy" in text
    # The cause, by its type, in the error, the event and the AM's log; the token in none of them.
    assert "copy from HDFS (ConnectionError: http://nn:1/webhdfs/v1/.skein/application_1_0007" in str(err.value)
    assert "(delete ~/.skein/application_1_0007): ConnectionError: http://nn:1/" in text
    assert "staged copy from HDFS: ConnectionError: http://nn:1/" in caplog.text and "SECRETTOKEN" not in caplog.text
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

    obtain = _answering(answers)

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


def test_the_am_hook_does_nothing_unless_the_job_shipped_a_keytab(
    tmp_path: Path, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert tr.start_for_am(object(), {C.ENV_WEBHDFS_URL: "http://nn:9870"}) is None
    monkeypatch.chdir(tmp_path)  # no keytab in the working directory: logged, not fatal
    env = {C.ENV_WEBHDFS_URL: "http://nn:9870", C.ENV_AM_PRINCIPAL: "tony@TONY.LOCAL"}
    with caplog.at_level("ERROR", logger="tony.tokens"):
        assert tr.start_for_am(object(), env) is None
    assert "the AM container has no keytab" in caplog.text
    # The AM's own environment when none is given (what the AM's main passes).
    monkeypatch.delenv(C.ENV_AM_PRINCIPAL, raising=False)
    assert tr.start_for_am(object()) is None and tr.keytab_principal() is None
    monkeypatch.setenv(C.ENV_AM_PRINCIPAL, "tony@TONY.LOCAL")
    keytab, principal = tr.keytab_principal() or ("", "")
    assert principal == "tony@TONY.LOCAL" and keytab == str(Path.cwd() / C.AM_KEYTAB_ALIAS)
    assert Path(keytab).is_absolute(), "the keytab is found wherever the process looks from later"


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


def _answering(answers: list[Any]) -> Any:
    """An obtain() that gives each answer in turn: a token, or an exception it raises."""

    def obtain() -> DelegationToken:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    return obtain


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


# ---------------------------------------------------------------- issue 41: what each part promises, edge by edge

UTC_T0 = "2027-01-15 08:00:00 UTC"  # T0 as the messages write it


@pytest.fixture
def far_from_utc() -> Iterator[None]:
    """The machine's local time zone is not UTC: the dates people read must still be UTC, as they say."""
    import os
    import time

    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"  # UTC+5:30: every field of a local rendering differs
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_identifier_dates_at_their_bounds() -> None:
    """Issued at the first millisecond is a date; issued at 0 is no token; issued at its maximum date is one."""
    assert tr.identifier_dates(identifier(0.001, 0.002)) == tr.TokenDates(0.001, 0.002)
    assert tr.identifier_dates(identifier(0, T0)) is None
    assert tr.identifier_dates(identifier(T0, T0)) == tr.TokenDates(T0, T0)


def test_the_refusal_says_in_utc_when_the_token_ended_what_failed_and_what_to_do(far_from_utc: None) -> None:
    """The message is the user's only lead when uploads stop: the cause and the fix are its content."""
    end = f"the job's HDFS delegation token stopped working at {UTC_T0} "
    refreshing = tr.TokenSource(token(T0 - 60, T0), lambda: None, refreshing=True, clock=Clock(T0))
    with pytest.raises(ClusterError) as err:
        refreshing.current()
    assert str(err.value) == end + (
        "and the application master has published no fresh one: see the AM's log for why it could not obtain "
        "one from the keytab"
    )
    advice = end + (
        "(the end of its maximum lifetime, dfs.namenode.delegation.token.max-lifetime): set "
        "kerberos.refresh_tokens in the job so the AM obtains fresh tokens from the connection's keytab"
    )
    # A job that did not ask for refresh gets the advice, whether or not a store is there to read.
    for fetch in (None, lambda: None):
        with pytest.raises(ClusterError) as err:
            tr.TokenSource(token(T0 - 60, T0), fetch, clock=Clock(T0)).current()
        assert str(err.value) == advice


def test_a_token_without_readable_dates_is_sent_without_an_end() -> None:
    """Not an HDFS identifier we can read: no end is invented, and the token goes on being sent."""
    odd = Token(alias="", kind="HDFS_DELEGATION_TOKEN", service="s:1", identifier=b"\x01odd", password=b"pw")
    source = tr.TokenSource(odd, None, clock=Clock(T0 + 10**9))
    assert source.end is None and source.current() == odd.url_string()


def test_the_source_refuses_a_published_token_that_does_not_parse(caplog: pytest.LogCaptureFixture) -> None:
    """A token string the client could not send is not swapped in: the one in use goes on."""
    own = token(T0, T0 + 240)
    store = Store()
    store.publish(DelegationToken(token="%%%not-base64", seq=0, expires=T0 + 60))
    source = tr.TokenSource(own, store.fetch, refreshing=True, clock=Clock(T0))
    with caplog.at_level("WARNING", logger="tony.tokens"):
        assert source.current() == own.url_string() and source.seq == -1
    assert "ignoring the published HDFS token: token file truncated" in caplog.text


def test_the_source_takes_the_earlier_end_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    """A token renewed past its maximum date still ends at the maximum date; the log says when, or 'unknown'."""
    clock, store = Clock(T0), Store()
    source = tr.TokenSource(token(T0, T0 + 240), store.fetch, refreshing=True, poll_s=0, clock=clock)
    fresh = token(T0, T0 + 60, b"fresh").url_string()
    store.publish(DelegationToken(token=fresh, seq=0, expires=T0 + 600, max_date=T0 + 60))
    with caplog.at_level("INFO", logger="tony.tokens"):
        assert source.current() == fresh and source.end == T0 + 60
        store.publish(DelegationToken(token=fresh, seq=1))
        assert source.current() == fresh and source.seq == 1 and source.end is None
    assert "HDFS delegation token 0 from the AM (valid until 2027-01-15 08:01:00 UTC)" in caplog.text
    assert "HDFS delegation token 1 from the AM (valid until unknown)" in caplog.text


def test_a_poll_counts_as_a_look(caplog: pytest.LogCaptureFixture) -> None:
    """The poller's look spares the next request one: an upload does not read the store again within poll_s."""
    store = Store()
    source = tr.TokenSource(token(T0, T0 + 240), store.fetch, refreshing=True, poll_s=10, clock=Clock(T0))
    source.poll()
    source.current()
    assert store.reads == 1


def test_the_poller_is_a_named_daemon_that_logs_a_failed_look_without_its_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The exception may carry a URL with a token: only its type is logged; the thread never blocks the exit."""
    from tests._util import wait_until

    looks: list[int] = []

    def fetch() -> bytes | None:
        looks.append(1)
        if len(looks) == 1:
            raise ConnectionError("http://nn/webhdfs/v1/x?delegation=SECRETTOKEN refused")
        return None

    source = tr.TokenSource(token(T0, T0 + 240), fetch, refreshing=True, clock=Clock(T0))
    with caplog.at_level("WARNING", logger="tony.tokens"):
        thread = source.start_polling(interval=0.01)
        assert thread is not None and thread.daemon and thread.name == "tony-token-poll"
        wait_until(lambda: len(looks) >= 2, 10, "the poller to look again after a failed look")
    assert "looking for a fresh HDFS token failed: ConnectionError" in caplog.text
    assert "SECRETTOKEN" not in caplog.text


def test_the_reader_refuses_an_oversized_pointer_and_logs_why_without_the_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A pointer is a path and a number: one of 64 KiB is not the AM's; a failed read's log is redacted."""
    kv: dict[str, bytes] = {}

    def read(path: str) -> bytes:
        raise ConnectionError(f"http://nn/webhdfs/v1{path}?op=OPEN&delegation=SECRETTOKEN refused")

    reader = tr.TokenFileReader(kv.get, read)
    kv[C.KV_TOKEN_POINTER] = b'{"path": "/s/t0", "seq": 0' + b" " * tr.MAX_TOKEN_FILE_BYTES + b"}"
    with caplog.at_level("WARNING", logger="tony.tokens"):
        assert reader() is None
        kv[C.KV_TOKEN_POINTER] = TokenPointer(path="/s/t0", seq=0).to_json()
        assert reader() is None
    assert "ignoring the AM's token pointer: TokenPointer" in caplog.text
    assert "could not read the AM's HDFS token 0: ConnectionError: http://nn/webhdfs/v1/s/t0" in caplog.text
    assert "SECRETTOKEN" not in caplog.text


def test_the_token_file_is_read_with_a_bounded_length(webhdfs) -> None:
    """The executor never reads more of a token file than a token message can be."""
    url, handler = webhdfs
    handler.answers["OPEN"] = {"token": "x"}
    own = token(T0, T0 + 240)
    assert json.loads(tr.read_token_file(url, own.url_string(), "/s/t0")) == {"token": "x"}
    ((method, query),) = handler.calls
    assert query["op"] == ["OPEN"] and query["length"] == [str(tr.MAX_TOKEN_FILE_BYTES)]
    assert query["delegation"] == [own.url_string()]


def test_every_staged_copy_of_the_keytab_is_deleted_whatever_lies_beside_it(tmp_path: Path) -> None:
    keytab = tmp_path / C.AM_KEYTAB_ALIAS
    keytab.write_bytes(b"\x05\x02the-key")
    staged = StagingDir(
        {
            ".skein/app_1/13C6/a.crt": b"other size",  # listed first in its folder: the walk goes on past it
            ".skein/app_1/13C6/root.keytab": b"\x05\x02the-key",
            ".skein/app_1/77AA/copy.keytab": b"\x05\x02the-key",
        }
    )
    assert tr.remove_staged_copies(staged, "app_1", str(keytab)) == 2
    assert sorted(staged.files) == [".skein/app_1/13C6/a.crt"]


class LeftoverFolder(TokenFolder):
    """Like HDFS: writing over an existing file needs ``overwrite``; deleting can fail."""

    def __init__(self) -> None:
        super().__init__()
        self.refuse_delete = False

    def write(self, path: str, data: bytes, overwrite: bool = False, permission: str | None = None) -> None:
        if path in self.files and overwrite is not True:
            raise FileExistsError(path)
        super().write(path, data, overwrite=overwrite, permission=permission)

    def delete(self, path: str) -> bool:
        if self.refuse_delete:
            raise PermissionError(f"http://nn/webhdfs/v1{path}?op=DELETE&delegation=SECRETTOKEN")
        return super().delete(path)


def test_the_writer_overwrites_a_leftover_temporary_file_and_survives_a_failed_delete(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A try that died between write and rename leaves ``.tmp``: the next token must still be published."""
    folder, kv = LeftoverFolder(), {}
    writer = tr.TokenFileWriter(lambda tok: folder, "/staging/X", kv.__setitem__)
    final = f"/staging/X/{C.TOKEN_FILE_PREFIX}2"
    folder.files[final + ".tmp"] = (b"half", "600")
    folder.refuse_delete = True
    with caplog.at_level("WARNING", logger="tony.tokens"):
        writer(DelegationToken(token="tok-2", seq=2))
    assert DelegationToken.from_json(folder.files[final][0]).token == "tok-2"
    assert TokenPointer.from_json(kv[C.KV_TOKEN_POINTER]).path == final
    assert "could not delete an earlier token file: PermissionError" in caplog.text
    assert "SECRETTOKEN" not in caplog.text


class FakeResponse:
    def __init__(self, status: int, body: Any = None, text: str | None = None) -> None:
        self.status_code = status
        self._body = body
        self.text = json.dumps(body) if text is None else text

    def json(self) -> Any:
        if self._body is None:
            raise ValueError("no JSON")
        return self._body


class FakeSession:
    """What ``WebHdfsTokens`` sends, answered per op from ``answers`` (a response or an exception)."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, str, dict[str, str], Any]] = []
        self.closed = False

    def request(self, method: str, url: str, params: dict[str, str], timeout: Any = None) -> Any:
        self.sent.append((method, url, dict(params), timeout))
        answer = self.answers[params["op"]]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed = True


def _tokens_with(answers: dict[str, Any], url: str = "http://nn:9870/", **kwargs: Any) -> tuple[Any, FakeSession]:
    session = FakeSession(answers)
    tokens = tr.WebHdfsTokens(url, "tony@TONY.LOCAL", "/am/keytab", **kwargs)
    tokens._session = lambda: session  # type: ignore[method-assign]
    return tokens, session


def test_the_am_asks_the_namenode_at_its_address_with_its_timeout() -> None:
    """The trailing slash of the configured address goes; every call carries the (default 30 s) timeout."""
    fresh = token(T0, T0 + 240).url_string()
    answers = {
        "GETDELEGATIONTOKEN": FakeResponse(200, {"Token": {"urlString": fresh}}),
        "RENEWDELEGATIONTOKEN": FakeResponse(200, {"long": int((T0 + 60) * 1000)}),
    }
    tokens, session = _tokens_with(answers)
    assert tokens.url == "http://nn:9870" and "tony@TONY.LOCAL" in repr(tokens)
    assert tr.WebHdfsTokens("http://NAMENODEX/", "p", "k").url == "http://NAMENODEX", "only the slash goes"
    tokens.obtain()
    assert [(m, u, t) for m, u, _, t in session.sent] == [
        ("GET", "http://nn:9870/webhdfs/v1/", 30.0),
        ("PUT", "http://nn:9870/webhdfs/v1/", 30.0),
    ]
    assert session.closed
    tokens, session = _tokens_with(answers, timeout=7.5)
    tokens.obtain()
    assert {t for *_, t in session.sent} == {7.5}


@pytest.mark.parametrize(
    "renewed, expires",
    [
        ({"long": int((T0 + 60) * 1000)}, T0 + 60),
        ({"long": 1}, 0.001),
        ({"long": 0}, None),
        ({"long": -1}, None),
        ({"long": "soon"}, None),
        ({}, None),
        ([1, 2], None),
    ],
)
def test_the_expiry_is_taken_only_from_a_positive_renewal_answer(renewed: Any, expires: float | None) -> None:
    """An answer without a usable expiry leaves it unknown (the maximum date decides) rather than failing."""
    fresh = token(T0, T0 + 240).url_string()
    tokens, _ = _tokens_with(
        {
            "GETDELEGATIONTOKEN": FakeResponse(200, {"Token": {"urlString": fresh}}),
            "RENEWDELEGATIONTOKEN": FakeResponse(200, renewed),
        }
    )
    msg = tokens.obtain()
    assert (msg.expires, msg.max_date) == (expires, T0 + 240)


def test_a_token_without_readable_dates_is_dated_now() -> None:
    import time

    odd = Token(alias="", kind="HDFS_DELEGATION_TOKEN", service="s:1", identifier=b"\x01odd", password=b"pw")
    tokens, _ = _tokens_with(
        {
            "GETDELEGATIONTOKEN": FakeResponse(200, {"Token": {"urlString": odd.url_string()}}),
            "RENEWDELEGATIONTOKEN": FakeResponse(200, {"long": int((T0 + 60) * 1000)}),
        }
    )
    before = time.time()
    msg = tokens.obtain()
    assert before <= msg.issued <= time.time() and msg.max_date is None and msg.expires == T0 + 60


def test_each_failed_answer_is_reported_by_op_and_cause_without_the_token() -> None:
    import requests

    fresh = token(T0, T0 + 240).url_string()
    got = FakeResponse(200, {"Token": {"urlString": fresh}})
    cases: list[tuple[dict[str, Any], str]] = [
        (
            {"GETDELEGATIONTOKEN": FakeResponse(200, {"Token": {}})},
            "WebHDFS GETDELEGATIONTOKEN answered without a token",
        ),
        (
            {"GETDELEGATIONTOKEN": FakeResponse(200, None, "<html>")},
            "WebHDFS GETDELEGATIONTOKEN answered HTTP 200 with no JSON",
        ),
        (
            {"GETDELEGATIONTOKEN": got, "RENEWDELEGATIONTOKEN": FakeResponse(403, None, f"token={fresh} " + "x" * 400)},
            "WebHDFS RENEWDELEGATIONTOKEN answered HTTP 403: token=*** " + "x" * (300 - len(f"token={fresh} ")),
        ),
        (
            {"GETDELEGATIONTOKEN": requests.ReadTimeout(f"read timed out: ?delegation={fresh}")},
            "WebHDFS GETDELEGATIONTOKEN failed: NoActiveNameNode: no active NameNode answered WebHDFS "
            "GETDELEGATIONTOKEN for 0s (http://nn:9870: ReadTimeout: read timed out: ?delegation=***)",
        ),
    ]
    for answers, message in cases:
        tokens, session = _tokens_with(answers)
        with pytest.raises(ClusterError) as err:
            tokens.obtain()
        assert str(err.value) == message
        assert session.closed


def test_one_namenode_is_asked_once_and_an_ha_pair_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A single NameNode that does not answer fails the try at once (the refresher retries); with HA the AM
    waits up to a minute for a failover to finish."""
    import requests

    from airflow_provider_tony.runtime import webhdfs_failover

    patience: list[float] = []

    class Recording(webhdfs_failover.NameNodes):
        def __init__(self, urls: Any, patience: float = 120.0, **kwargs: Any) -> None:
            patience_seen.append(patience)
            super().__init__(urls, patience=patience, **kwargs)

    patience_seen = patience
    refused = requests.ConnectionError("Connection refused")
    tokens, session = _tokens_with({"GETDELEGATIONTOKEN": refused})
    with pytest.raises(ClusterError, match="no active NameNode answered WebHDFS GETDELEGATIONTOKEN for 0s"):
        tokens.obtain()
    assert len(session.sent) == 1
    monkeypatch.setattr(webhdfs_failover, "NameNodes", Recording)
    for url in ("http://nn1:9870", "http://nn1:9870,http://nn2:9870"):
        tokens, _ = _tokens_with({"GETDELEGATIONTOKEN": FakeResponse(200, {"Token": {}})}, url=url)
        with pytest.raises(ClusterError):
            tokens.obtain()
    assert patience == [0.0, 60.0]


class FakeGss:
    """``gssapi`` and ``requests_gssapi`` as ``_session`` uses them: records the login it asks for."""

    class GSSError(Exception):
        pass

    def __init__(self, fail: str | None = None) -> None:
        import types

        self.fail = fail
        self.logins: list[dict[str, Any]] = []
        gss = self

        class Credentials:
            def __init__(self, *, name: Any, usage: str, store: dict[str, str]) -> None:
                gss.logins.append({"name": name, "usage": usage, "store": store})

            @property
            def lifetime(self) -> int:
                if gss.fail is not None:
                    raise FakeGss.GSSError(gss.fail)
                return 3600

        class HTTPSPNEGOAuth:
            def __init__(self, *, creds: Any, mutual_authentication: Any) -> None:
                self.creds, self.mutual = creds, mutual_authentication

        self.gssapi = types.SimpleNamespace(
            Credentials=Credentials,
            Name=lambda name, kind: ("name", name, kind),
            NameType=types.SimpleNamespace(kerberos_principal="krb5-principal"),
            exceptions=types.SimpleNamespace(GSSError=FakeGss.GSSError),
        )
        self.requests_gssapi = types.SimpleNamespace(OPTIONAL="optional", HTTPSPNEGOAuth=HTTPSPNEGOAuth)


def test_the_am_logs_in_from_the_keytab_into_a_private_memory_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each login is the job's principal from the job's keytab into its own in-memory cache (nothing on
    disk, no expired ticket reused); a failed login names the principal and the KDC's reason on one line."""
    import sys

    import requests

    gss = FakeGss()
    monkeypatch.setitem(sys.modules, "gssapi", gss.gssapi)
    monkeypatch.setitem(sys.modules, "requests_gssapi", gss.requests_gssapi)
    tokens = tr.WebHdfsTokens("http://nn:9870", "tony@TONY.LOCAL", "/am/.tony-am.keytab")
    first, second = tokens._session(), tokens._session()
    assert isinstance(first, requests.Session)
    one, two = gss.logins
    assert one["name"] == ("name", "tony@TONY.LOCAL", "krb5-principal") and one["usage"] == "initiate"
    assert one["store"]["client_keytab"] == "/am/.tony-am.keytab" and set(one["store"]) == {"client_keytab", "ccache"}
    assert one["store"]["ccache"].startswith("MEMORY:tony-am-") and one["store"]["ccache"] != two["store"]["ccache"]
    assert first.auth.mutual == "optional" and first.auth.creds is not second.auth.creds
    assert first.auth.creds is not None
    gss.fail = "  Keytab contains no suitable keys\nfor tony@TONY.LOCAL  "
    with pytest.raises(ClusterError) as err:
        tokens._session()
    assert str(err.value) == (
        "Kerberos login as tony@TONY.LOCAL from the job's keytab failed: "
        "Keytab contains no suitable keys for tony@TONY.LOCAL"
    )


class StopAfter:
    """A stop event that records each wait and says 'stop' after ``n`` of them."""

    def __init__(self, n: int) -> None:
        self.n, self.waits = n, []  # type: ignore[var-annotated]
        self.stopped = False

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return len(self.waits) > self.n

    def set(self) -> None:
        self.stopped = True


def test_the_refresher_loop_obtains_at_once_then_waits_as_each_try_says() -> None:
    clock, store, events = Clock(T0), Store(), []
    answers: list[Any] = [DelegationToken(token="tok-A", expires=T0 + 60), ClusterError("down")]

    obtain = _answering(answers)

    refresher = tr.TokenRefresher(obtain, store.publish, events.append, clock=clock)
    assert refresher.daemon and refresher.name == "tony-token-refresh"
    stop = StopAfter(2)
    refresher.stop_event = stop  # type: ignore[assignment]
    refresher.run()
    assert stop.waits == [0.0, pytest.approx(45.0), tr.retry_delay(1)]
    real = tr.TokenRefresher(obtain, store.publish, events.append)
    real.stop()
    assert real.stop_event.is_set()


def test_the_failure_count_restarts_after_a_success_and_events_come_every_tenth_try(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After a success the next failure is the first again: a short backoff and an event, not try 3's."""
    events: list[str] = []
    failing = [True]

    def obtain() -> DelegationToken:
        if failing[0]:
            raise ClusterError("WebHDFS GETDELEGATIONTOKEN failed: ?delegation=SECRETTOKEN")
        return DelegationToken(token="tok", expires=T0 + 60)

    refresher = tr.TokenRefresher(obtain, lambda msg: None, events.append, clock=Clock(T0))
    with caplog.at_level("WARNING", logger="tony.tokens"):
        delays = [refresher.refresh_once() for _ in range(2)]
    failing[0] = False
    refresher.refresh_once()
    failing[0] = True
    assert refresher.refresh_once() == tr.retry_delay(1) == delays[0] and delays[1] == tr.retry_delay(2)
    assert refresher.failures == 1
    failed = [e for e in events if "could not refresh" in e]
    assert failed[0] == (
        "AM could not refresh the HDFS delegation token (try 1): "
        "ClusterError: WebHDFS GETDELEGATIONTOKEN failed: ?delegation=***"
    )
    assert len(failed) == 2, "the first failure of each run of failures"
    assert "could not obtain a fresh HDFS delegation token (try 2): ClusterError: " in caplog.text
    assert "SECRETTOKEN" not in caplog.text
    events.clear()
    for _ in range(19):
        refresher.refresh_once()
    assert [e.split("(try ")[1].split(")")[0] for e in events] == ["10", "20"]


def test_the_refresh_event_says_until_when_in_utc_and_when_the_next_comes(
    far_from_utc: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The end is the earlier of expiry and maximum date, the next refresh 3/4 of the way there."""
    events: list[str] = []
    answers = [
        DelegationToken(token="tok-A", expires=T0 + 3600, max_date=T0 + 240),
        DelegationToken(token="tok-B", expires=T0 + 240, max_date=T0 + 3600),
        DelegationToken(token="tok-C"),
    ]
    refresher = tr.TokenRefresher(lambda: answers.pop(0), lambda msg: None, events.append, clock=Clock(T0))
    with caplog.at_level("INFO", logger="tony.tokens"):
        assert refresher.refresh_once() == pytest.approx(180.0)
        refresher.refresh_once()
        assert refresher.refresh_once() == tr.FALLBACK_REFRESH_S
    assert events == [
        "AM refreshed the HDFS delegation token from the keytab (1): valid until 2027-01-15 08:04:00 UTC, "
        "next refresh at 2027-01-15 08:03:00 UTC",
        "AM refreshed the HDFS delegation token from the keytab (2): valid until 2027-01-15 08:04:00 UTC, "
        "next refresh at 2027-01-15 08:03:00 UTC",
        "AM refreshed the HDFS delegation token from the keytab (3): valid until an unknown date, "
        "next refresh at 2027-01-15 09:00:00 UTC",
    ]
    assert [r.getMessage() for r in caplog.records if r.levelname == "INFO"] == events


def test_the_ams_own_client_uses_the_newest_published_token() -> None:
    """Past the application token's maximum date the AM's last calls (history, cleanup) need the fresh one."""
    from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

    fresh = token(T0, T0 + 240, b"fresh").url_string()
    refresher = tr.TokenRefresher(lambda: DelegationToken(token=fresh), lambda msg: None, lambda text: None)
    assert refresher.client("http://nn:9870") is None, "nothing published yet"
    refresher.refresh_once()
    client = refresher.client("http://nn:9870")
    assert isinstance(client, DelegationTokenClient)
    assert client.url == "http://nn:9870" and client.token() == fresh


class StagedHdfs(StagingDir):
    """A staging folder that also resolves paths (the AM's home on HDFS is /user/tony); counts walks."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__(files)
        self.walks: list[str] = []

    def walk(self, root: str) -> Iterator[tuple[str, list[str], list[str]]]:
        self.walks.append(root)
        return super().walk(root)

    def resolve(self, path: str) -> str:
        return f"/user/tony/{path}"


def _am_events(app: KvApp) -> list[str]:
    from airflow_provider_tony.runtime.messages import EventRecord

    return [EventRecord.from_json(v).message for k, v in app.kv.items() if k.startswith(f"{C.KV_EVENT_PREFIX}am/")]


def test_the_am_hook_removes_the_staged_keytab_then_refreshes_as_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, webhdfs
) -> None:
    """The whole hook without a thread: the copy is deleted with the AM's client, and the refresher it returns
    logs in as the job's principal from the AM's keytab, asks the job's NameNode, writes token files to the
    application's staging folder and pointers and events to the application's store."""
    import sys

    url, handler = webhdfs
    monkeypatch.chdir(tmp_path)
    (tmp_path / C.AM_KEYTAB_ALIAS).write_bytes(b"\x05\x02the-key")
    started: list[Any] = []
    monkeypatch.setattr(tr.TokenRefresher, "start", lambda self: started.append(self))
    staged = StagedHdfs({".skein/application_1_0007/13C6/root.keytab": b"\x05\x02the-key"})
    asked: list[tuple[dict[str, str], Any]] = []

    def client_from_env(env: dict[str, str], kv: Any = None) -> StagedHdfs:
        asked.append((env, kv))
        return staged

    gss = FakeGss()

    class Auth:
        def __init__(self, **kwargs: Any) -> None:
            pass

        def __call__(self, request: Any) -> Any:
            return request

    gss.requests_gssapi.HTTPSPNEGOAuth = Auth
    monkeypatch.setitem(sys.modules, "gssapi", gss.gssapi)
    monkeypatch.setitem(sys.modules, "requests_gssapi", gss.requests_gssapi)
    env = {
        C.ENV_WEBHDFS_URL: url,
        C.ENV_AM_PRINCIPAL: "tony@TONY.LOCAL",
        C.ENV_SKEIN_APPLICATION_ID: "application_1_0007",
    }
    app = KvApp()
    with caplog.at_level("INFO", logger="tony.tokens"):
        refresher = tr.start_for_am(app, env, connect=client_from_env)
    assert isinstance(refresher, tr.TokenRefresher) and started == [refresher]
    assert asked == [(env, app.kv)] and staged.files == {}, "the AM's own client deleted the copy"
    assert _am_events(app) == ["AM removed the keytab's staged copy from HDFS"]
    assert "refreshing the job's HDFS delegation token as tony@TONY.LOCAL" in caplog.text

    fresh = token(T0, T0 + 240)
    handler.answers["GETDELEGATIONTOKEN"] = {"Token": {"urlString": fresh.url_string()}}
    handler.answers["RENEWDELEGATIONTOKEN"] = {"long": int((T0 + 60) * 1000)}
    msg = refresher.obtain()
    assert msg.token == fresh.url_string() and [q["op"] for _, q in handler.calls] == [
        ["GETDELEGATIONTOKEN"],
        ["RENEWDELEGATIONTOKEN"],
    ]
    ((login),) = gss.logins
    assert login["name"][1] == "tony@TONY.LOCAL"
    assert login["store"]["client_keytab"] == str(tmp_path / C.AM_KEYTAB_ALIAS)

    writer = refresher.publish
    assert isinstance(writer, tr.TokenFileWriter)
    assert writer.path(0) == f"/user/tony/.skein/application_1_0007/{C.TOKEN_FILE_PREFIX}0"
    client = writer.client_for(fresh.url_string())
    assert client.url == url and client.token() == fresh.url_string()
    writer.put(C.KV_TOKEN_POINTER, b"pointer")
    refresher.event("AM says hello")
    assert app.kv[C.KV_TOKEN_POINTER] == b"pointer" and _am_events(app)[-1] == "AM says hello"


def test_the_am_hook_says_when_there_was_no_copy_and_stops_without_an_application_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / C.AM_KEYTAB_ALIAS).write_bytes(b"\x05\x02the-key")
    monkeypatch.setattr(tr.TokenRefresher, "start", lambda self: None)
    env = {C.ENV_WEBHDFS_URL: "http://nn:9870", C.ENV_AM_PRINCIPAL: "tony@TONY.LOCAL"}
    staged = StagedHdfs({})
    with caplog.at_level("ERROR", logger="tony.tokens"):
        assert tr.start_for_am(KvApp(), env, hdfs=staged) is None
    assert staged.walks == [] and "the AM does not know its application id" in caplog.text
    app = KvApp()
    refresher = tr.start_for_am(app, {**env, C.ENV_SKEIN_APPLICATION_ID: "application_1_0007"}, hdfs=staged)
    assert refresher is not None and staged.walks == [".skein/application_1_0007"]
    assert _am_events(app) == ["AM found no staged copy of the keytab"]
