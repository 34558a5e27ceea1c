"""``ClusterAccess``: how the submitting side reaches one YARN cluster, and as whom.

The addresses (an HA pair's every ResourceManager and NameNode), Kerberos, the one HTTP
client every call goes through (yarn/rest.py), the WebHDFS clients, and who this side is
on the cluster: its YARN and HDFS user, its folders under ``base_path``, what its
containers are told. ``TonyClient`` (yarn/client.py) is built on it and adds what is done
there: submit, find, gc, and a handle per application (yarn/application.py).

Two WebHDFS clients, two names: ``webhdfs`` (and ``webhdfs_for``) is the provider's own,
over the httpx client (SPNEGO, failover): everything the provider writes and reads goes
through it. ``hdfs()`` is the ``hdfs`` package's client, for code that wants its
conveniences (folder uploads, ``download``), as the containers use it.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Self

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import ClusterError, ClusterForbidden, KerberosError, NotFound
from airflow_provider_tony.runtime.namenodes import NameNode, authority_of, encode
from airflow_provider_tony.runtime.spec import JobSpec, hdfs_folder
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.checks import RESOURCE_CALCULATOR_KEY, ClusterInfo, cluster_info_from_rm
from airflow_provider_tony.yarn.clusterenv import ClusterEnv, security_for
from airflow_provider_tony.yarn.container_logs import ContainerLogs
from airflow_provider_tony.yarn.failover import Endpoints, split_addresses
from airflow_provider_tony.yarn.hadoop_conf import namenode_addresses, rm_addresses, rm_rpc_addresses
from airflow_provider_tony.yarn.kerberos import HttpxSpnegoAuth, KerberosConfig, KerberosSession
from airflow_provider_tony.yarn.namenodes import NameNodeClients, hdfs_token_service, parse_extra, resolve, touched
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls, WebHdfs
from airflow_provider_tony.yarn.upload_cache import UploadCache


def short_name(principal: str) -> str:
    """A Kerberos principal's user as Hadoop names it: ``alice/host@REALM`` -> ``alice``."""
    return principal.split("@", 1)[0].split("/", 1)[0]


def read_site(conf_dir: str | None, name: str, key: str) -> str | None:
    """``key``'s value in the Hadoop conf dir's ``name`` (``core-site.xml``, ...), or None."""
    if not conf_dir:
        return None
    path = Path(conf_dir) / name
    if not path.exists():
        return None
    # The cluster's own Hadoop configuration, trusted as much as HADOOP_CONF_DIR itself.
    for prop in ET.parse(path).getroot().iter("property"):  # noqa: S314
        if prop.findtext("name") == key:
            return prop.findtext("value")
    return None


def rm_url_from_conf(conf_dir: str) -> str | None:
    """The ResourceManager web address(es) a Hadoop conf dir's ``yarn-site.xml`` names, or None.

    Hadoop's default is ``${yarn.resourcemanager.hostname}:8088``; real
    configurations often set only the host name, or use that variable. An HA
    cluster's RMs come comma-separated, in the configured order (``yarn/hadoop_conf.py``).
    """
    return ",".join(rm_addresses(conf_dir)) or None


