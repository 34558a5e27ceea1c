"""``TonyClient``: every YARN/skein/WebHDFS call of the submitting side.

The Airflow hook and the command line both go through this class, so a job
behaves the same from a DAG and from a terminal. It is also the one place
where skein and HTTP errors become this provider's own exceptions.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.hdfs_io import publish
from airflow_provider_tony.runtime.spec import ClusterInfo, JobSpec, validate_against_cluster, validate_local_files
from airflow_provider_tony.yarn import source as src
from airflow_provider_tony.yarn.jvm import JVM_OPTIONS

log = logging.getLogger(__name__)

ACTIVE_YARN_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")


@dataclass
class JobResult:
    """How an application ended, as the operator and the CLI report it."""

    app_id: str
    yarn_state: str
    final_status: str
    diagnostics: str
    tracking_url: str | None
    am_state: dict[str, Any] | None = None

    @classmethod
    def from_report(cls, rep: dict[str, Any], am_state: dict[str, Any] | None = None) -> JobResult:
        """From ``TonyClient.report()`` of an application that has ended."""
        return cls(rep["app_id"], rep["state"], rep["final_status"], rep["diagnostics"], rep["tracking_url"], am_state)

    @property
    def succeeded(self) -> bool:
        return self.final_status == "SUCCEEDED"

    @property
    def retryable(self) -> bool:
        return C.RETRYABLE_MARK in (self.diagnostics or "") or bool(self.am_state and self.am_state.get("retryable"))


@dataclass
class StagedSource:
    """Where a job's source tree went on HDFS, and what that cost (for the log and the bench)."""

    url: str
    digest: str
    size: int
    uploaded: bool
    scan_s: float
    pack_s: float
    upload_s: float


@dataclass
class Watch:
    """Client-side memory of one application while we follow it."""

    last_state: str | None = None
    last_seq: Any = None
    seq_changed_at: float = field(default_factory=time.monotonic)
    accepted_since: float | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    events_seen: set[str] = field(default_factory=set)
    am_state: dict[str, Any] | None = None


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


