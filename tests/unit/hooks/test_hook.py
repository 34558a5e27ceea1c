"""``YarnHook.test_connection`` (Airflow's "Test" button) where it must fail, with no cluster at all.

Also the rule for where the ResourceManager address comes from: a
connection's own host, else its ``hadoop_conf_dir``; ``TONY_RM_URL`` and
``HADOOP_CONF_DIR`` in the environment never override a connection, and for
the command line (``TonyClient.from_env``) ``TONY_RM_URL`` wins over
``HADOOP_CONF_DIR``.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.yarn.client import TonyClient, rm_url_from_conf


def closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def conf_dir(tmp_path: Path, name: str, **props: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>" for k, v in props.items())
    (path / "yarn-site.xml").write_text(f"<configuration>{body}</configuration>")
    return path


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **doc: object) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "tony_yarn", **doc}))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cluster from the developer's shell, and the hook's writes to os.environ are undone."""
    for var in ("TONY_RM_URL", "HADOOP_CONF_DIR", "JAVA_HOME", "SKEIN_CONFIG"):
        monkeypatch.setenv(var, "unset-by-test")
        monkeypatch.delenv(var)


def test_unknown_connection_id_is_named() -> None:
    ok, message = YarnHook("tony_no_such_conn").test_connection()
    assert not ok
    assert "tony_no_such_conn" in message, message


def test_connection_with_neither_host_nor_conf_dir_says_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    connection(monkeypatch, "tony_empty", extra={"queue": "default"})
    ok, message = YarnHook("tony_empty").test_connection()
    assert not ok
    assert "'tony_empty'" in message and "extra.hadoop_conf_dir" in message and "host" in message, message


def test_unreachable_resource_manager_is_named_with_its_address(monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    connection(monkeypatch, "tony_down", host="127.0.0.1", port=port)
    ok, message = YarnHook("tony_down").test_connection()
    assert not ok
    assert f"127.0.0.1:{port}" in message and "unreachable" in message, message


def test_conf_dir_only_connection_reads_the_rm_from_its_yarn_site(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = closed_port()
    conf = conf_dir(tmp_path, "conf", **{"yarn.resourcemanager.webapp.address": f"127.0.0.1:{port}"})
    connection(monkeypatch, "tony_conf", extra={"hadoop_conf_dir": str(conf)})
    ok, message = YarnHook("tony_conf").test_connection()
    assert not ok
    assert f"http://127.0.0.1:{port}" in message and "unreachable" in message, message


def test_conf_dir_without_an_rm_address_is_an_error_naming_the_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = conf_dir(tmp_path, "conf")  # a yarn-site.xml naming no ResourceManager
    connection(monkeypatch, "tony_conf", extra={"hadoop_conf_dir": str(conf)})
    ok, message = YarnHook("tony_conf").test_connection()
    assert not ok
    assert "extra.hadoop_conf_dir" in message and str(conf) in message, message


def test_the_connections_conf_dir_wins_over_tony_rm_url_in_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conn_port, env_port = closed_port(), closed_port() + 1
    conf = conf_dir(tmp_path, "conf", **{"yarn.resourcemanager.webapp.address": f"127.0.0.1:{conn_port}"})
    monkeypatch.setenv("TONY_RM_URL", f"http://127.0.0.1:{env_port}")
    connection(monkeypatch, "tony_conf", extra={"hadoop_conf_dir": str(conf)})
    ok, message = YarnHook("tony_conf").test_connection()
    assert not ok
    assert f"127.0.0.1:{conn_port}" in message and f":{env_port}" not in message, message


def test_the_connections_host_wins_over_its_conf_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    host_port, conf_port = closed_port(), closed_port() + 1
    conf = conf_dir(tmp_path, "conf", **{"yarn.resourcemanager.webapp.address": f"127.0.0.1:{conf_port}"})
    connection(monkeypatch, "tony_both", host="127.0.0.1", port=host_port, extra={"hadoop_conf_dir": str(conf)})
    ok, message = YarnHook("tony_both").test_connection()
    assert not ok
    assert f"127.0.0.1:{host_port}" in message and f":{conf_port}" not in message, message


def test_for_the_command_line_tony_rm_url_wins_over_hadoop_conf_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    conf = conf_dir(tmp_path, "conf", **{"yarn.resourcemanager.webapp.address": "conf-rm:8088"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    assert TonyClient.from_env().rm_url == "http://conf-rm:8088"
    monkeypatch.setenv("TONY_RM_URL", "http://env-rm:8088")
    assert TonyClient.from_env().rm_url == "http://env-rm:8088"


def test_command_line_with_no_cluster_says_what_to_set() -> None:
    with pytest.raises(ClusterError, match="TONY_RM_URL or HADOOP_CONF_DIR"):
        TonyClient.from_env()


@pytest.mark.parametrize(
    "props, expected",
    [
        ({"yarn.resourcemanager.webapp.address": "rm:9999"}, "http://rm:9999"),
        ({"yarn.resourcemanager.hostname": "rm"}, "http://rm:8088"),  # Hadoop's default port
        (
            {
                "yarn.resourcemanager.hostname": "rm",
                "yarn.resourcemanager.webapp.address": "${yarn.resourcemanager.hostname}:8090",
            },
            "http://rm:8090",
        ),
        ({"yarn.resourcemanager.webapp.address": "${yarn.resourcemanager.hostname}:8090"}, None),
        ({}, None),
    ],
)
def test_rm_url_from_a_conf_dir(tmp_path: Path, props: dict[str, str], expected: str | None) -> None:
    assert rm_url_from_conf(str(conf_dir(tmp_path, "conf", **props))) == expected


def test_rm_url_from_a_missing_conf_dir_is_none(tmp_path: Path) -> None:
    assert rm_url_from_conf(str(tmp_path / "absent")) is None


def test_the_connections_namenodes_extra_reaches_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other NameNodes' WebHDFS addresses (``namenodes``, JSON text in the form) travel to the client."""
    extra = {"namenodes": json.dumps({"hdfs://nn2:8020": "http://nn2:9870,http://nn3:9870"})}
    connection(monkeypatch, "tony_nn", host="127.0.0.1", port=closed_port(), extra=extra)
    client = YarnHook("tony_nn").get_conn()
    assert client.namenode_urls == {"hdfs://nn2:8020": ("http://nn2:9870", "http://nn3:9870")}


def test_hdfs_is_the_hdfs_packages_client_on_the_hook_as_on_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """``hdfs()`` means one thing: the ``hdfs`` package's client; the provider's own is ``webhdfs``."""
    from hdfs import InsecureClient

    from airflow_provider_tony.yarn.rest import WebHdfs

    extra = {"webhdfs_url": "http://nn1:9870,http://nn2:9870", "webhdfs_user": "alice"}
    connection(monkeypatch, "tony_fs", host="127.0.0.1", port=closed_port(), extra=extra)
    hook = YarnHook("tony_fs")
    fs = hook.hdfs()
    assert isinstance(fs, InsecureClient) and isinstance(hook.get_conn().hdfs(), InsecureClient)
    assert fs.url == "http://nn1:9870;http://nn2:9870"
    assert isinstance(hook.webhdfs(), WebHdfs) and hook.webhdfs() is hook.get_conn().webhdfs
