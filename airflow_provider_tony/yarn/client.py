"""``TonyClient``: every YARN/WebHDFS call of the submitting side (HTTP only: yarn/rest.py).

The Airflow hook and the command line both go through this class, so a job
behaves the same from a DAG and from a terminal. It is also the one place
where skein and HTTP errors become this provider's own exceptions.
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import os
import sys
import time
import urllib.parse
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import inputs
from airflow_provider_tony.runtime.errors import (
    ClusterError,
    ClusterForbidden,
    KerberosError,
    NotFound,
    SpecError,
    TonyError,
    cluster_errors,
)
from airflow_provider_tony.runtime.hdfs_io import hdfs_path
from airflow_provider_tony.runtime.messages import MAX_HISTORY_BYTES, Cost, JobHistory, StateDocument
from airflow_provider_tony.runtime.namenodes import NameNode, authority_of, encode, pick
from airflow_provider_tony.runtime.spec import JobSpec, hdfs_folder
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn import source as src
from airflow_provider_tony.yarn import staging
from airflow_provider_tony.yarn.am_keytab import ship_keytab_to_am
from airflow_provider_tony.yarn.am_node import AmNode, read_am_node
from airflow_provider_tony.yarn.appspec import build_application_spec, plan_placement, runtime_zip_path
from airflow_provider_tony.yarn.checks import (
    RESOURCE_CALCULATOR_KEY,
    ClusterInfo,
    check_inputs,
    cluster_info_from_rm,
    validate_against_cluster,
    validate_local_files,
)
from airflow_provider_tony.yarn.clusterenv import ClusterEnv, security_for
from airflow_provider_tony.yarn.container_logs import ContainerLogs
from airflow_provider_tony.yarn.failover import Endpoints, split_addresses
from airflow_provider_tony.yarn.follower import (
    ACTIVE_YARN_STATES,
    AM_UNREACHABLE_TIMEOUT_S,
    AmUnreachable,
    AppReport,
    Follower,
    JobResult,
    follow_step,
)
from airflow_provider_tony.yarn.hadoop_conf import namenode_addresses, rm_addresses, rm_rpc_addresses
from airflow_provider_tony.yarn.hdfs_room import Folder, check_room
from airflow_provider_tony.yarn.kerberos import HttpxSpnegoAuth, KerberosConfig, KerberosSession
from airflow_provider_tony.yarn.logformat import shown
from airflow_provider_tony.yarn.namenodes import NameNodeClients, hdfs_token_service, parse_extra, resolve, touched
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls, WebHdfs
from airflow_provider_tony.yarn.submit import RestSubmitter, kill_application
from airflow_provider_tony.yarn.upload_cache import StagedSource, UploadCache

log = logging.getLogger(__name__)
#: How long an ended application's cost is waited for: its AM container exits right after it unregistered.
FINAL_COST_WAIT_S = 30.0


def short_name(principal: str) -> str:
    """A Kerberos principal's user as Hadoop names it: ``alice/host@REALM`` -> ``alice``."""
    return principal.split("@", 1)[0].split("/", 1)[0]


@dataclass(frozen=True)
class Checked:
    """The check phase's result: the spec as containers run it (scripts relative to ``src_dir``),
    the cluster's view, the scanned source tree (None without a local ``src_dir``), and what the
    job's HDFS inputs held."""

    spec: JobSpec
    info: ClusterInfo
    tree: src.SourceTree | None
    #: What the input check listed, for the containers (``inputs.seen_env``); empty without inputs.
    inputs_env: dict[str, str] = field(default_factory=dict)
    #: The NameNodes the job touches besides the default one (``yarn/namenodes.py``).
    namenodes: dict[str, NameNode] = field(default_factory=dict)


@dataclass(frozen=True)
class Staged:
    """The stage phase's result: where the source tree and the python environment are on HDFS."""

    checked: Checked
    source_url: str | None
    python: str
    archive_url: str | None
    #: The runtime zip in the upload cache (``hdfs://``); None ships the local copy with the job.
    runtime_url: str | None = None


def _read_site(conf_dir: str | None, name: str, key: str) -> str | None:
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


