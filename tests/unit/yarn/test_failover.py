"""Failover between HA addresses (yarn/failover.py) and reading them from a conf dir (yarn/hadoop_conf.py).

The transport's rules run against httpx's MockTransport standing in for the
servers (pure logic: which candidate gets a call, what is sent again and what is
not); the conf reader against conf files written as HA clusters write them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from airflow_provider_tony.runtime.errors import ClusterError, ClusterUnreachable
from airflow_provider_tony.yarn.failover import (
    ANSWERED_BY,
    AsyncFailoverTransport,
    Endpoints,
    FailoverTransport,
    OutcomeUnknown,
    Verdict,
    split_addresses,
    verdict,
)
from airflow_provider_tony.yarn.hadoop_conf import namenode_addresses, rm_addresses, rm_rpc_addresses

RM1, RM2, RM3 = "http://rm1:8088", "http://rm2:8088", "http://rm3:8088"
STANDBY = {"RemoteException": {"exception": "StandbyException", "message": "Operation category READ is not supported"}}

Handler = Callable[[httpx.Request], httpx.Response]


def _client(handler: Handler, *bases: str) -> tuple[httpx.Client, Endpoints, list[str]]:
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.scheme}://{request.url.host}:{request.url.port}")
        return handler(request)

    group = Endpoints("ResourceManager", bases or (RM1, RM2))
    client = httpx.Client(transport=FailoverTransport([group], httpx.MockTransport(record)), follow_redirects=True)
    return client, group, seen


def _down(*hosts: str) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host in hosts:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"host": request.url.host})

    return handler


@pytest.mark.parametrize(
    ("method", "status", "body", "error", "expected"),
    [
        ("GET", 200, b"", None, Verdict.DONE),
        ("POST", 202, b"", None, Verdict.DONE),
        ("GET", 404, b"", None, Verdict.DONE),  # an answer, not a failover
        ("PUT", 403, json.dumps(STANDBY).encode(), None, Verdict.NEXT),
        ("PUT", 403, b'{"RemoteException": {"exception": "AccessControlException"}}', None, Verdict.DONE),
        ("GET", 403, b'{"RemoteException": {"exception": "RetriableException"}}', None, Verdict.NEXT),
        ("POST", 503, b"This is standby RM. Retry later", None, Verdict.NEXT),
        ("POST", 307, b"This is standby RM. The redirect url is: http://rm2:8088/x", None, Verdict.NEXT),
        ("PUT", 307, b"", None, Verdict.DONE),  # WebHDFS sends a write on to a DataNode
        ("GET", 500, b"", None, Verdict.NEXT),
        ("POST", 500, b"", None, Verdict.DONE),  # the active failed it: its answer, not a reason to resend
        ("POST", None, b"", httpx.ConnectError("refused"), Verdict.NEXT),
        ("POST", None, b"", httpx.ConnectTimeout("timed out"), Verdict.NEXT),
        ("POST", None, b"", httpx.ReadTimeout("timed out"), Verdict.UNKNOWN),
        ("PUT", None, b"", httpx.RemoteProtocolError("closed"), Verdict.UNKNOWN),
        ("GET", None, b"", httpx.ReadTimeout("timed out"), Verdict.NEXT),
    ],
)
def test_verdict(method: str, status: int | None, body: bytes, error: Exception | None, expected: Verdict) -> None:
    assert verdict(method, status, "application/json", body, error)[0] is expected


def test_a_dead_first_rm_is_passed_over_and_the_answering_one_remembered() -> None:
    client, group, seen = _client(_down("rm1"))
    assert client.get(f"{RM1}/ws/v1/cluster/apps/a").json() == {"host": "rm2"}
    assert seen == ["GET http://rm1:8088", "GET http://rm2:8088"] and group.active == RM2
    seen.clear()
    client.post(f"{RM1}/ws/v1/cluster/apps", json={})  # the next call goes to the active one first
    assert seen == ["POST http://rm2:8088"]


def test_a_standby_namenode_is_passed_over_for_any_method() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "nn1":
            return httpx.Response(403, json=STANDBY)
        return httpx.Response(200, json={"boolean": True})

    client, group, seen = _client(handler, "http://nn1:9870", "http://nn2:9870")
    assert client.put("http://nn1:9870/webhdfs/v1/a?op=RENAME&destination=/b").json() == {"boolean": True}
    assert seen == ["PUT http://nn1:9870", "PUT http://nn2:9870"] and group.active == "http://nn2:9870"


def test_a_call_that_creates_is_not_sent_again_after_a_timeout() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    client, _, seen = _client(handler)
    with pytest.raises(OutcomeUnknown, match="not sent again"):
        client.post(f"{RM1}/ws/v1/cluster/apps", json={"application-id": "a"})
    assert seen == ["POST http://rm1:8088"]
    seen.clear()
    with pytest.raises(ClusterUnreachable):  # a read goes everywhere before giving up
        client.get(f"{RM1}/ws/v1/cluster/apps/a")
    assert seen == ["GET http://rm1:8088", "GET http://rm2:8088"]


def test_a_standby_rms_redirect_sends_the_call_to_the_next_candidate_not_where_it_points() -> None:
    """Its Location names the active RM by a host name of the standby's choosing, where a
    Kerberized client's credentials do not go; the configured address is asked instead."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            location = f"http://rm2.example:8088{request.url.path}"
            return httpx.Response(
                307, headers={"Location": location}, text=f"This is standby RM. The redirect url is: {location}"
            )
        return httpx.Response(200, json={"host": request.url.host})

    client, group, seen = _client(handler)
    answer = client.get(f"{RM1}/ws/v1/cluster/apps/a")
    assert answer.json() == {"host": "rm2"} and answer.extensions[ANSWERED_BY] == "rm2"
    assert group.active == RM2 and seen == ["GET http://rm1:8088", "GET http://rm2:8088"]
    seen.clear()
    client.get(f"{RM1}/ws/v1/cluster/apps/b")
    assert seen == ["GET http://rm2:8088"]


