"""Data on several NameNodes, on the submitting side (``yarn/namenodes.py`` and its use in TonyClient and submit).

Which NameNodes a job touches, where each one's WebHDFS is (a conf dir with two nameservices
besides the default, the connection's ``namenodes`` extra), the refusal of one found in neither,
the containers' environment, a token per NameNode on a Kerberized submit (over a fake HTTP
layer), and the checks before submit asking each folder of its own NameNode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import namenodes as rn
from airflow_provider_tony.runtime.errors import ClusterError, SpecError
from airflow_provider_tony.runtime.hadoop_tokens import HDFS_DELEGATION_TOKEN, Token
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn import client as client_module
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn import namenodes as nn
from airflow_provider_tony.yarn.client import TonyClient
from airflow_provider_tony.yarn.clusterenv import ClusterEnv
from airflow_provider_tony.yarn.failover import FailoverTransport
from airflow_provider_tony.yarn.http import HttpSettings
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls, WebHdfs
from airflow_provider_tony.yarn.submit import RestSubmitter

APP = "application_1700000000000_0036"
HDFS_SITE = {
    "dfs.nameservices": "tony,ml,warehouse",
    "dfs.ha.namenodes.tony": "nn1",
    "dfs.namenode.http-address.tony.nn1": "10.0.0.1:9870",
    "dfs.ha.namenodes.ml": "a,b",
    "dfs.namenode.http-address.ml.a": "10.1.1.1:9870",
    "dfs.namenode.http-address.ml.b": "10.1.1.2:9870",
    "dfs.namenode.http-address.warehouse": "10.2.2.2:50070",
    "dfs.namenode.rpc-address.warehouse": "10.2.2.2:8020",
    # The default NameNode's plain address: namenode_addresses' last fallback, never another's.
    "dfs.namenode.http-address": "10.0.0.1:9870",
}


def _site(path: Path, props: dict[str, str]) -> None:
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    path.write_text(f"<configuration>{body}</configuration>")


@pytest.fixture
def conf(tmp_path: Path) -> str:
    _site(tmp_path / "core-site.xml", {"fs.defaultFS": "hdfs://tony"})
    _site(tmp_path / "hdfs-site.xml", HDFS_SITE)
    return str(tmp_path)


def _spec(**extra: Any) -> JobSpec:
    return JobSpec.from_dict({"roles": {"worker": {"module": "m"}}, **extra})


JOB = {
    "inputs": {"clicks": {"path": "hdfs://warehouse/data/clicks"}, "local": {"path": "/data/here"}},
    "checkpoint": {
        "dir": "hdfs://tony/ckpt/run",
        "warm_start_from": "hdfs://ML/ckpt/yesterday",
        "model_dir": "hdfs://ml/models/m",
    },
    "files": {"vocab.txt": "hdfs://10.9.0.1:8020/shared/vocab.txt", "x.txt": "hdfs:///plain/x.txt"},
    "other_namenodes": ["hdfs://ml", "hdfs://10.9.0.5:8020"],
}


# --------------------------------------------------------------------------- which NameNodes
def test_every_hdfs_authority_the_job_names_is_found_once_with_its_first_field() -> None:
    found = nn.touched(_spec(**JOB))
    assert [(t.authority, t.field) for t in found] == [
        ("hdfs://warehouse", "inputs.clicks.path"),
        ("hdfs://tony", "checkpoint.dir"),
        ("hdfs://ml", "checkpoint.warm_start_from"),
        ("hdfs://10.9.0.1:8020", "files.vocab.txt"),
        ("hdfs://10.9.0.5:8020", "other_namenodes[1]"),
    ]
    gated = _spec(checkpoint={"model_dir": "/m"}, quality_gate={"metric": "a", "record": "hdfs://rec/p.json"})
    assert [t.field for t in nn.touched(gated)] == ["quality_gate.record"]
    env = _spec(python={"archive": "hdfs://envs/e.tar.gz"}, src_dir="hdfs://src/s.tar.gz")
    assert [t.field for t in nn.touched(env)] == ["python.archive", "src_dir"]


def test_addresses_come_from_the_conf_dirs_nameservices_then_the_connection(conf: str) -> None:
    job = [t for t in nn.touched(_spec(**JOB)) if t.authority != "hdfs://10.9.0.5:8020"]
    extra = nn.parse_extra(
        {"hdfs://10.9.0.1:8020": "http://10.9.0.1:9870, http://10.9.0.2:9870", "hdfs://ml": "http://not-this:1"}
    )
    got = nn.resolve(job, "hdfs://tony", conf, extra)
    assert got == {
        "hdfs://warehouse": rn.NameNode("hdfs://warehouse", ("http://10.2.2.2:50070",), "10.2.2.2:8020"),
        "hdfs://ml": rn.NameNode("hdfs://ml", ("http://10.1.1.1:9870", "http://10.1.1.2:9870"), "ha-hdfs:ml"),
        "hdfs://10.9.0.1:8020": rn.NameNode(
            "hdfs://10.9.0.1:8020", ("http://10.9.0.1:9870", "http://10.9.0.2:9870"), "10.9.0.1:8020"
        ),
    }
    # An authority without a port in the extra is Hadoop's default RPC port.
    bare = nn.resolve(
        [nn.Touched("hdfs://10.7.0.1", "f", "hdfs://10.7.0.1/x")],
        "hdfs://tony",
        None,
        {"hdfs://10.7.0.1": ("http://10.7.0.1:9870",)},
    )
    assert bare["hdfs://10.7.0.1"].token_service == "10.7.0.1:8020"


def test_a_namenode_with_no_known_address_is_refused_naming_the_field_and_both_fixes(conf: str) -> None:
    with pytest.raises(SpecError) as err:
        nn.resolve(nn.touched(_spec(**JOB)), "hdfs://tony", conf, {})
    assert err.value.field == "files.vocab.txt"
    text = str(err.value)
    assert "hdfs://10.9.0.1:8020/shared/vocab.txt is on NameNode hdfs://10.9.0.1:8020" in text
    assert "dfs.nameservices" in text and "namenodes extra" in text
    assert "10.0.0.1" not in text  # the default NameNode's address was not taken for it


def test_a_non_ha_nameservice_without_an_rpc_address_is_refused_naming_the_key(tmp_path: Path) -> None:
    _site(tmp_path / "hdfs-site.xml", {"dfs.nameservices": "w", "dfs.namenode.http-address.w": "10.2.2.2:50070"})
    with pytest.raises(ClusterError, match="dfs.namenode.rpc-address.w"):
        nn.resolve([nn.Touched("hdfs://w", "f", "hdfs://w/x")], "hdfs://tony", str(tmp_path), {})


@pytest.mark.parametrize(
    "value, said",
    [
        ("{not json", "is not JSON"),
        ("[1]", "is not a mapping"),
        ({"nn2:8020": "http://nn2:9870"}, "is not an hdfs://<authority> key"),
        ({"hdfs://nn2:8020/data": "http://nn2:9870"}, "is not an hdfs://<authority> key"),
        ({"hdfs://nn2:8020": "nn2:9870"}, "is not http(s) addresses"),
        ({"hdfs://nn2:8020": ["http://nn2:9870"]}, "is not http(s) addresses"),
    ],
)
def test_the_connection_extra_is_checked(value: object, said: str) -> None:
    with pytest.raises(ClusterError) as err:
        nn.parse_extra(value)
    assert "the connection's namenodes extra" in str(err.value) and said in str(err.value)


def test_the_connection_extra_as_json_text_and_mapping() -> None:
    text = json.dumps({"hdfs://NN2:8020/": "http://nn2:9870"})
    assert nn.parse_extra(text) == {"hdfs://nn2:8020": ("http://nn2:9870",)}
    assert nn.parse_extra(None) == nn.parse_extra("") == {}


@pytest.mark.parametrize(
    "value, field, said",
    [
        ("hdfs://ml", "other_namenodes", "is not a list"),
        (["hdfs://ml/data"], "other_namenodes[0]", "is not an hdfs://<authority> URI"),
        (["hdfs://ml", "viewfs://ml"], "other_namenodes[1]", "is not an hdfs://<authority> URI"),
        (["hdfs://"], "other_namenodes[0]", "is not an hdfs://<authority> URI"),
        ([7], "other_namenodes[0]", "is not an hdfs://<authority> URI"),
        ([f"hdfs://n{i}" for i in range(17)], "other_namenodes", "17 NameNodes given; at most 16"),
    ],
)
def test_other_namenodes_refuses_what_is_not_an_hdfs_authority(value: object, field: str, said: str) -> None:
    with pytest.raises(SpecError) as err:
        _spec(other_namenodes=value)
    assert err.value.field == field and said in str(err.value)


def test_other_namenodes_are_normalised_and_round_trip() -> None:
    spec = _spec(other_namenodes=["hdfs://ML/", "hdfs://ml", "hdfs://10.9.0.5:8020", "hdfs://[::1]:8020"])
    assert spec.other_namenodes == ["hdfs://ml", "hdfs://10.9.0.5:8020", "hdfs://[::1]:8020"]
    assert JobSpec.from_dict(spec.to_dict()).other_namenodes == spec.other_namenodes
    assert len(_spec(other_namenodes=[f"hdfs://n{i}" for i in range(16)]).other_namenodes) == 16


# --------------------------------------------------------------------------- the containers' environment
def test_the_containers_get_the_default_fs_and_every_namenode_the_default_included(conf: str) -> None:
    tony = TonyClient(
        rm_url="http://rm:8088",
        webhdfs_url="http://10.0.0.1:9870",
        cluster_env=ClusterEnv(hadoop_conf_dir=conf),
        namenodes={"hdfs://10.9.0.1:8020": "http://10.9.0.1:9870"},
    )
    spec = _spec(**{**JOB, "other_namenodes": []})
    others = tony.namenodes(spec)
    assert sorted(others) == ["hdfs://10.9.0.1:8020", "hdfs://ml", "hdfs://warehouse"]
    env = tony._container_env(1, others)
    assert env[C.ENV_DEFAULT_FS] == "hdfs://tony"
    listed = rn.decode(env[C.ENV_NAMENODES])
    assert listed["hdfs://tony"] == rn.NameNode("hdfs://tony", ("http://10.0.0.1:9870",), "ha-hdfs:tony")
    assert {a: listed[a] for a in others} == others
    alone = tony._container_env(1, {})
    assert alone[C.ENV_DEFAULT_FS] == "hdfs://tony" and C.ENV_NAMENODES not in alone


# --------------------------------------------------------------------------- a token per NameNode
class Cluster:
    """The RM and three NameNodes' WebHDFS by host: each hands out its own token; ml's first NameNode is standby."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.submitted: list[dict[str, Any]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        host, path, op = request.url.host, request.url.path, request.url.params.get("op")
        if op == "GETDELEGATIONTOKEN":
            self.asked.append((host, request.url.params["renewer"]))
            if host == "10.1.1.1":
                standby = {"RemoteException": {"exception": "StandbyException", "message": "standby"}}
                return httpx.Response(403, json=standby)
            token = Token("", "WEBHDFS delegation", f"{host}:9870", f"id-{host}".encode(), f"pw-{host}".encode())
            return httpx.Response(200, json={"Token": {"urlString": token.url_string()}})
        if (request.method, path) == ("POST", "/ws/v1/cluster/delegation-token"):
            rm = Token("", "RM_DELEGATION_TOKEN", "", b"rm-ident", b"rm-secret")
            return httpx.Response(200, json={"token": rm.url_string()})
        return httpx.Response(404, text=f"unexpected {request.method} {host}{path}")