class TonyClient:
    """Submit, follow, inspect and kill TonY jobs on one YARN cluster."""

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
                _read_site(self.cluster_env.conf_dir(), "core-site.xml", "hadoop.security.authentication") == "kerberos"
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
    def from_env(cls) -> TonyClient:
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

    # ------------------------------------------------------------ plumbing

    @property
    def http(self) -> Any:
        """The blocking HTTP client that follows jobs (RM REST, the AM's state through the proxy)."""
        return self.cluster.client

    def close(self) -> None:
        self.cluster.close()
        for router in self._routers:
            router.close()

    def __enter__(self) -> TonyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rm_get(self, path: str) -> Any:
        return self.cluster.get_json(self.urls.rm(path), what=f"ResourceManager at {self.rm_url} ({path})")

    @property
    def webhdfs(self) -> WebHdfs:
        """WebHDFS over the cluster-access client (httpx, SPNEGO): what submitting writes with."""
        if not self.webhdfs_url:
            raise ClusterError("no WebHDFS URL configured (TONY_WEBHDFS_URL or the connection's webhdfs_url)")
        if self._webhdfs is None:
            self._webhdfs = WebHdfs(self.cluster, self.urls)
        return self._webhdfs

    def hdfs(self) -> Any:
        if not self.webhdfs_url:
            raise ClusterError("no WebHDFS URL configured (TONY_WEBHDFS_URL or the connection's webhdfs_url)")
        # The hdfs package fails over itself between the NameNodes of a ';'-separated list.
        urls = ";".join(self.webhdfs_urls)
        if self._krb is not None:
            return self._krb.webhdfs(urls)
        from hdfs import InsecureClient

        return InsecureClient(urls, user=self.webhdfs_user)

    # ------------------------------------------------------------ cluster

    def cluster_info(self) -> ClusterInfo:
        return cluster_info_from_rm(
            self._rm_get("scheduler")["scheduler"]["schedulerInfo"],
            self._rm_get("metrics")["clusterMetrics"],
            self._rm_get("get-node-labels"),
            self._rm_get("nodes?states=RUNNING"),
            resource_calculator=_read_site(
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

    # ------------------------------------------------------------ submit

    def validate(self, spec: JobSpec) -> ClusterInfo:
        """Everything we can check before a single container is requested; returns the cluster's view."""
        return self.check(spec).info

    # The submit pipeline: check -> stage -> build -> submit. Each phase takes the one before's
    # result and enters each module it needs once (the source tree is scanned once, in check).

    def check(self, spec: JobSpec) -> Checked:
        """Phase 1, nothing written anywhere: Kerberos, local files, the source tree, the NameNodes the job
        touches, the cluster's limits, the job's inputs and folders on HDFS (each on its NameNode)."""
        self.check_kerberos()
        validate_local_files(spec)
        tree = src.validate_source(spec)
        namenodes = self.namenodes(spec)
        info = self.cluster_info()
        for warning in validate_against_cluster(spec, info):
            log.warning("%s", warning)
        inputs_env = self.check_inputs(spec, namenodes)
        self.check_room(spec, namenodes)
        relative = src.relative_scripts(spec)
        return Checked(spec=relative, info=info, tree=tree, inputs_env=inputs_env, namenodes=namenodes)

    def namenodes(self, spec: JobSpec) -> dict[str, NameNode]:
        """The NameNodes ``spec`` touches besides the default one, resolved (``yarn/namenodes.py``); a
        NameNode whose WebHDFS address is known neither to the conf dir nor to the connection is refused."""
        job = touched(spec)
        if not job:
            return {}
        return resolve(job, self.default_fs(), self.cluster_env.conf_dir(), self.namenode_urls)

    def hdfs_for(self, spec: JobSpec, namenodes: dict[str, NameNode] | None = None) -> Any:
        """WebHDFS for ``spec``'s locations: the default client, or a router giving each location its
        NameNode's (the checks before submit, the quality gate)."""
        others = self.namenodes(spec) if namenodes is None else namenodes
        if not others:
            return self.webhdfs
        router = NameNodeClients(self.webhdfs, self.cluster, self.default_fs(), others)
        self._routers.append(router)
        return router

    def stage(self, checked: Checked) -> Staged:
        """Phase 2, on HDFS: the source tree, the python environment and the runtime zip, each once per content hash."""
        spec = checked.spec
        source = self.stage_source(spec.src_dir, tree=checked.tree).url if spec.src_dir else None
        runtime = self.stage_runtime()
        archive = spec.python.archive
        if archive:
            return Staged(checked, source, spec.python.python_command(), self.stage_archive(archive), runtime)
        return Staged(checked, source, spec.python.interpreter or sys.executable, None, runtime)

    def build(self, staged: Staged, *, attempt: int = 1, extra_tags: Iterable[str] = ()) -> Any:
        """Phase 3, pure but for the keytab check: the skein ``ApplicationSpec`` of the job."""
        spec = staged.checked.spec.with_overrides(tags=extra_tags)
        app_spec = build_application_spec(
            spec,
            python=staged.python,
            python_archive_source=staged.archive_url,
            source_archive=staged.source_url,
            extra_env={**self._container_env(attempt, staged.checked.namenodes), **staged.checked.inputs_env},
            placement_plan=plan_placement(spec, staged.checked.info.hosts),
            runtime_source=staged.runtime_url,
        )
        ship_keytab_to_am(app_spec, spec, self._principal, self._keytab)
        return app_spec

    def check_inputs(self, spec: JobSpec, namenodes: dict[str, NameNode] | None = None) -> dict[str, str]:
        """The job's HDFS inputs exist and are not empty (before submit); returns the containers' record of them.

        Each input is listed on its own NameNode (``namenodes``: :meth:`namenodes`' answer, when known).
        """
        if not spec.inputs:
            return {}
        with cluster_errors("could not list the job's inputs on HDFS"):
            return inputs.seen_env(check_inputs(spec, self.hdfs_for(spec, namenodes)))

    def check_room(self, spec: JobSpec, namenodes: dict[str, NameNode] | None = None) -> None:
        """The job's user may write its HDFS folders and their quotas leave room (``yarn/hdfs_room.py``),
        each folder asked of its own NameNode (``namenodes``: as for :meth:`check_inputs`)."""
        if not self.webhdfs_url:
            return
        folders = [("the connection's base_path (job histories)", self.history_dir)]
        if spec.checkpoint.dir:
            folders.insert(0, ("checkpoint.dir", spec.checkpoint.dir))
        else:
            folders.append(("the connection's base_path (TensorBoard events)", self.events_dir))
        if spec.checkpoint.model_dir:
            folders.insert(1, ("checkpoint.model_dir", spec.checkpoint.model_dir))
        hdfs = self.hdfs_for(spec, namenodes)
        by_namenode: dict[str | None, tuple[str, list[Folder]]] = {}
        for name, location in folders:  # grouped: one NameNode's quotas are read once for all its folders
            by_namenode.setdefault(authority_of(location), (location, []))[1].append(Folder(name, hdfs_path(location)))
        for location, group in by_namenode.values():
            check_room(pick(hdfs, location), group)

    def stage_archive(self, archive: str) -> str:
        """A local environment archive in the upload cache (``hdfs://`` URL); one on HDFS as it is."""
        return self.cache.archive(archive)

    def stage_source(self, src_dir: str, *, tree: src.SourceTree | None = None) -> StagedSource:
        """A local source tree packed into the upload cache once per content hash (``yarn/upload_cache.py``)."""
        return self.cache.source(src_dir, tree=tree)

    def stage_runtime(self) -> str:
        """The runtime zip (what containers import) in the upload cache: its ``hdfs://`` URL."""
        return f"{self.default_fs()}{self.cache.file(str(runtime_zip_path()), 'tony_runtime')}"

    @property
    def hdfs_owner(self) -> str:
        """The HDFS user whose files this client writes (the owner its uploads get)."""
        return self.yarn_user if self._krb is not None else self.webhdfs_user

    def default_fs(self) -> str:
        """The cluster's ``fs.defaultFS`` (``hdfs://nn:8020`` or ``hdfs://<nameservice>``), from the conf dir."""
        fs = _read_site(self.cluster_env.conf_dir(), "core-site.xml", "fs.defaultFS")
        if not fs:
            raise ClusterError(
                "fs.defaultFS not found in $HADOOP_CONF_DIR/core-site.xml: "
                "needed to reference the python archive on HDFS"
            )
        return fs.rstrip("/")

    def submit(self, spec: JobSpec, *, attempt: int = 1, extra_tags: Iterable[str] = ()) -> str:
        """check -> stage -> build -> submit (over the RM's REST API); returns the YARN application id."""
        checked = self.check(spec)
        app_spec = self.build(self.stage(checked), attempt=attempt, extra_tags=extra_tags)
        with cluster_errors(f"YARN refused the application {spec.name!r}"):
            return self.submitter(checked.namenodes).submit(app_spec)

    def submitter(self, namenodes: dict[str, NameNode] | None = None) -> RestSubmitter:
        """What submits over the RM's REST API and WebHDFS (yarn/submit.py): no JVM, no Hadoop client.

        ``namenodes``: the job's other NameNodes (:meth:`namenodes`), each given a token of its own.
        """
        conf = self.cluster_env.conf_dir()
        principal = rm_address = None
        if self._krb is not None:
            principal = _read_site(conf, "yarn-site.xml", "yarn.resourcemanager.principal")
            if not principal:
                raise ClusterError(
                    "yarn.resourcemanager.principal not found in $HADOOP_CONF_DIR/yarn-site.xml: on a Kerberized "
                    "cluster it names the renewer of the job's HDFS token"
                )
            rm_host = urllib.parse.urlsplit(self.rm_url).hostname or ""
            principal = principal.replace("_HOST", rm_host)
            rm_address = ",".join(rm_rpc_addresses(conf)) or f"{rm_host}:8032"
        return RestSubmitter(
            http=self.cluster,
            urls=self.urls,
            hdfs=self.webhdfs,
            default_fs=self.default_fs(),
            user=self.yarn_user,
            application_classpath=_read_site(conf, "yarn-site.xml", "yarn.application.classpath"),
            rm_principal=principal,
            rm_address=rm_address,
            security=self._security(),
            cache=self.cache.file,
            cache_data=self.cache.data,
            namenodes=NameNodeClients(self.webhdfs, self.cluster, self.default_fs(), namenodes) if namenodes else None,
        )

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

    # ------------------------------------------------------------ inspect

    def report(self, app_id: str) -> AppReport:
        """YARN's report of ``app_id`` from the RM's REST API (no skein driver)."""
        try:
            response = self.http.get(web.rm_app_url(self.rm_url, app_id))
        except Exception as exc:
            raise web.rm_error(self.rm_url, app_id, exc) from exc
        return web.read_report(response, self.rm_url, app_id)

    def final_cost(self, app_id: str, within: float = FINAL_COST_WAIT_S) -> Cost | None:
        """The ended application's resource-seconds once YARN's count is final (its last container gone).

        YARN reports FINISHED when the AM unregisters, before its container
        exits, so the first ended report undercounts; this asks again for up to
        ``within`` seconds and then returns the last count (``final`` False).
        None when YARN cannot be asked (an RM that forgot the application).
        """
        deadline = time.monotonic() + within
        cost: Cost | None = None
        while True:
            try:
                cost = self.report(app_id).cost
            except TonyError as exc:
                log.warning("no cost for %s: %s", app_id, exc)
                return cost
            if cost is None or cost.final or time.monotonic() >= deadline:
                return cost
            time.sleep(0.5)

    def tracking_url(self, app_id: str) -> str:
        return web.tracking_url(self.rm_url, app_id)

    def job_page_url(self, app_id: str) -> str:
        """The job's own page (served by its AM through the RM's proxy while it runs)."""
        return web.job_page_url(self.rm_url, app_id)

    @property
    def history_dir(self) -> str:
        """Where AMs write each job's final ``JobHistory`` (``<base_path>/history/<app_id>.json``)."""
        return f"{self.base_path.rstrip('/')}/history"

    @property
    def events_dir(self) -> str:
        """Where jobs without ``checkpoint.dir`` keep their TensorBoard events: ``<base_path>/tensorboard/<app_id>``."""
        return f"{self.base_path.rstrip('/')}/tensorboard"

    def job_history(self, app_id: str) -> JobHistory | None:
        """The job's state and metric history: from its AM while it runs, else from HDFS."""
        try:
            live = web.parse_history(self.http.get(web.state_url(self.rm_url, app_id, "history")))
        except Exception:  # noqa: BLE001 - not served (any more): look on HDFS
            live = None
        if live is not None and live.state is not None:
            return live
        return self.stored_history(app_id)

    def stored_history(self, app_id: str) -> JobHistory | None:
        """The final ``JobHistory`` the AM wrote to HDFS, or None when there is none."""
        if not self.webhdfs_url:
            return None
        path = f"{self.history_dir}/{app_id}.json"
        client = self.webhdfs
        with cluster_errors(f"could not read {path} on HDFS"):
            if client.status(path, strict=False) is None:
                return None
            with client.read(path) as reader:
                raw = reader.read(MAX_HISTORY_BYTES + 1)
        try:
            return JobHistory.from_json(raw, max_bytes=MAX_HISTORY_BYTES)
        except SpecError as exc:  # written by the job's AM: a malformed or oversized one counts as none
            log.warning("ignoring %s: %s", path, exc)
            return None

    def tensorboard_url(self, app_id: str, am_state: StateDocument | None) -> str:
        """The job's TensorBoard through the ResourceManager's web proxy, or "" while it does not serve.

        The AM registers the ``tensorboard`` role's port as a page of skein's
        web UI before its state shows the port; the RM proxies the AM's UI, so
        a browser that reaches the RM reaches TensorBoard, where a container's
        host and port usually are not reachable. The link is built from
        ``app_id``, the application this client follows, never from the
        document's own ``application_id`` (the AM's container writes that).
        """
        task = am_state.task(f"{C.TENSORBOARD_ROLE}:0") if am_state is not None else None
        if am_state is None or task is None or not (task.host and task.port and task.state == "RUNNING"):
            return ""
        return self.tensorboard_page_url(app_id)

    def tensorboard_page_url(self, app_id: str) -> str:
        """Where the application's TensorBoard page is (or will be) served through the RM's proxy."""
        return f"{self.rm_url}/proxy/{urllib.parse.quote(app_id, safe='')}/{C.SKEIN_PAGES_PREFIX}/{C.TENSORBOARD_PAGE}/"

    def am_state(self, app_id: str) -> StateDocument | None:
        """The AM's state document over HTTP, or None while it is not (or no longer) served."""
        try:
            return self.am_fetch(app_id)
        except AmUnreachable:
            return None

    def am_fetch(self, app_id: str) -> StateDocument | None:
        """``am_state``, but raising ``AmUnreachable`` when the proxy cannot reach the AM (the follower's)."""
        try:
            response = self.http.get(web.state_url(self.rm_url, app_id))
        except httpx.HTTPError:  # the RM itself did not answer: its report will say so
            return None
        return web.fetch_state(response)

    def am_node(self, app_id: str) -> AmNode:
        """Where the AM runs and whether its node is gone (``yarn/am_node.py``)."""
        return read_am_node(self.http, self.rm_url, app_id)

    def ack_final(self, app_id: str) -> None:
        try:
            self.http.get(web.state_url(self.rm_url, app_id, "ack"))  # GET: the RM's proxy refuses POST
        except httpx.HTTPError:  # the AM stops on its own after a linger
            pass

    def kill(self, app_id: str) -> None:
        """Kill through the RM's REST API (``PUT .../state``); YARN finishes it in the background.

        The application's staging folder goes too: a killed AM never removes
        it, and it may hold the keytab's copy (``kerberos.refresh_tokens``).
        """
        with cluster_errors(f"could not kill {app_id}"):
            kill_application(self.cluster, self.urls, app_id)
        self.remove_staging(app_id)

    def remove_staging(self, app_id: str) -> bool:
        """Delete ``~/.skein/<app_id>`` on HDFS (nothing needs it once the application is ended or killed).

        False when there is no WebHDFS or the delete failed (logged: ``tony gc`` removes what is left).
        """
        try:
            folder = staging.staging_folder(app_id)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        if not self.webhdfs_url:
            return False
        try:
            self.webhdfs.delete(folder, recursive=True)
        except Exception as exc:  # noqa: BLE001 - the kill itself succeeded
            log.warning("could not remove the staging folder ~/%s: %s", folder, exc)
            return False
        return True

    def ended_staging(self, *, max_age_s: float | None) -> list[tuple[str, str]]:
        """Which folders of ``~/.skein`` belong to ended applications (``yarn/staging.py``), each with why."""
        try:
            listing = self.webhdfs.list(staging.STAGING_ROOT, status=True)
        except NotFound:
            return []
        folders = staging.folders_of(listing)
        if not any(f.is_dir and staging.APP_ID.fullmatch(f.name) for f in folders):
            return []
        query = f"apps?user={urllib.parse.quote(self.yarn_user)}"
        apps = (self._rm_get(query).get("apps") or {}).get("app") or []
        states = {str(a.get("id")): str(a.get("state") or "") for a in apps if isinstance(a, dict)}
        return staging.select(folders, states, now=time.time(), max_age_s=max_age_s)

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

    def find_by_tags(self, tags: Iterable[str], *, active_only: bool = True) -> list[AppReport]:
        """This client's user's TonY applications carrying every tag, newest first.

        Tags are chosen by the submitter and readable by every cluster user, so
        another user can submit an application with our tags (a SUCCEEDED one
        would make a task succeed without training). Only applications of
        :attr:`yarn_user` and of this provider's application type count: on a
        Kerberized cluster YARN authenticates that user, so nobody else can
        forge it. (On a cluster without authentication anyone may claim any
        user for every YARN and HDFS call: nothing can be proven there.)
        """
        wanted = {t.lower() for t in tags}  # YARN lower-cases tags
        user = self.yarn_user
        query = "&".join(
            [
                f"applicationTags={urllib.parse.quote(','.join(sorted(wanted)))}",
                f"user={urllib.parse.quote(user)}",
                f"applicationTypes={C.YARN_APPLICATION_TYPE}",
            ]
            + ([f"states={','.join(ACTIVE_YARN_STATES)}"] if active_only else [])
        )
        apps = (self._rm_get(f"apps?{query}").get("apps") or {}).get("app") or []
        found = []
        for a in apps:
            if not wanted <= set((a.get("applicationTags") or "").split(",")):
                continue
            if a.get("user") != user or str(a.get("applicationType") or "").lower() != C.YARN_APPLICATION_TYPE:
                log.warning(
                    "ignoring %s: it carries this task's tags but was submitted by %r as type %r, not by %r as %r",
                    shown(a.get("id"), 60),
                    shown(a.get("user"), 60),
                    shown(a.get("applicationType"), 60),
                    user,
                    C.YARN_APPLICATION_TYPE,
                )
                continue
            found.append(a)
        # The same parsing as ``report``'s: one AppReport for one RM answer (progress 0..1).
        return [
            web.parse_app_report({"app": a}, a["id"], self.tracking_url(a["id"]))
            for a in sorted(found, key=lambda a: a.get("startedTime", 0), reverse=True)
        ]

    def application_containers(self, app_id: str) -> list[tuple[str, str]]:
        """``(container_id, host)`` of every container of ``app_id`` whose logs a NodeManager keeps."""
        return self.logs.containers(app_id)

    def container_logs(self, container_id: str, host: str) -> dict[str, str]:
        """A container's log files as its NodeManager serves them, by file name (empty once it no longer does)."""
        return self.logs.read(container_id, host)

    # ------------------------------------------------------------ follow

    def poll(
        self,
        follower: Follower,
        *,
        emit: Callable[[str], None],
        on_state: Callable[[StateDocument], None] | None = None,
    ) -> JobResult | None:
        """One look at the application through ``follower``; a JobResult once it has ended.

        This client is the look's blocking transport (``report``, ``am_state``,
        ``ack_final``, ``kill``); the rules and the order of the requests are
        ``Follower.look``'s, the same the trigger's asyncio transport answers.
        """
        step = follow_step(follower, time.monotonic(), self)
        for line in step.lines:
            emit(line)
        if step.new_document is not None and on_state is not None:
            on_state(step.new_document)
        return step.result

    def wait(
        self,
        app_id: str,
        *,
        poll_interval: float = 2.0,
        startup_timeout: float = 600.0,
        am_stale_timeout: float = 60.0,
        am_unreachable_timeout: float = AM_UNREACHABLE_TIMEOUT_S,
        emit: Callable[[str], None] = print,
        on_state: Callable[[StateDocument], None] | None = None,
    ) -> JobResult:
        """Follow until the end, printing state changes and progress."""
        follower = Follower(
            app_id,
            startup_timeout=startup_timeout,
            am_stale_timeout=am_stale_timeout,
            am_unreachable_timeout=am_unreachable_timeout,
        )
        while True:
            result = self.poll(follower, emit=emit, on_state=on_state)
            if result is not None:
                return result
            time.sleep(poll_interval)


__all__ = ["ACTIVE_YARN_STATES", "AppReport", "Follower", "JobResult", "StagedSource", "TonyClient", "rm_url_from_conf"]