def test_spnego_asks_for_the_ticket_of_the_host_that_answered() -> None:
    """Behind the failover transport the request names rm1; rm2 answered 401, so the ticket is rm2's."""
    from airflow_provider_tony.yarn.kerberos import HttpxSpnegoAuth

    asked: list[str] = []

    class Auth(HttpxSpnegoAuth):
        def token(self, host: str) -> str:
            asked.append(host)
            return "dG9rZW4="

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            raise httpx.ConnectError("refused", request=request)
        if "authorization" not in request.headers:
            return httpx.Response(401, headers={"WWW-Authenticate": "Negotiate"})
        return httpx.Response(200, json={"host": request.url.host})

    group = Endpoints("ResourceManager", (RM1, RM2))
    client = httpx.Client(transport=FailoverTransport([group], httpx.MockTransport(handler)), auth=Auth(lambda: None))
    assert client.get(f"{RM1}/ws/v1/cluster/info").json() == {"host": "rm2"}
    assert asked == ["rm2"]


def test_every_candidate_failing_names_each_address_and_its_answer() -> None:
    client, _, _ = _client(_down("rm1", "rm2", "rm3"), RM1, RM2, RM3)
    with pytest.raises(ClusterUnreachable) as err:
        client.get(f"{RM1}/ws/v1/cluster/info")
    text = str(err.value)
    assert "no ResourceManager answered GET /ws/v1/cluster/info" in text
    assert all(f"{rm}: ConnectError" in text for rm in (RM1, RM2, RM3)), text


