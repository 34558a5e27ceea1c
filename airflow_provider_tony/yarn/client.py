"""``TonyClient``: the cluster-wide client of the submitting side (HTTP only: yarn/rest.py).

skein's line: this client submits (check -> stage -> build -> submit), finds this
provider's applications and collects what ended ones left (``tony gc``); everything
about one application (report, state, history, pages, logs, kill, wait) is its handle's,
``client.application(app_id)`` (yarn/application.py), and the addresses, Kerberos and
connections are ``ClusterAccess``'s (yarn/cluster_access.py), which this class extends.
The Airflow hook and the command line both go through it, so a job behaves the same
from a DAG and from a terminal; it is also where HTTP errors become this provider's own.
"""

from __future__ import annotations

import logging
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import inputs
from airflow_provider_tony.runtime.errors import NotFound, cluster_errors
from airflow_provider_tony.runtime.hdfs_io import hdfs_path
from airflow_provider_tony.runtime.messages import StateDocument
from airflow_provider_tony.runtime.namenodes import NameNode, authority_of, pick
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn import source as src
from airflow_provider_tony.yarn import staging
from airflow_provider_tony.yarn.am_keytab import ship_keytab_to_am
from airflow_provider_tony.yarn.application import TonyApplication, by_id
from airflow_provider_tony.yarn.appspec import build_application_spec, plan_placement, runtime_zip_path
from airflow_provider_tony.yarn.checks import ClusterInfo, check_inputs, validate_against_cluster, validate_local_files
from airflow_provider_tony.yarn.cluster_access import ClusterAccess, read_site, rm_url_from_conf
from airflow_provider_tony.yarn.follower import ACTIVE_YARN_STATES, AppReport, Follower, JobResult, follow_step
from airflow_provider_tony.yarn.hdfs_room import Folder, check_room
from airflow_provider_tony.yarn.logformat import shown
from airflow_provider_tony.yarn.namenodes import NameNodeClients
from airflow_provider_tony.yarn.submit import RestSubmitter
from airflow_provider_tony.yarn.upload_cache import StagedSource

log = logging.getLogger(__name__)


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


class TonyClient(ClusterAccess):
    """Submit TonY jobs to one YARN cluster, find them, and hand out a handle per application."""

    def application(self, app_id: str) -> TonyApplication:
        """The handle of ``app_id``: its report, state, history, pages, containers, kill, wait."""
        return TonyApplication(self, app_id)

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
            return inputs.seen_env(check_inputs(spec, self.webhdfs_for(spec, namenodes)))

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
        hdfs = self.webhdfs_for(spec, namenodes)
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
        rm_principal, rm_address = self.rm_token_renewer()
        return RestSubmitter(
            http=self.cluster,
            urls=self.urls,
            hdfs=self.webhdfs,
            default_fs=self.default_fs(),
            user=self.yarn_user,
            application_classpath=read_site(self.cluster_env.conf_dir(), "yarn-site.xml", "yarn.application.classpath"),
            rm_principal=rm_principal,
            rm_address=rm_address,
            security=self._security(),
            cache=self.cache.file,
            cache_data=self.cache.data,
            namenodes=NameNodeClients(self.webhdfs, self.cluster, self.default_fs(), namenodes) if namenodes else None,
        )

    # ------------------------------------------------------------ find, gc

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

        This client is the look's blocking transport (``report``, ``am_fetch``,
        ``am_node``, ``ack_final``, ``kill`` below); the rules and the order of the requests
        are ``Follower.look``'s, the same the trigger's asyncio transport answers.
        """
        step = follow_step(follower, time.monotonic(), self)
        for line in step.lines:
            emit(line)
        if step.new_document is not None and on_state is not None:
            on_state(step.new_document)
        return step.result

    # ------------------------------------------------------------ one application's, by its id
    # Each is its handle's (``application(app_id)``), kept by id for the follower's transport
    # (``poll``), the command line, bench/ and the tests.

    report = by_id(TonyApplication.report)
    am_fetch = by_id(TonyApplication.am_fetch)
    am_node = by_id(TonyApplication.am_node)
    ack_final = by_id(TonyApplication.ack_final)
    kill = by_id(TonyApplication.kill)
    remove_staging = by_id(TonyApplication.remove_staging)
    am_state = by_id(TonyApplication.am_state)
    final_cost = by_id(TonyApplication.final_cost)
    job_history = by_id(TonyApplication.job_history)
    stored_history = by_id(TonyApplication.stored_history)
    tracking_url = by_id(TonyApplication.tracking_url)
    job_page_url = by_id(TonyApplication.job_page_url)
    tensorboard_url = by_id(TonyApplication.tensorboard_url)
    tensorboard_page_url = by_id(TonyApplication.tensorboard_page_url)
    application_containers = by_id(TonyApplication.containers)
    wait = by_id(TonyApplication.wait)


__all__ = ["ACTIVE_YARN_STATES", "AppReport", "Follower", "JobResult", "StagedSource", "TonyClient", "rm_url_from_conf"]
