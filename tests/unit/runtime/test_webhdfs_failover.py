"""The containers' WebHDFS failover (runtime/webhdfs_failover.py) against fake NameNodes.

The fakes are a requests transport adapter answering as NameNodes do: 403 with a
``StandbyException`` from a standby, a refused connection from a dead one, a
read timeout from one that took the call and died. Every test counts the calls
each NameNode received, so "failed over", "remembered" and "not resent" are
facts about traffic, not about return values.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from hdfs import HdfsError
from requests.adapters import BaseAdapter
from urllib3.exceptions import MaxRetryError, NewConnectionError

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import hdfs_io
from airflow_provider_tony.runtime.hadoop_tokens import Token
from airflow_provider_tony.runtime.webhdfs_failover import (
    FailoverInsecureClient,
    NameNodes,
    NoActiveNameNode,
    is_standby,
    not_sent,
    split_urls,
)
from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

NN1, NN2, DN = "http://nn1:9870", "http://nn2:9870", "http://dn:9864"
STANDBY = (
    403,
    {
        "RemoteException": {
            "exception": "StandbyException",
            "javaClassName": "org.apache.hadoop.ipc.StandbyException",
            "message": "Operation category READ is not supported in state standby",
        }
    },
)
Handler = Callable[[str, str, dict[str, str]], Any]


def refused(url: str) -> requests.ConnectionError:
    reason = NewConnectionError(None, f"Failed to establish a new connection: [Errno 111] Connection refused ({url})")
    return requests.ConnectionError(MaxRetryError(None, url, reason))


class FakeCluster(BaseAdapter):
    """Routes each request to the handler of its host; records (host, method, op) of each."""

    def __init__(self, handlers: dict[str, Handler]) -> None:
        super().__init__()
        self.handlers = handlers
        self.calls: list[tuple[str, str, str]] = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        parts = urlsplit(request.url or "")
        base = f"{parts.scheme}://{parts.netloc}"
        params = {k: v[0] for k, v in parse_qs(parts.query).items()}
        self.calls.append((base, request.method or "", params.get("op", "")))
        answer = self.handlers[base](request.method or "", parts.path, params)
        if isinstance(answer, BaseException):
            raise answer
        status, body = answer
        response = requests.Response()
        response.status_code = status
        response.url = request.url or ""
        response.request = request
        if isinstance(body, str):  # a redirect's location
            response.headers["Location"] = body
            body = None
        response._content = json.dumps(body).encode() if body is not None else b""
        response.headers["Content-Type"] = "application/json"
        return response

    def close(self) -> None:
        pass

    def count(self, base: str, op: str | None = None) -> int:
        return sum(1 for b, _m, o in self.calls if b == base and (op is None or o == op))


def client(handlers: dict[str, Handler], **kwargs: Any) -> tuple[Any, FakeCluster]:
    fake = FakeCluster(handlers)
    session = requests.Session()
    session.mount("http://", fake)
    made = FailoverInsecureClient(f"{NN1},{NN2}", user="alice", session=session, **kwargs)
    made._namenodes._sleep = lambda _s: None  # the fake cluster needs no real waiting
    return made, fake


def file_status(kind: str = "FILE") -> tuple[int, dict[str, Any]]:
    return 200, {"FileStatus": {"type": kind, "length": 1, "pathSuffix": ""}}


def test_a_standby_answer_moves_to_the_next_namenode_and_the_active_one_is_remembered() -> None:
    hdfs, fake = client({NN1: lambda *_: STANDBY, NN2: lambda *_: file_status()})
    assert hdfs.status("/a")["type"] == "FILE"
    assert hdfs.status("/b")["type"] == "FILE"
    assert fake.count(NN1) == 1  # asked once, then nn2 first
    assert fake.count(NN2) == 2
    assert hdfs._namenodes.active == NN2


def test_a_refused_connection_moves_on_for_a_call_that_creates() -> None:
    hdfs, fake = client({NN1: lambda *_: refused(NN1), NN2: lambda *_: (200, {"boolean": True})})
    assert hdfs.makedirs("/x") is None  # the hdfs package returns nothing on success
    assert fake.count(NN1, "MKDIRS") == 1 and fake.count(NN2, "MKDIRS") == 1


def test_during_a_failover_the_call_waits_until_a_namenode_is_active() -> None:
    rounds = Counter[str]()

    def becoming_active(*_: Any) -> Any:
        rounds["nn2"] += 1
        return STANDBY if rounds["nn2"] < 4 else file_status()

    hdfs, fake = client({NN1: lambda *_: refused(NN1), NN2: becoming_active})
    assert hdfs.status("/a")["type"] == "FILE"
    assert fake.count(NN2) == 4 and fake.count(NN1) == 4  # four rounds, each nn1 first


def test_no_active_namenode_for_the_whole_patience_lists_each_address() -> None:
    clock = [0.0]
    nns = NameNodes(
        (NN1, NN2), patience=10.0, sleep=lambda s: clock.__setitem__(0, clock[0] + s), clock=lambda: clock[0]
    )

    def one(base: str) -> Any:
        if base == NN1:
            raise refused(NN1)
        response = requests.Response()
        response.status_code, response._content = STANDBY[0], json.dumps(STANDBY[1]).encode()
        return response

    with pytest.raises(NoActiveNameNode) as caught:
        nns.send(one, "GETFILESTATUS")
    text = str(caught.value)
    assert NN1 in text and NN2 in text and "StandbyException" in text and "ConnectionError" in text
    assert 10.0 <= clock[0] < 20.0  # waited its patience, with growing pauses, then stopped


def read_timeout(*_: Any) -> requests.ReadTimeout:
    return requests.ReadTimeout("read timed out")


def test_a_rename_that_happened_before_the_timeout_is_not_sent_again() -> None:
    def nn2(method: str, path: str, params: dict[str, str]) -> Any:
        if params["op"] == "GETFILESTATUS":  # the source is gone, the destination is there
            return (
                file_status()
                if path.endswith("/dst")
                else (404, {"RemoteException": {"exception": "FileNotFoundException", "message": "no"}})
            )
        return 200, {"boolean": False}  # a resent rename of a moved source answers false

    hdfs, fake = client({NN1: read_timeout, NN2: nn2})
    assert hdfs.rename("/src", "/dst") is None
    assert fake.count(NN1, "RENAME") == 1
    assert fake.count(NN2, "RENAME") == 0  # checked, not resent
    assert fake.count(NN2, "GETFILESTATUS") == 2


def test_a_rename_that_did_not_happen_is_sent_once_more() -> None:
    def nn2(method: str, path: str, params: dict[str, str]) -> Any:
        if params["op"] == "GETFILESTATUS":
            return file_status()  # the source is still there
        return 200, {"boolean": True}

    hdfs, fake = client({NN1: read_timeout, NN2: nn2})
    hdfs.rename("/src", "/dst")
    assert fake.count(NN2, "RENAME") == 1


def test_a_mkdirs_that_happened_is_not_sent_again() -> None:
    hdfs, fake = client({NN1: read_timeout, NN2: lambda *_: file_status("DIRECTORY")})
    hdfs.makedirs("/d")
    assert fake.count(NN2, "MKDIRS") == 0 and fake.count(NN2, "GETFILESTATUS") == 1


def test_a_datanode_step_is_sent_where_the_namenode_redirected() -> None:
    def nn2(method: str, path: str, params: dict[str, str]) -> Any:
        return 307, f"{DN}/webhdfs/v1{path}?op=CREATE&namenoderpcaddress=tony"

    hdfs, fake = client({NN1: lambda *_: STANDBY, NN2: nn2, DN: lambda *_: (201, None)})
    hdfs.write("/f", data=b"bytes")
    assert fake.count(DN, "CREATE") == 1 and fake.count(NN2, "CREATE") == 1
    assert fake.count(NN1, "CREATE") == 1  # the standby declined; nothing more went to it


def test_the_delegation_token_client_fails_over_and_never_shows_its_token() -> None:
    fake = FakeCluster({NN1: lambda *_: refused(f"{NN1}?delegation=SECRETTOKEN"), NN2: lambda *_: file_status()})
    token = Token(
        alias="ha-hdfs:tony", kind="HDFS_DELEGATION_TOKEN", service="ha-hdfs:tony", identifier=b"id", password=b"pw"
    )
    hdfs = DelegationTokenClient(f"{NN1},{NN2}", token)
    hdfs._session.mount("http://", fake)
    assert hdfs.status("/a")["type"] == "FILE"
    assert fake.count(NN2) == 1
    fake.handlers[NN2] = lambda *_: refused(f"{NN2}?delegation=SECRETTOKEN")
    hdfs._namenodes.patience = 0.0
    with pytest.raises(HdfsError) as caught:
        hdfs.status("/a")
    assert "SECRETTOKEN" not in str(caught.value) and NN2 in str(caught.value)


def test_one_address_is_the_plain_client_and_the_env_list_is_every_namenode() -> None:
    assert FailoverInsecureClient(NN1)._namenodes is None
    made = hdfs_io.client_from_env({C.ENV_WEBHDFS_URL: f"{NN1}, {NN2}/", C.ENV_WEBHDFS_USER: "alice"})
    assert made.namenodes == (NN1, NN2) and made.url == NN1
    assert split_urls(f"{NN1};{NN2}") == (NN1, NN2)


def test_what_counts_as_standby_and_as_not_sent() -> None:
    response = requests.Response()
    response.status_code, response._content = 403, json.dumps(STANDBY[1]).encode()
    assert is_standby(response)
    response._content = json.dumps({"RemoteException": {"exception": "AccessControlException"}}).encode()
    assert not is_standby(response)
    assert not_sent(refused(NN1)) and not_sent(requests.ConnectTimeout("x"))
    assert not not_sent(requests.ReadTimeout("x"))
    assert not not_sent(requests.ConnectionError("Connection aborted.", "RemoteDisconnected"))


def test_the_submitting_side_hands_the_containers_every_namenode() -> None:
    from airflow_provider_tony.yarn.client import TonyClient

    tony = TonyClient(rm_url="http://rm1:8088,http://rm2:8088", webhdfs_url=f"{NN1},{NN2}", webhdfs_user="alice")
    assert tony._container_env(1)[C.ENV_WEBHDFS_URL] == f"{NN1},{NN2}"


def test_the_submitting_side_builds_webhdfs_urls_against_one_namenode() -> None:
    """Found by the HA profile: the raw comma list went into every WebHDFS URL ('Invalid port')."""
    from airflow_provider_tony.yarn.client import TonyClient

    tony = TonyClient(rm_url="http://rm1:8088,http://rm2:8088", webhdfs_url=f"{NN1},{NN2}", webhdfs_user="alice")
    assert tony.urls.webhdfs("/a") == f"{NN1}/webhdfs/v1/a"