def _proxy_500_on(host: str) -> Handler:
    """rm1 down; ``host`` up, whose proxy answers 500 for an AM it cannot reach; the rest standby."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "rm1":
            raise httpx.ConnectError("connection refused", request=request)
        if request.url.host == host:
            return httpx.Response(500, text="could not reach the application master")
        return httpx.Response(503, text="This is standby RM. The redirect url is: ...")

    return handler


def test_a_live_rms_5xx_is_the_answer_when_no_candidate_does_better() -> None:
    """HA CI: after the job, the proxy of the live RM answered 500 for the AM that had just
    stopped, and the call failed as "no ResourceManager answered" instead of reading history."""
    client, group, seen = _client(_proxy_500_on("rm2"), RM1, RM2, RM3)
    response = client.get(f"{RM1}/proxy/application_1_0001/pages/tony/state")
    assert response.status_code == 500 and response.text == "could not reach the application master"
    assert seen == ["GET http://rm1:8088", "GET http://rm2:8088", "GET http://rm3:8088"] and group.active == RM2
    # A standby's 503 is never the answer: with no live answer left, the message names each address.
    client, _, _ = _client(_proxy_500_on("none"), RM1, RM2)
    with pytest.raises(ClusterUnreachable, match="rm2:8088: standby"):
        client.get(f"{RM1}/proxy/application_1_0001/pages/tony/state")


def test_urls_of_no_ha_service_go_where_they_are_addressed() -> None:
    client, group, seen = _client(_down())
    client.get("http://nm7:8042/ws/v1/node/containers")  # a NodeManager, a DataNode's redirect: not a candidate
    assert seen == ["GET http://nm7:8042"] and group.active == RM1


def test_a_single_address_is_never_failed_over() -> None:
    client, _, seen = _client(_down("rm1"), RM1)
    with pytest.raises(httpx.ConnectError):
        client.get(f"{RM1}/ws/v1/cluster/info")
    assert seen == ["GET http://rm1:8088"]


def test_the_asyncio_driver_follows_the_same_rules() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.host}")
        if request.url.host == "rm1":
            raise httpx.ConnectError("refused", request=request)
        if request.method == "POST":
            raise httpx.ReadTimeout("no answer", request=request)
        if request.url.path.startswith("/proxy/gone/"):
            return httpx.Response(500, text="the AM is gone")
        return httpx.Response(200, json={"host": request.url.host})

    group = Endpoints("ResourceManager", (RM1, RM2))

    async def main() -> None:
        transport = AsyncFailoverTransport([group], httpx.MockTransport(handler))
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get(f"{RM1}/ws/v1/cluster/apps/a")).json() == {"host": "rm2"}
            with pytest.raises(OutcomeUnknown):
                await client.post(f"{RM1}/ws/v1/cluster/apps", json={})
            assert (await client.get(f"{RM1}/proxy/gone/pages/tony/state")).status_code == 500

    asyncio.run(main())
    assert seen == ["GET rm1", "GET rm2", "POST rm2", "GET rm2", "GET rm1"] and group.active == RM2


def test_split_addresses() -> None:
    assert split_addresses(" http://a:1/, http://b:2;http://c:3 ,") == ("http://a:1", "http://b:2", "http://c:3")


# ---------------------------------------------------------------- conf dirs as HA clusters write them


def _site(folder: Path, name: str, props: dict[str, str]) -> None:
    rows = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (folder / name).write_text(f"<configuration>{rows}</configuration>")


HA_RM = {
    "yarn.resourcemanager.ha.enabled": "true",
    "yarn.resourcemanager.ha.rm-ids": "rm1,rm2",
    "yarn.resourcemanager.webapp.address.rm1": "rm1.example:8088",
    "yarn.resourcemanager.hostname.rm2": "rm2.example",
}


def test_ha_resourcemanagers_from_their_ids(tmp_path: Path) -> None:
    _site(tmp_path, "yarn-site.xml", HA_RM)
    assert rm_addresses(str(tmp_path)) == ("http://rm1.example:8088", "http://rm2.example:8088")
    https = {
        **HA_RM,
        "yarn.http.policy": "HTTPS_ONLY",
        "yarn.resourcemanager.webapp.https.address.rm1": "rm1.example:8090",
    }
    _site(tmp_path, "yarn-site.xml", https)
    assert rm_addresses(str(tmp_path)) == ("https://rm1.example:8090", "https://rm2.example:8090")


def test_rm_rpc_addresses_and_the_token_service_hadoops_ha_clients_look_up(tmp_path: Path) -> None:
    """skein's AM finds its RM token by every RM id's RPC address, comma-joined (ClientRMProxy)."""
    from airflow_provider_tony.yarn.submit import rpc_token_service

    _site(tmp_path, "yarn-site.xml", {**HA_RM, "yarn.resourcemanager.address.rm1": "127.0.0.1:8032"})
    assert rm_rpc_addresses(str(tmp_path)) == ("127.0.0.1:8032", "rm2.example:8032")
    assert rpc_token_service("localhost:8032,127.0.0.1:9032") == "127.0.0.1:8032,127.0.0.1:9032"
    _site(tmp_path, "yarn-site.xml", {"yarn.resourcemanager.hostname": "127.0.0.1"})
    assert rm_rpc_addresses(str(tmp_path)) == ("127.0.0.1:8032",)
    _site(tmp_path, "yarn-site.xml", {})
    assert rm_rpc_addresses(str(tmp_path)) == ()
    _site(tmp_path, "yarn-site.xml", {**HA_RM, "yarn.resourcemanager.ha.rm-ids": "rm1,rm3"})
    with pytest.raises(ClusterError, match=r"'rm1' has no RPC address; set yarn.resourcemanager.address.rm1"):
        rm_rpc_addresses(str(tmp_path))


def test_one_resourcemanager_by_host_name_and_variable(tmp_path: Path) -> None:
    _site(
        tmp_path,
        "yarn-site.xml",
        {
            "yarn.resourcemanager.hostname": "rm.example",
            "yarn.resourcemanager.webapp.address": "${yarn.resourcemanager.hostname}:18088",
        },
    )
    assert rm_addresses(str(tmp_path)) == ("http://rm.example:18088",)
    assert rm_addresses(str(tmp_path / "missing")) == ()


def test_an_ha_rm_without_an_address_names_the_key_to_set(tmp_path: Path) -> None:
    _site(tmp_path, "yarn-site.xml", {k: v for k, v in HA_RM.items() if not k.endswith("hostname.rm2")})
    with pytest.raises(
        ClusterError, match=r"yarn\.resourcemanager\.webapp\.address\.rm2 \(or yarn\.resourcemanager\.hostname\.rm2\)"
    ):
        rm_addresses(str(tmp_path))


def test_an_ha_nameservices_namenodes(tmp_path: Path) -> None:
    _site(tmp_path, "core-site.xml", {"fs.defaultFS": "hdfs://ml"})
    hdfs = {
        "dfs.nameservices": "ml,warehouse",
        "dfs.ha.namenodes.ml": "nn1, nn2",
        "dfs.namenode.http-address.ml.nn1": "nn1.example:9870",
        "dfs.namenode.http-address.ml.nn2": "nn2.example:9870",
        "dfs.ha.namenodes.warehouse": "a",
        "dfs.namenode.http-address.warehouse.a": "wh.example:9870",
    }
    _site(tmp_path, "hdfs-site.xml", hdfs)
    assert namenode_addresses(str(tmp_path)) == ("http://nn1.example:9870", "http://nn2.example:9870")
    assert namenode_addresses(str(tmp_path), "warehouse") == ("http://wh.example:9870",)
    del hdfs["dfs.namenode.http-address.ml.nn2"]
    _site(tmp_path, "hdfs-site.xml", hdfs)
    with pytest.raises(ClusterError, match=r"set dfs\.namenode\.http-address\.ml\.nn2"):
        namenode_addresses(str(tmp_path))


def test_one_namenode_from_fs_default_fs(tmp_path: Path) -> None:
    _site(tmp_path, "core-site.xml", {"fs.defaultFS": "hdfs://nn.example:8020"})
    _site(tmp_path, "hdfs-site.xml", {})
    assert namenode_addresses(str(tmp_path)) == ("http://nn.example:9870",)
    _site(
        tmp_path, "hdfs-site.xml", {"dfs.http.policy": "HTTPS_ONLY", "dfs.namenode.https-address": "nn.example:50470"}
    )
    assert namenode_addresses(str(tmp_path)) == ("https://nn.example:50470",)


def test_the_client_and_the_hook_take_several_addresses() -> None:
    from airflow_provider_tony.hooks.yarn import rm_urls_of_host
    from airflow_provider_tony.yarn.client import TonyClient

    client = TonyClient(rm_url=f"{RM1}, {RM2}/", webhdfs_url="http://nn1:9870;http://nn2:9870")
    assert client.rm_url == RM1 and client.webhdfs_url == "http://nn1:9870"
    groups = {g.name: g.bases for g in client.http_settings.endpoints}
    assert groups == {"ResourceManager": (RM1, RM2), "NameNode": ("http://nn1:9870", "http://nn2:9870")}
    assert isinstance(client.cluster.client._transport, FailoverTransport)
    assert TonyClient(rm_url=RM1).http_settings.endpoints == ()
    assert rm_urls_of_host("rm1, rm2:9999", "https", None) == "https://rm1:8088,https://rm2:9999"


# ---------------------------------------------------------------- what a submission does after a failover


class _HaRms:
    """Two RMs sharing one state store (as ZooKeeper makes them): ``lose`` = what rm1 does to a POST."""

    def __init__(self, lose: str) -> None:
        self.lose, self.stored, self.posts = lose, set[str](), list[str]()
        self.rm1_dead = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        if host == "rm1" and self.rm1_dead:
            raise httpx.ConnectError("refused", request=request)
        if request.method == "POST" and path == "/ws/v1/cluster/apps":
            self.posts.append(host)
            if host == "rm1":
                self.rm1_dead = True  # rm1 dies with the call: stored before ("after-store") or not
                if self.lose == "after-store":
                    self.stored.add("application_1_0001")
                raise httpx.ReadTimeout("no answer", request=request)
            self.stored.add("application_1_0001")
            return httpx.Response(202)
        if request.method == "GET" and path.startswith("/ws/v1/cluster/apps/"):
            app = path.rsplit("/", 1)[1]
            return httpx.Response(200, json={"app": {"id": app}}) if app in self.stored else httpx.Response(404)
        return httpx.Response(404)


@pytest.mark.parametrize(("lose", "posts"), [("after-store", ["rm1"]), ("before-store", ["rm1", "rm2"])])
def test_a_submission_unanswered_by_a_dying_rm_is_looked_up_before_it_is_sent_again(
    lose: str, posts: list[str]
) -> None:
    from airflow_provider_tony.yarn.http import HttpSettings
    from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls
    from airflow_provider_tony.yarn.submit import RestSubmitter

    rms = _HaRms(lose)
    group = Endpoints("ResourceManager", (RM1, RM2))
    http = ClusterHttp(HttpSettings(endpoints=(group,)), user="alice")
    http._client = httpx.Client(transport=FailoverTransport([group], httpx.MockTransport(rms.handle)))
    sub = RestSubmitter(
        http=http,
        urls=ClusterUrls(RM1),
        hdfs=None,
        default_fs="hdfs://ns",
        user="alice",
        application_classpath=None,
        rm_principal=None,
        rm_address=None,
    )
    sub.send_submission("application_1_0001", {"application-id": "application_1_0001"})
    assert rms.posts == posts, "sent again although the new active RM had it" if lose == "after-store" else rms.posts
    assert rms.stored == {"application_1_0001"} and group.active == RM2