class ClusterAccess:
    """One YARN cluster's addresses, credentials and HTTP client, and this side's user and folders there."""

    def __init__(
        self,
        *,
        rm_url: str,
        webhdfs_url: str | None = None,
        webhdfs_user: str | None = None,
        base_path: str | None = None,
        skein_config: str | None = None,
        principal: str | None = None,
        keytab: str | None = None,
        kerberos: bool | None = None,
        ca_bundle: str | None = None,
        cluster_env: ClusterEnv | None = None,
        namenodes: object = None,
    ) -> None:
        # An HA cluster's every ResourceManager / NameNode ("http://rm1:8088,http://rm2:8088"): URLs are
        # built against the first, and the one HTTP client sends each call to the active one.
        self.namenode_urls = parse_extra(namenodes)  # the connection's namenodes extra, by hdfs://<authority>
        rms = split_addresses(rm_url)
        if not rms:
            raise ClusterError(f"no ResourceManager address in {rm_url!r}: give http(s)://host:port")
        namenodes = split_addresses(webhdfs_url) if webhdfs_url else ()
        self.rm_url = rms[0]
        self.webhdfs_url = namenodes[0] if namenodes else None
        self.webhdfs_urls = namenodes
        self.endpoints = tuple(
            Endpoints(name, bases)
            for name, bases in (("ResourceManager", rms), ("NameNode", namenodes))
            if len(bases) > 1
        )
        self._routers: list[NameNodeClients] = []
        self.webhdfs_user = webhdfs_user or os.environ.get("HADOOP_USER_NAME") or os.environ.get("USER") or "root"
        # With Kerberos the cluster knows this client by its principal's short name: that user's folder.
        owner = short_name(principal) if principal else self.webhdfs_user
        # Checked as a JobSpec's folders are: no '.'/'..' (checkpoints, history and caches live below it).
        self.base_path = hdfs_folder(base_path or f"/user/{owner}/tony", "base_path")
        # This cluster's Hadoop conf dir and skein credentials: never set process-wide,
        # so one process may follow jobs on several clusters (yarn/clusterenv.py).
        self.cluster_env = cluster_env or ClusterEnv()
        if skein_config and not self.cluster_env.skein_config:
            self.cluster_env = dataclasses.replace(self.cluster_env, skein_config=skein_config)
        self._principal = principal
        self._keytab = keytab  # a path; never logged
        # Kerberos when asked, when a principal/keytab is given, or when the
        # Hadoop configuration says the cluster is Kerberized.
        if kerberos is None:
            kerberos = bool(principal or keytab) or (
                read_site(self.cluster_env.conf_dir(), "core-site.xml", "hadoop.security.authentication") == "kerberos"
            )
        self._krb = KerberosSession(KerberosConfig(principal, keytab, ca_bundle)) if kerberos else None
        self._tls: Any = None  # skein's TLS credentials for the AMs, read once
        self._webhdfs: WebHdfs | None = None
        # Every HTTP call to the cluster (RM, NodeManagers, proxy, WebHDFS tokens) goes through one
        # client: SPNEGO with the same credentials on a Kerberized cluster (yarn/rest.py).
        self.http_settings = (
            web.HttpSettings(
                auth=HttpxSpnegoAuth(self._krb.credentials), verify=ca_bundle or True, endpoints=self.endpoints
            )
            if self._krb is not None
            else web.HttpSettings(endpoints=self.endpoints)
        )
        self.cluster = ClusterHttp(
            self.http_settings,
            user=None if self._krb is not None else (os.environ.get("HADOOP_USER_NAME") or getpass.getuser()),
        )
        # URLs are built against the first address; the failover transport picks the active one.
        self.urls = ClusterUrls(self.rm_url, self.webhdfs_url)
        self.logs = ContainerLogs(self.cluster, self.urls, lambda path: self._rm_get(path))
        # Late-bound through self: the WebHDFS connection and fs.defaultFS are made when first needed.
        self.cache = UploadCache(
            self.base_path, lambda: self.webhdfs, lambda: self.hdfs_owner, lambda: self.default_fs()
        )

    @classmethod
    def from_env(cls) -> Self:
        """The cluster that ``make -s cluster-env`` (or a Hadoop conf dir) describes.

        ``TONY_RM_URL`` wins over ``HADOOP_CONF_DIR`` when both are set: the
        explicit address beats the derived one (``HADOOP_CONF_DIR`` still tells
        where the rest of the configuration is: fs.defaultFS, the class path, the RM's principal).
        """
        rm_url = os.environ.get(C.ENV_RM_URL) or rm_url_from_conf(os.environ.get("HADOOP_CONF_DIR") or "")
        if not rm_url:
            raise ClusterError(
                "no cluster configured: set TONY_RM_URL or HADOOP_CONF_DIR "
                '(for the local cluster: eval "$(make -s cluster-env)")'
            )
        return cls(
            rm_url=rm_url,
            webhdfs_url=os.environ.get(C.ENV_WEBHDFS_URL)
            or ",".join(namenode_addresses(os.environ.get("HADOOP_CONF_DIR")))
            or None,
            webhdfs_user=os.environ.get(C.ENV_WEBHDFS_USER),
            principal=os.environ.get(C.ENV_KERBEROS_PRINCIPAL),
            keytab=os.environ.get(C.ENV_KERBEROS_KEYTAB),
        )

    @property
    def kerberos(self) -> bool:
        """Whether this client speaks Kerberos (SPNEGO, delegation tokens in containers)."""
        return self._krb is not None

    def check_kerberos(self) -> None:
        """Obtain the Kerberos credentials now: no ticket fails here, before anything is submitted."""
        if self._krb is not None:
            self._krb.credentials()

    # ------------------------------------------------------------ connections

    @property
    def http(self) -> Any:
        """The blocking HTTP client that follows jobs (RM REST, the AM's state through the proxy)."""
        return self.cluster.client

    def close(self) -> None:
        self.cluster.close()
        for router in self._routers:
            router.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rm_get(self, path: str) -> Any:
        return self.cluster.get_json(self.urls.rm(path), what=f"ResourceManager at {self.rm_url} ({path})")

    @property
    def webhdfs(self) -> WebHdfs:
        """The provider's own WebHDFS client (httpx, SPNEGO, failover): what submitting writes with."""
        if not self.webhdfs_url:
            raise ClusterError("no WebHDFS URL configured (TONY_WEBHDFS_URL or the connection's webhdfs_url)")
        if self._webhdfs is None:
            self._webhdfs = WebHdfs(self.cluster, self.urls)
        return self._webhdfs

    def webhdfs_for(self, spec: JobSpec, namenodes: dict[str, NameNode] | None = None) -> Any:
        """The provider's WebHDFS client for ``spec``'s locations (not the ``hdfs`` package's): :attr:`webhdfs`,
        or a router giving each location its own NameNode's (the checks before submit, the quality gate)."""
        others = self.namenodes(spec) if namenodes is None else namenodes
        if not others:
            return self.webhdfs
        router = NameNodeClients(self.webhdfs, self.cluster, self.default_fs(), others)
        self._routers.append(router)
        return router

    def hdfs(self) -> Any:
        """The ``hdfs`` package's client for the connection's NameNode(s): its conveniences (folders, ``download``)
        for code that wants them. Not :attr:`webhdfs`, the provider's own."""
        if not self.webhdfs_url:
            raise ClusterError("no WebHDFS URL configured (TONY_WEBHDFS_URL or the connection's webhdfs_url)")
        # The hdfs package fails over itself between the NameNodes of a ';'-separated list.
        urls = ";".join(self.webhdfs_urls)
        if self._krb is not None:
            return self._krb.webhdfs(urls)
        from hdfs import InsecureClient

        return InsecureClient(urls, user=self.webhdfs_user)

    def namenodes(self, spec: JobSpec) -> dict[str, NameNode]:
        """The NameNodes ``spec`` touches besides the default one, resolved (``yarn/namenodes.py``); a
        NameNode whose WebHDFS address is known neither to the conf dir nor to the connection is refused."""
        job = touched(spec)
        if not job:
            return {}
        return resolve(job, self.default_fs(), self.cluster_env.conf_dir(), self.namenode_urls)

    # ------------------------------------------------------------ the cluster as it answers

    def cluster_info(self) -> ClusterInfo:
        return cluster_info_from_rm(
            self._rm_get("scheduler")["scheduler"]["schedulerInfo"],
            self._rm_get("metrics")["clusterMetrics"],
            self._rm_get("get-node-labels"),
            self._rm_get("nodes?states=RUNNING"),
            resource_calculator=read_site(
                self.cluster_env.conf_dir(), "capacity-scheduler.xml", RESOURCE_CALCULATOR_KEY
            ),
        )

    def describe(self) -> str:
        """What test_connection() shows: the cluster as the RM sees it.

        On a Kerberized cluster each step is taken on its own (ticket, RM over
        SPNEGO, WebHDFS), so a failure names the step that failed.
        """
        self.check_kerberos()
        metrics = self._rm_get("metrics")["clusterMetrics"]
        text = (
            f"ResourceManager {self.rm_url}: {metrics['activeNodes']} active node(s), "
            f"{metrics['totalMB']} MiB and {metrics['totalVirtualCores']} vcores in total, "
            f"{metrics['availableMB']} MiB available"
        )
        if self._krb is not None:
            text = f"Kerberos as {self._principal or 'the ticket cache user'}; {text}"
            if self.webhdfs_url:
                self._check_webhdfs()
                text += f"; WebHDFS {self.webhdfs_url} accepts it"
        return text

    def _check_webhdfs(self) -> None:
        try:
            self.webhdfs.status("/")
        except (ClusterForbidden, NotFound, KerberosError) as exc:  # no HTTP/<host> principal for that URL's host
            raise ClusterError(
                f"WebHDFS at {self.webhdfs_url} refused {self._principal or 'the ticket cache user'}: "
                f"{exc}; check dfs.web.authentication.kerberos.principal on the NameNode and "
                "that the URL's host is the one in its HTTP/<host> principal"
            ) from exc
        except Exception as exc:
            raise ClusterError(f"WebHDFS at {self.webhdfs_url} unreachable: {exc}") from exc

    # ------------------------------------------------------------ who this side is there

    @property
    def yarn_user(self) -> str:
        """The user YARN runs this client's applications as (what the RM reports as their ``user``).

        With Kerberos, the principal's short name (the ticket cache's principal
        when none is configured); otherwise Hadoop's simple-auth user:
        ``HADOOP_USER_NAME``, else the login user, as the REST submit names it (``user.name``).
        """
        if self._krb is not None:
            name = self._principal or str(self._krb.credentials().name)
            return short_name(name)
        return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()

    @property
    def hdfs_owner(self) -> str:
        """The HDFS user whose files this client writes (the owner its uploads get)."""
        return self.yarn_user if self._krb is not None else self.webhdfs_user

    def default_fs(self) -> str:
        """The cluster's ``fs.defaultFS`` (``hdfs://nn:8020`` or ``hdfs://<nameservice>``), from the conf dir."""
        fs = read_site(self.cluster_env.conf_dir(), "core-site.xml", "fs.defaultFS")
        if not fs:
            raise ClusterError(
                "fs.defaultFS not found in $HADOOP_CONF_DIR/core-site.xml: "
                "needed to reference the python archive on HDFS"
            )
        return fs.rstrip("/")

    @property
    def history_dir(self) -> str:
        """Where AMs write each job's final ``JobHistory`` (``<base_path>/history/<app_id>.json``)."""
        return f"{self.base_path.rstrip('/')}/history"

    @property
    def events_dir(self) -> str:
        """Where jobs without ``checkpoint.dir`` keep their TensorBoard events: ``<base_path>/tensorboard/<app_id>``."""
        return f"{self.base_path.rstrip('/')}/tensorboard"

    def rm_token_renewer(self) -> tuple[str | None, str | None]:
        """On a Kerberized cluster, the RM's principal (the renewer of the job's HDFS token) and every
        RM's RPC address (what its RM token is filed for); ``(None, None)`` without Kerberos."""
        if self._krb is None:
            return None, None
        conf = self.cluster_env.conf_dir()
        principal = read_site(conf, "yarn-site.xml", "yarn.resourcemanager.principal")
        if not principal:
            raise ClusterError(
                "yarn.resourcemanager.principal not found in $HADOOP_CONF_DIR/yarn-site.xml: on a Kerberized "
                "cluster it names the renewer of the job's HDFS token"
            )
        rm_host = urllib.parse.urlsplit(self.rm_url).hostname or ""
        return principal.replace("_HOST", rm_host), ",".join(rm_rpc_addresses(conf)) or f"{rm_host}:8032"

    def _security(self) -> Any:
        if self._tls is None:
            self._tls = security_for(self.cluster_env)
        return self._tls

    def _container_env(self, attempt: int, namenodes: dict[str, NameNode] | None = None) -> dict[str, str]:
        env = {C.ENV_ATTEMPT: str(attempt), C.ENV_HISTORY_DIR: self.history_dir, C.ENV_EVENTS_DIR: self.events_dir}
        if self.webhdfs_url:
            # Every NameNode of an HA nameservice: the containers fail over between them too.
            env[C.ENV_WEBHDFS_URL] = ",".join(self.webhdfs_urls)
            env[C.ENV_WEBHDFS_USER] = self.webhdfs_user
            if self._krb is not None:
                env[C.ENV_WEBHDFS_AUTH] = C.WEBHDFS_AUTH_DELEGATION
        env.update(self._namenodes_env(namenodes or {}))
        return env

    def _namenodes_env(self, namenodes: dict[str, NameNode]) -> dict[str, str]:
        """``$TONY_DEFAULT_FS`` and, for a job on several NameNodes, ``$TONY_NAMENODES`` (``runtime/namenodes.py``):
        every one, the default's included (the containers pick its token by its service)."""
        try:
            default_fs = self.default_fs()
        except ClusterError:  # no conf dir: the containers take every location for the default's
            return {}
        env = {C.ENV_DEFAULT_FS: default_fs}
        default = authority_of(default_fs)
        if namenodes and default is not None and self.webhdfs_urls:
            own = NameNode(default, self.webhdfs_urls, hdfs_token_service(default_fs))
            env[C.ENV_NAMENODES] = encode({default: own, **namenodes})
        elif namenodes:
            env[C.ENV_NAMENODES] = encode(namenodes)
        return env


__all__ = ["ClusterAccess", "read_site", "rm_url_from_conf", "short_name"]