class TonyClient:
    """Submit, follow, inspect and kill TonY jobs on one YARN cluster."""

    def __init__(self, *, rm_url: str, webhdfs_url: str | None = None, webhdfs_user: str | None = None,
                 base_path: str | None = None, skein_config: str | None = None,
                 principal: str | None = None, keytab: str | None = None) -> None:
        self.rm_url = rm_url.rstrip("/")
        self.webhdfs_url = webhdfs_url
        self.webhdfs_user = webhdfs_user or os.environ.get("HADOOP_USER_NAME") or os.environ.get("USER") or "root"
        self.base_path = base_path or f"/user/{self.webhdfs_user}/tony"
        if skein_config:
            os.environ.setdefault("SKEIN_CONFIG", skein_config)
        self._principal = principal
        self._keytab = keytab  # a path; never logged
        self._skein: Any = None
        self._skein_lock = threading.Lock()  # triggers share a client across threads: one driver only
        self._apps: dict[str, Any] = {}

    @classmethod
    def from_env(cls) -> TonyClient:
        """The cluster that ``make -s cluster-env`` (or a Hadoop conf dir) describes."""
        rm_url = os.environ.get("TONY_RM_URL")
        if not rm_url:
            addr = _read_site(os.environ.get("HADOOP_CONF_DIR"), "yarn-site.xml",
                              "yarn.resourcemanager.webapp.address")
            if not addr:
                raise ClusterError("no cluster configured: set TONY_RM_URL or HADOOP_CONF_DIR "
                                   "(for the local cluster: eval \"$(make -s cluster-env)\")")
            rm_url = f"http://{addr}"
        return cls(rm_url=rm_url, webhdfs_url=os.environ.get("TONY_WEBHDFS_URL"),
                   webhdfs_user=os.environ.get("TONY_WEBHDFS_USER"))

    # ------------------------------------------------------------ plumbing

    @property
    def skein(self) -> Any:
        """One skein driver per client, started on first use (a JVM: ~2 s)."""
        with self._skein_lock:
            return self._skein or self._start_driver()

    def _start_driver(self) -> Any:
        """Called under ``_skein_lock`` when no driver runs yet."""
        import skein  # noqa: PLC0415 - keeps `import airflow_provider_tony` light

        try:
            kwargs = {"principal": self._principal, "keytab": self._keytab} if self._keytab else {}
            # The Java driver logs to stderr, which Airflow shows as ERROR lines: keep it to real errors.
            self._skein = skein.Client(log_level="error", java_options=list(JVM_OPTIONS), **kwargs)
        except Exception as exc:  # noqa: BLE001 - skein raises several kinds
            raise ClusterError(f"could not start the skein driver (is HADOOP_CONF_DIR/JAVA_HOME set "
                               f"and the ResourceManager up?): {exc}") from exc
        return self._skein

    def close(self) -> None:
        with self._skein_lock:
            if self._skein is not None:
                self._skein.close()
                self._skein = None
        self._apps.clear()

    def __enter__(self) -> TonyClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _rm_get(self, path: str) -> Any:
        url = f"{self.rm_url}/ws/v1/cluster/{path}"
        try:
            with urllib.request.urlopen(url, timeout=15) as resp:  # noqa: S310 - configured RM
                return json.load(resp)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ClusterError(f"ResourceManager at {self.rm_url} unreachable ({url}): {exc}") from exc

    def hdfs(self) -> Any:
        if not self.webhdfs_url:
            raise ClusterError("no WebHDFS URL configured (TONY_WEBHDFS_URL or the connection's webhdfs_url)")
        from hdfs import InsecureClient  # noqa: PLC0415

        return InsecureClient(self.webhdfs_url, user=self.webhdfs_user)

    # ------------------------------------------------------------ cluster

    def cluster_info(self) -> ClusterInfo:
        sched = self._rm_get("scheduler")["scheduler"]["schedulerInfo"]
        metrics = self._rm_get("metrics")["clusterMetrics"]
        leaves: list[str] = []

        def walk(queue: dict[str, Any]) -> None:
            children = (queue.get("queues") or {}).get("queue") or []
            if not children and queue.get("queueName"):
                leaves.append(queue["queueName"])
            for child in children:
                walk(child)

        walk(sched)
        max_alloc = sched.get("maximumAllocation") or {}
        resources = [r["name"] for r in (max_alloc.get("resourceInformations") or {}).get("resourceInformation", [])]
        nodes = (self._rm_get("nodes?states=RUNNING").get("nodes") or {}).get("node") or []
        hosts = {str(n["nodeHostName"]): list(n.get("nodeLabels") or []) for n in nodes if n.get("nodeHostName")}
        labels_doc = self._rm_get("get-node-labels") or {}
        labels = labels_doc.get("nodeLabelInfo") or labels_doc.get("nodeLabel") or []
        if isinstance(labels, dict):
            labels = [labels]
        return ClusterInfo(
            max_memory_mb=int(max_alloc.get("memory", 0)), max_vcores=int(max_alloc.get("vCores", 0)),
            resource_types=resources or ["memory-mb", "vcores"], queues=leaves,
            total_memory_mb=int(metrics.get("totalMB", 0)), total_vcores=int(metrics.get("totalVirtualCores", 0)),
            node_labels=[lbl["name"] if isinstance(lbl, dict) else str(lbl) for lbl in labels],
            hosts=hosts,
        )

    def describe(self) -> str:
        """What test_connection() shows: the cluster as the RM sees it."""
        metrics = self._rm_get("metrics")["clusterMetrics"]
        return (f"ResourceManager {self.rm_url}: {metrics['activeNodes']} active node(s), "
                f"{metrics['totalMB']} MiB and {metrics['totalVirtualCores']} vcores in total, "
                f"{metrics['availableMB']} MiB available")

    # ------------------------------------------------------------ submit

    def validate(self, spec: JobSpec) -> ClusterInfo:
        """Everything we can check before a single container is requested; returns the cluster's view."""
        validate_local_files(spec)
        src.validate_source(spec)
        info = self.cluster_info()
        validate_against_cluster(spec, info)
        return info

    def stage_archive(self, archive: str) -> str:
        """Upload a local environment archive to HDFS once per content hash."""
        if archive.startswith("hdfs://"):
            return archive
        digest = hashlib.sha256()
        with open(archive, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        suffix = "".join(Path(archive).suffixes[-2:]) or ".tar.gz"
        remote = f"{self.base_path}/envs/{digest.hexdigest()[:24]}{suffix}"
        client = self.hdfs()
        if client.status(remote, strict=False) is None:
            publish(client, archive, remote, f"submit-{os.getpid()}")
            log.info("uploaded python environment %s to %s", archive, remote)
        fs = self._default_fs()
        return f"{fs}{remote}"

    def stage_source(self, src_dir: str) -> StagedSource:
        """Pack a local source directory and upload it once per content hash.

        The hash comes from the files themselves, so an unchanged tree is
        neither packed nor uploaded again. An ``hdfs://`` archive is used as is.
        """
        if src_dir.startswith("hdfs://"):
            return StagedSource(src_dir, "", 0, False, 0.0, 0.0, 0.0)
        started = time.monotonic()
        tree = src.scan(src_dir)
        src.check_size(tree)
        digest = tree.digest()
        scanned = time.monotonic()
        remote = f"{self.base_path}/src/{digest[:24]}.tar.gz"
        client = self.hdfs()
        pack_s = upload_s = 0.0
        uploaded = client.status(remote, strict=False) is None
        if uploaded:  # HDFS is the cache: the local archive lives only as long as the upload
            with tempfile.TemporaryDirectory(prefix="tony-src-") as tmp:
                local = src.pack(tree, Path(tmp) / "src.tar.gz")
                packed = time.monotonic()
                publish(client, str(local), remote, f"submit-{os.getpid()}")
            pack_s, upload_s = packed - scanned, time.monotonic() - packed
            log.info("uploaded source tree %s (%d entries) to %s", src_dir, len(tree.entries), remote)
        return StagedSource(f"{self._default_fs()}{remote}", digest, tree.size, uploaded,
                            scanned - started, pack_s, upload_s)

    def _default_fs(self) -> str:
        fs = _read_site(os.environ.get("HADOOP_CONF_DIR"), "core-site.xml", "fs.defaultFS")
        if not fs:
            raise ClusterError("fs.defaultFS not found in $HADOOP_CONF_DIR/core-site.xml: "
                               "needed to reference the python archive on HDFS")
        return fs.rstrip("/")

    def submit(self, spec: JobSpec, *, attempt: int = 1, extra_tags: Iterable[str] = ()) -> str:
        """Validate, stage and submit; returns the YARN application id."""
        from airflow_provider_tony.yarn.appspec import build_application_spec, plan_placement  # noqa: PLC0415

        info = self.validate(spec)
        plan = plan_placement(spec, info.hosts)
        spec = src.relative_scripts(spec)
        source = self.stage_source(spec.src_dir).url if spec.src_dir else None
        archive = spec.python.archive
        if archive:
            python, archive_source = spec.python.python_command(), self.stage_archive(archive)
        else:
            python, archive_source = spec.python.interpreter or sys.executable, None
        if extra_tags:
            data = spec.to_dict()
            data["tags"] = list(dict.fromkeys([*data["tags"], *extra_tags]))
            spec = JobSpec.from_dict(data)
        app_spec = build_application_spec(spec, python=python, python_archive_source=archive_source,
                                          source_archive=source, extra_env=self._container_env(attempt),
                                          placement_plan=plan)
        try:
            app_id: str = self.skein.submit(app_spec)
            return app_id
        except Exception as exc:  # noqa: BLE001
            raise ClusterError(f"YARN refused the application {spec.name!r}: {exc}") from exc

    def _container_env(self, attempt: int) -> dict[str, str]:
        env = {C.ENV_ATTEMPT: str(attempt)}
        if self.webhdfs_url:
            env[C.ENV_WEBHDFS_URL] = self.webhdfs_url
            env[C.ENV_WEBHDFS_USER] = self.webhdfs_user
        return env

    # ------------------------------------------------------------ inspect

    def report(self, app_id: str) -> dict[str, Any]:
        try:
            r = self.skein.application_report(app_id)
        except Exception as exc:  # noqa: BLE001
            raise ClusterError(f"no report for {app_id}: {exc}") from exc
        return {"app_id": app_id, "state": str(r.state), "final_status": str(r.final_status),
                "diagnostics": r.diagnostics or "", "tracking_url": self.tracking_url(app_id),
                "progress": r.progress, "tags": sorted(r.tags), "name": r.name}

    def tracking_url(self, app_id: str) -> str:
        return f"{self.rm_url}/cluster/app/{app_id}"

    @staticmethod
    def tensorboard_url(am_state: dict[str, Any] | None) -> str:
        """Where the job's ``tensorboard`` role serves (its registered port), or ""."""
        task = ((am_state or {}).get("tasks") or {}).get("tensorboard:0") or {}
        if task.get("host") and task.get("port") and task.get("state") == "RUNNING":
            return f"http://{task['host']}:{task['port']}/"
        return ""

    def am_state(self, app_id: str) -> dict[str, Any] | None:
        """The AM's state document, or None while it is not (or no longer) published."""
        try:
            app = self._apps.get(app_id)
            if app is None:
                app = self._apps[app_id] = self.skein.connect(app_id, wait=False)
            raw = app.kv.get(C.KV_STATE)
        except Exception:  # noqa: BLE001 - not running yet / already gone
            self._apps.pop(app_id, None)
            return None
        return json.loads(raw.decode()) if raw else None

    def ack_final(self, app_id: str) -> None:
        app = self._apps.get(app_id)
        if app is not None:
            try:
                app.kv[C.KV_FINAL_ACK] = b"1"
            except Exception:  # noqa: BLE001, S110 - the AM stops on its own after a linger
                pass

    def kill(self, app_id: str) -> None:
        try:
            self.skein.kill_application(app_id)
        except Exception as exc:  # noqa: BLE001
            raise ClusterError(f"could not kill {app_id}: {exc}") from exc

    def find_by_tags(self, tags: Iterable[str], *, active_only: bool = True) -> list[dict[str, Any]]:
        """Applications carrying every tag, newest first (RM REST: tags filter any-of)."""
        wanted = {t.lower() for t in tags}  # YARN lower-cases tags
        query = "&".join([f"applicationTags={urllib.parse.quote(','.join(sorted(wanted)))}"]
                         + ([f"states={','.join(ACTIVE_YARN_STATES)}"] if active_only else []))
        apps = (self._rm_get(f"apps?{query}").get("apps") or {}).get("app") or []
        found = [a for a in apps if wanted <= set((a.get("applicationTags") or "").split(","))]
        return sorted(found, key=lambda a: a.get("startedTime", 0), reverse=True)

    def application_containers(self, app_id: str) -> list[tuple[str, str]]:
        """``(container_id, host)`` of every container of ``app_id`` whose logs a NodeManager keeps.

        While the application runs, each NodeManager lists its containers
        (REST ``/ws/v1/node/apps/<app>``). Once it ended, neither the
        ResourceManager nor the NodeManagers list them (that needs the timeline
        server), but the RM still names each attempt's AM container, and YARN
        numbers an attempt's containers in sequence after it: ids are tried in
        order on every node until three in a row are found on none.
        """
        nodes = {n["nodeHTTPAddress"]: n["nodeHostName"]
                 for n in (self._rm_get("nodes").get("nodes") or {}).get("node") or []}
        found: set[tuple[str, str]] = set()
        for address, host in nodes.items():
            app = self._nm_get(address, f"apps/{urllib.parse.quote(app_id)}") or {}
            found.update((cid, host) for cid in (app.get("app") or {}).get("containerids") or [])
        if found:
            return sorted(found)
        attempts = (self._rm_get(f"apps/{urllib.parse.quote(app_id)}/appattempts").get("appAttempts") or {})
        for attempt in attempts.get("appAttempt") or []:
            prefix, _, first = str(attempt.get("containerId") or "").rpartition("_")
            if not prefix or not first.isdigit():
                continue
            misses, number = 0, int(first)
            while misses < 3:
                cid = f"{prefix}_{number:0{len(first)}d}"
                # A NodeManager answers for any id; one that ran the container lists its log files.
                hosts = [host for address, host in nodes.items()
                         if ((self._nm_get(address, f"containers/{cid}/logs") or {}).get("containerLogsInfo")
                             or {}).get("containerLogInfo")]
                found.update((cid, host) for host in hosts)
                misses = 0 if hosts else misses + 1
                number += 1
        return sorted(found)

    @staticmethod
    def _nm_get(address: str, path: str) -> Any:
        """A NodeManager REST document, or None when it has nothing there (or is unreachable)."""
        try:
            with urllib.request.urlopen(f"http://{address}/ws/v1/node/{path}", timeout=15) as resp:  # noqa: S310
                return json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def container_logs(self, container_id: str, host: str) -> dict[str, str]:
        """A container's log files as its NodeManager serves them (REST), by file name.

        Works while the NodeManager keeps them (``yarn.nodemanager.log.retain-seconds``
        when log aggregation is off); an empty dict when it no longer does.
        """
        nodes = (self._rm_get("nodes").get("nodes") or {}).get("node") or []
        address = next((n["nodeHTTPAddress"] for n in nodes if n.get("nodeHostName") == host), None)
        if address is None:
            return {}
        base = f"http://{address}/ws/v1/node"
        try:
            with urllib.request.urlopen(f"{base}/containers/{container_id}/logs", timeout=15) as resp:  # noqa: S310
                listing = json.load(resp)
        except (urllib.error.URLError, OSError, ValueError):
            return {}
        infos = (listing.get("containerLogsInfo") or {}).get("containerLogInfo") or []
        if isinstance(infos, dict):
            infos = [infos]
        out = {}
        # skein writes each service's stdout+stderr to <service>.log.
        for name in [i["fileName"] for i in infos if i["fileName"].endswith((".log", ".err", ".out"))]:
            url = f"{base}/containerlogs/{container_id}/{name}"
            try:
                with urllib.request.urlopen(url, timeout=15) as resp:  # noqa: S310 - the cluster's NM
                    out[name] = resp.read().decode(errors="replace")
            except (urllib.error.URLError, OSError):
                continue
        return out

    # ------------------------------------------------------------ follow

    def poll(self, app_id: str, watch: Watch, *, startup_timeout: float, am_stale_timeout: float,
             emit: Callable[[str], None],
             on_state: Callable[[dict[str, Any]], None] | None = None) -> JobResult | None:
        """One look at the application; a JobResult once it has ended."""
        rep = self.report(app_id)
        state = rep["state"]
        now = time.monotonic()
        if state != watch.last_state:
            emit(f"{app_id} is {state} ({rep['tracking_url']})")
            watch.last_state = state
        if state in ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED"):
            watch.accepted_since = watch.accepted_since or now
            if now - watch.accepted_since > startup_timeout:
                self.kill(app_id)
                return JobResult(app_id, "KILLED", "FAILED",
                                 f"{C.RETRYABLE_MARK} still {state} after {startup_timeout:g}s (startup_timeout): "
                                 "the queue has no room for the application master; killed", rep["tracking_url"])
            return None
        if state == "RUNNING":
            doc = self.am_state(app_id)
            if doc is not None:
                watch.am_state = doc
                if doc.get("seq") != watch.last_seq:
                    watch.last_seq, watch.seq_changed_at = doc.get("seq"), now
                    if on_state is not None:
                        on_state(doc)
                self._emit_progress(doc, watch, emit)
                if doc.get("final"):
                    self.ack_final(app_id)
            if now - watch.seq_changed_at > am_stale_timeout:
                self.kill(app_id)
                return JobResult(app_id, "KILLED", "FAILED",
                                 f"{C.RETRYABLE_MARK} the application master stopped publishing its state for "
                                 f"{now - watch.seq_changed_at:.0f}s while YARN reports RUNNING (hung AM); killed",
                                 rep["tracking_url"], watch.am_state)
            return None
        # Ended. The final state document is the richest account; YARN's
        # diagnostics are the durable one.
        return JobResult.from_report(rep, watch.am_state)

    @staticmethod
    def _emit_progress(doc: dict[str, Any], watch: Watch, emit: Callable[[str], None]) -> None:
        for event in doc.get("events", []):  # restores, checkpoint uploads, model export
            if event not in watch.events_seen and ("checkpoint" in event or "model" in event):
                watch.events_seen.add(event)
                emit(event)
        for task_id, task in sorted(doc.get("tasks", {}).items()):
            prog = task.get("progress") or {}
            line = f"{task_id} {task.get('state')}"
            if prog.get("step") is not None:
                metrics = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                                    for k, v in sorted((prog.get("metrics") or {}).items()))
                line += f" step {prog.get('step')} epoch {prog.get('epoch')}" + (f" ({metrics})" if metrics else "")
            if watch.progress.get(task_id) != line:
                watch.progress[task_id] = line
                emit(line)

    def wait(self, app_id: str, *, poll_interval: float = 2.0, startup_timeout: float = 600.0,
             am_stale_timeout: float = 60.0, emit: Callable[[str], None] = print,
             on_state: Callable[[dict[str, Any]], None] | None = None) -> JobResult:
        """Follow until the end, printing state changes and progress."""
        watch = Watch()
        while True:
            result = self.poll(app_id, watch, startup_timeout=startup_timeout,
                               am_stale_timeout=am_stale_timeout, emit=emit, on_state=on_state)
            if result is not None:
                return result
            time.sleep(poll_interval)


__all__ = ["JobResult", "StagedSource", "TonyClient", "Watch"]