def test_a_kerberized_submit_files_one_hdfs_token_per_namenode_under_its_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = Cluster()

    def fake_client(settings: HttpSettings | None = None) -> httpx.Client:
        transport: Any = httpx.MockTransport(cluster.handle)
        if settings is not None and settings.endpoints:  # the other NameNode's own failover
            transport = FailoverTransport(settings.endpoints, transport)
        return httpx.Client(transport=transport)

    monkeypatch.setattr(web, "http_client", fake_client)
    http = ClusterHttp(HttpSettings())
    urls = ClusterUrls("http://rm:8088", "http://10.0.0.1:9870")
    others = {
        "hdfs://ml": rn.NameNode("hdfs://ml", ("http://10.1.1.1:9870", "http://10.1.1.2:9870"), "ha-hdfs:ml"),
        "hdfs://10.9.0.1:8020": rn.NameNode("hdfs://10.9.0.1:8020", ("http://10.9.0.1:9870",), "10.9.0.1:8020"),
    }
    sub = RestSubmitter(
        http=http,
        urls=urls,
        hdfs=WebHdfs(http, urls),
        default_fs="hdfs://tony",
        user="alice",
        rm_principal="rm/rm@TONY.LOCAL",
        rm_address="10.0.0.3:8032",
        namenodes=nn.NameNodeClients(WebHdfs(http, urls), http, "hdfs://tony", others),
    )
    tokens = {service: Token.from_url_string(value) for service, value in sub.tokens().items()}
    assert sorted(tokens) == ["10.0.0.3:8032", "10.9.0.1:8020", "ha-hdfs:ml", "ha-hdfs:tony"]
    for service, host in (("ha-hdfs:tony", "10.0.0.1"), ("ha-hdfs:ml", "10.1.1.2"), ("10.9.0.1:8020", "10.9.0.1")):
        got = tokens[service]
        assert (got.kind, got.service, got.identifier) == (HDFS_DELEGATION_TOKEN, service, f"id-{host}".encode())
    assert sorted(cluster.asked) == sorted(
        (h, "rm/rm@TONY.LOCAL") for h in ("10.0.0.1", "10.1.1.1", "10.1.1.2", "10.9.0.1")
    )


