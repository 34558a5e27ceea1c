"""``YarnHook``: the Airflow connection to a YARN cluster, and every call the operator makes.

The hook owns the connection (ResourceManager address or Hadoop conf dir,
queue, Kerberos principal/keytab, the Hadoop conf dir, WebHDFS) and
delegates the work to ``TonyClient``, the same class the command line uses,
so a job behaves the same from a DAG and from a terminal. Secrets (the keytab
path is one) never reach the logs: the hook logs only the RM URL and queue.
"""

from __future__ import annotations

import threading
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

from airflow_provider_tony.connection import CONN_TYPE
from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.application import TonyApplication, by_id
from airflow_provider_tony.yarn.client import TonyClient, rm_url_from_conf
from airflow_provider_tony.yarn.clusterenv import ClusterEnv
from airflow_provider_tony.yarn.follower import AppReport
from airflow_provider_tony.yarn.hadoop_conf import namenode_addresses
from airflow_provider_tony.yarn.http import HttpSettings


class YarnHook(BaseHook):
    """Talk to one YARN cluster (and its WebHDFS) through a ``tony_yarn`` connection.

    :param yarn_conn_id: the connection id (default ``tony_yarn_default``).
    """

    conn_name_attr = "yarn_conn_id"
    default_conn_name = "tony_yarn_default"
    conn_type = CONN_TYPE
    hook_name = "YARN (TonY)"

    def __init__(self, yarn_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.yarn_conn_id = yarn_conn_id
        self._client: TonyClient | None = None
        self._client_lock = threading.Lock()  # TonyTrigger shares one hook across threads
        self._extra: dict[str, Any] = {}

    # ------------------------------------------------------------ connection

    def _resolve(self) -> tuple[str, dict[str, Any]]:
        """The ResourceManager URL and the extras, from the connection alone.

        The connection's host wins; without one, its ``hadoop_conf_dir``'s
        yarn-site.xml names the ResourceManager. ``TONY_RM_URL`` and
        ``HADOOP_CONF_DIR`` in the worker's environment never override a
        connection: they describe the command line's cluster, not this one.
        """
        conn = self.get_connection(self.yarn_conn_id)
        extra = conn.extra_dejson or {}
        conf_dir = extra.get("hadoop_conf_dir")
        if conn.host:
            return rm_urls_of_host(conn.host, conn.schema or "http", conn.port), extra
        if conf_dir:
            rm_url = rm_url_from_conf(str(conf_dir))
            if not rm_url:
                raise ClusterError(
                    f"connection {self.yarn_conn_id!r}: extra.hadoop_conf_dir {conf_dir!r} has no "
                    "yarn-site.xml naming yarn.resourcemanager.webapp.address (or .hostname); "
                    "fix the conf dir or set the connection's host"
                )
            return rm_url, extra
        raise ClusterError(
            f"connection {self.yarn_conn_id!r} has neither a ResourceManager host nor "
            "extra.hadoop_conf_dir; set one of them"
        )

    def _webhdfs_address(self, extra: dict[str, Any]) -> tuple[str | None, str | None]:
        """WebHDFS from the connection itself, or from a referenced ``webhdfs`` connection."""
        if extra.get("webhdfs_url"):
            return extra["webhdfs_url"], extra.get("webhdfs_user")
        ref = extra.get("webhdfs_conn_id")
        if ref:
            other = self.get_connection(ref)
            scheme = "https" if (other.extra_dejson or {}).get("use_ssl") else "http"
            return f"{scheme}://{other.host}:{other.port or 9870}", other.login
        conf_dir = extra.get("hadoop_conf_dir")
        if conf_dir:  # an HA nameservice's every NameNode, or the one fs.defaultFS names
            return ",".join(namenode_addresses(str(conf_dir))) or None, extra.get("webhdfs_user")
        return None, None

    def get_conn(self) -> TonyClient:
        with self._client_lock:
            return self._client or self._connect()

    def _connect(self) -> TonyClient:
        rm_url, extra = self._resolve()
        self._extra = extra
        # The connection's own Hadoop conf dir and skein credentials, kept with its client rather
        # than set process-wide: a triggerer may follow jobs on several connections.
        cluster_env = ClusterEnv(
            **{key: str(extra[key]) if extra.get(key) else None for key in ("hadoop_conf_dir", "skein_config")}
        )
        webhdfs_url, webhdfs_user = self._webhdfs_address(extra)
        if extra.get("keytab"):
            # Where the keytab lives is as good as the secret to someone on the worker: Airflow's
            # masker redacts it from every log line and message of this task from now on.
            mask_secret(str(extra["keytab"]))
        self._client = TonyClient(
            rm_url=rm_url,
            webhdfs_url=webhdfs_url,
            webhdfs_user=webhdfs_user,
            base_path=extra.get("base_path"),
            principal=extra.get("principal"),
            keytab=extra.get("keytab"),
            kerberos=extra.get("kerberos"),
            ca_bundle=extra.get("ca_bundle"),
            cluster_env=cluster_env,
            namenodes=extra.get("namenodes"),
        )
        self.log.info("YARN cluster %s (default queue %s)", rm_url, self._extra.get("queue") or "default")
        return self._client

    @property
    def default_queue(self) -> str:
        """The connection's queue, for jobs that name none."""
        self.get_conn()  # reads the connection's extras
        return str(self._extra.get("queue") or "default")

    @property
    def base_path(self) -> str:
        return self.get_conn().base_path

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def test_connection(self) -> tuple[bool, str]:
        """Reach the ResourceManager and say what it sees (Airflow's "Test" button)."""
        try:
            return True, self.get_conn().describe()
        except Exception as exc:  # noqa: BLE001 - the UI shows the message
            return False, str(exc)
        finally:
            self.close()

    def follow_target(self) -> tuple[str, HttpSettings]:
        """The ResourceManager's address and how to speak HTTP to it: all a trigger needs to follow.

        Reads the connection; starts nothing (no request).
        """
        client = self.get_conn()
        return client.rm_url, client.http_settings

    # ------------------------------------------------------------ operations
    # Thin on purpose: TonyClient is where skein/HTTP errors become ours. The operator
    # calls only these (never ``get_conn``): the hook is its one door to the cluster.

    def submit(self, spec: JobSpec, *, attempt: int) -> str:
        return self.get_conn().submit(spec, attempt=attempt)

    def application(self, app_id: str) -> TonyApplication:
        """``app_id``'s handle on the connection's cluster (``TonyClient.application``)."""
        return self.get_conn().application(app_id)

    # One application's, by its id: its handle's (yarn/application.py).
    wait = by_id(TonyApplication.wait)
    tracking_url = by_id(TonyApplication.tracking_url)
    job_page_url = by_id(TonyApplication.job_page_url)
    tensorboard_page_url = by_id(TonyApplication.tensorboard_page_url)
    tensorboard_url = by_id(TonyApplication.tensorboard_url)
    stored_history = by_id(TonyApplication.stored_history)
    report = by_id(TonyApplication.report)
    final_cost = by_id(TonyApplication.final_cost)
    am_state = by_id(TonyApplication.am_state)
    kill = by_id(TonyApplication.kill)

    def find_by_tags(self, tags: list[str], *, active_only: bool = True) -> list[AppReport]:
        return self.get_conn().find_by_tags(tags, active_only=active_only)

    def container_logs(self, container_id: str, host: str) -> dict[str, str]:
        return self.get_conn().container_logs(container_id, host)

    def webhdfs(self) -> Any:
        """The provider's own WebHDFS client (httpx, SPNEGO when Kerberos is on, failover between an
        HA pair's NameNodes), ``TonyClient.webhdfs``: retention prunes with it."""
        return self.get_conn().webhdfs

    def webhdfs_for(self, spec: JobSpec) -> Any:
        """The provider's WebHDFS client for ``spec``'s locations, each on its own NameNode
        (``TonyClient.webhdfs_for``): the quality gate publishes with it."""
        return self.get_conn().webhdfs_for(spec)

    def hdfs(self) -> Any:
        """The ``hdfs`` package's client for the connection's NameNode(s), as ``TonyClient.hdfs()``:
        for DAG code that wants its conveniences (folders, ``download``)."""
        return self.get_conn().hdfs()

    @property
    def history_dir(self) -> str:
        """Where the AMs write each job's final history (the gate adds its verdict there)."""
        return self.get_conn().history_dir

    def default_fs(self) -> str:
        """The cluster's ``fs.defaultFS`` (``hdfs://namenode:8020``): the namespace of lineage datasets."""
        return self.get_conn().default_fs()


def rm_urls_of_host(host: str, scheme: str, port: int | None) -> str:
    """The connection's host field as RM addresses: ``rm1,rm2:8090`` (an HA pair) -> each with
    the scheme, and the connection's port (8088 by default) where a host names none."""
    hosts = [h.strip() for h in host.split(",") if h.strip()]
    return ",".join(h if "://" in h else f"{scheme}://{h}" + ("" if ":" in h else f":{port or 8088}") for h in hosts)