def test_an_hdfs_file_on_another_namenode_is_looked_up_there() -> None:
    class Fs:
        def __init__(self, files: dict[str, int]) -> None:
            self.files = files

        def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
            size = self.files.get(path)
            return None if size is None else {"length": size, "modificationTime": 7}

    default, ml = Fs({"/data/v.txt": 1}), Fs({"/data/v.txt": 42})

    class Router(rn.Router):
        def for_location(self, location: str) -> Fs:
            return ml if rn.authority_of(location) == "hdfs://ml" else default

    sub = RestSubmitter(http=None, urls=None, hdfs=default, default_fs="hdfs://tony", user="a")  # type: ignore[arg-type]
    sub.namenodes = Router()  # type: ignore[assignment]
    assert sub._resource("/app", "hdfs://ml/data/v.txt").size == 42
    assert sub._resource("/app", "hdfs:///data/v.txt").size == 1


# --------------------------------------------------------------------------- the checks before submit
def test_each_folder_is_checked_on_its_own_namenode(conf: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tony = TonyClient(
        rm_url="http://rm:8088", webhdfs_url="http://10.0.0.1:9870", cluster_env=ClusterEnv(hadoop_conf_dir=conf)
    )
    asked: list[tuple[str, list[tuple[str, str]]]] = []
    monkeypatch.setattr(
        client_module,
        "check_room",
        lambda fs, folders: asked.append((fs.urls.webhdfs_url, [(f.field, f.path) for f in folders])),
    )
    spec = _spec(checkpoint={"dir": "hdfs://ml/ckpt/run", "model_dir": "/models/m"})
    tony.check_room(spec)
    assert asked == [
        ("http://10.1.1.1:9870", [("checkpoint.dir", "/ckpt/run")]),
        (
            "http://10.0.0.1:9870",
            [("checkpoint.model_dir", "/models/m"), ("the connection's base_path (job histories)", tony.history_dir)],
        ),
    ]


def test_inputs_are_checked_on_their_own_namenode(conf: str, monkeypatch: pytest.MonkeyPatch) -> None:
    tony = TonyClient(
        rm_url="http://rm:8088", webhdfs_url="http://10.0.0.1:9870", cluster_env=ClusterEnv(hadoop_conf_dir=conf)
    )
    listed: list[tuple[str, str]] = []

    def list_input(fs: Any, location: str, field: str = "") -> list[Any]:
        from airflow_provider_tony.runtime.inputs import InputFile

        chosen = rn.pick(fs, location)
        listed.append((chosen.urls.webhdfs_url, location))
        return [InputFile("/data/clicks/part-0", 3, "part-0")]

    monkeypatch.setattr("airflow_provider_tony.yarn.checks.list_input", list_input)
    seen = tony.check_inputs(_spec(inputs={"clicks": {"path": "hdfs://warehouse/data/clicks"}}))
    assert listed == [("http://10.2.2.2:50070", "hdfs://warehouse/data/clicks")]
    assert seen == {C.ENV_INPUTS_SEEN: "clicks=1:3"}


def test_submit_refuses_an_unknown_namenode_before_anything_is_asked(conf: str) -> None:
    tony = TonyClient(
        rm_url="http://rm:8088", webhdfs_url="http://10.0.0.1:9870", cluster_env=ClusterEnv(hadoop_conf_dir=conf)
    )
    tony.cluster_info = lambda: pytest.fail("the cluster was asked")  # type: ignore[method-assign]
    with pytest.raises(SpecError) as err:
        tony.check(_spec(checkpoint={"model_dir": "hdfs://elsewhere:8020/models/m"}))
    assert err.value.field == "checkpoint.model_dir"


def test_submit_hands_the_namenodes_to_the_containers_and_to_the_tokens(
    conf: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_tony.yarn.checks import ClusterInfo

    tony = TonyClient(
        rm_url="http://rm:8088", webhdfs_url="http://10.0.0.1:9870", cluster_env=ClusterEnv(hadoop_conf_dir=conf)
    )
    info = ClusterInfo(8192, 8, ["memory-mb", "vcores"], ["default"], total_memory_mb=16384, total_vcores=16)
    given: list[Any] = []

    class Submitter:
        def submit(self, app_spec: Any) -> str:
            given.append(app_spec)
            return APP

    def submitter(namenodes: Any = None) -> Submitter:
        given.append(namenodes)
        return Submitter()

    monkeypatch.setattr(tony, "cluster_info", lambda: info)
    monkeypatch.setattr(tony, "check_room", lambda spec, namenodes=None: None)
    monkeypatch.setattr(tony, "stage_runtime", lambda: "hdfs://tony/cache/tony_runtime-abc.zip")
    monkeypatch.setattr(tony, "submitter", submitter)
    spec = _spec(python={"interpreter": "/usr/bin/python3"}, checkpoint={"model_dir": "hdfs://ml/models/m"})
    assert tony.submit(spec) == APP
    namenodes, app_spec = given
    assert list(namenodes) == ["hdfs://ml"]
    env = app_spec.services["worker"].env
    assert sorted(rn.decode(env[C.ENV_NAMENODES])) == ["hdfs://ml", "hdfs://tony"]
    assert env[C.ENV_DEFAULT_FS] == "hdfs://tony"
