"""The TonY application master: the Python side of the AM container.

skein's Java AM allocates containers and serves the key-value store; this
process, started as skein's ``master.script``, is the brain: it reads
registrations, heartbeats and exit records from the store, feeds them to the
pure ``JobTracker``, publishes the cluster spec and the state document, stops
what must stop, replaces the gang when the tracker decides to restart it, and
shuts the application down with a final status and diagnostics. skein ends
the application when this process exits, so it always calls ``shutdown``
itself first.

    python -I -u -c <boot> tony_runtime.zip airflow_provider_tony.runtime.am   (yarn/appspec.py)
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from typing import Any, TypeVar

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import hdfs_io, nm_probe, priority, token_refresh
from airflow_provider_tony.runtime.errors import KeytabCopyLeft, SpecError
from airflow_provider_tony.runtime.failure import FailureKind
from airflow_provider_tony.runtime.history import (
    MetricHistory,
    bytes_per_task,
    history_paths,
    points_per_task,
    write_history,
)
from airflow_provider_tony.runtime.median_stop import curve_of
from airflow_provider_tony.runtime.messages import (
    Drain,
    Drained,
    EventRecord,
    ExitRecord,
    Heartbeat,
    JobHistory,
    Message,
    Progress,
    Registration,
    Slot,
    StateDocument,
    TaskState,
)
from airflow_provider_tony.runtime.page import render_page
from airflow_provider_tony.runtime.spec import PLACED_SERVICE_SEP, JobSpec, task_of_container
from airflow_provider_tony.runtime.state import JobTracker, Verdict, final_diagnostics, material
from airflow_provider_tony.runtime.sweep import SweepWatch
from airflow_provider_tony.runtime.transport import decode_spec
from airflow_provider_tony.runtime.web import LOOPBACK, PAGE_ROUTE, JobWebServer
from airflow_provider_tony.runtime.yarn_exit import is_preempted, memory_kill

log = logging.getLogger("tony.am")
_M = TypeVar("_M", bound=Message)
# How long the final state stays readable for a client that has not yet
# acknowledged it (the store disappears with the application).
FINAL_LINGER_S = 10.0
# Every tick reads the whole store from skein's AM (a JVM serving gRPC on the
# same nodes as training): 0.25 s while tasks register and start, so the
# rendezvous is quick; then one heartbeat interval (at most 1 s): each read
# then sees each task's newest beat once, an exit record is found within a
# second, and skein's AM serves a quarter of the reads it did at start-up.
#
# A skein watch (``kv.events``) would wake the AM on each write instead, but
# skein 0.8.2's AM sends watch events from the thread of the put that caused
# them, unsynchronised with other puts and with the watch's own replies: with
# 20 jobs starting at once, an executor's registration failed with an empty
# ApplicationError ("sendHeaders has already been called" in skein's AM log).
# So the store is read on a timer, where no put depends on a watch.
STARTUP_TICK_S = 0.25
RUNNING_TICK_S = 1.0
# Containers that ended without an exit record (killed, OOM, lost node) are
# looked for every heartbeat interval, between 1 s and 5 s: an exit of the
# user code is already reported by its executor, read within the next tick.
CONTAINER_CHECK_MIN_S = 1.0
CONTAINER_CHECK_MAX_S = 5.0
# An executor killed by a signal (143: the NodeManager's SIGTERM) may write
# its exit record before skein's AM hears from the ResourceManager why the
# container ended: when YARN preempted it, the record is a consequence, not the
# cause. Such a record waits for YARN's status before it is judged as an exit
# code. skein's AM asks the ResourceManager every min(5 s, AM expiry / 2) while
# it waits for no container (every second otherwise), and this AM looks every
# tick: 8 s covers one such interval and the ticks around it. A container that
# YARN reports ended sooner is judged at once.
SIGNAL_EXIT_HOLD_S = 8.0
# A call to skein's AM that fails (an empty ApplicationError from its gRPC server under load, a
# connection reset) fails the job only when the next ticks fail too: one such answer in a restart
# ended a CI job as "application master error: ApplicationError: ." with its gang half replaced.
SKEIN_ERROR_TICKS = 3
# skein container states of a container asked for and not yet allocated.
NOT_ALLOCATED = ("WAITING", "REQUESTED")
# A spread task that has no running container this long after its gang was
# asked for runs on any node the role may use (its fallback service). Its
# node may be gone while the ResourceManager still lists it (a machine lost
# just before an Airflow retry planned the placement: the RM notices only at
# the node's expiry, 10 minutes by default), or YARN may have lost the request.
PLACEMENT_WAIT_S = 60.0
#: A page registration that keeps failing is logged on its first failure and every this many after.
PAGE_RETRY_LOG_EVERY = 60


def _decode(raw: bytes, cls: type[_M], key: str) -> _M | None:
    """A message from the store; a corrupt one is logged and skipped, never fatal to the AM."""
    try:
        return cls.from_json(raw)
    except SpecError as exc:
        log.warning("ignoring %s: %s", key, exc)
        return None


class ApplicationMaster:
    def __init__(self, app: Any, spec: JobSpec, app_id: str) -> None:
        self.app = app
        self.spec = spec
        self.app_id = app_id
        self.tracker = JobTracker(spec, time.monotonic())
        self.tracker.ended_on_its_node = lambda task: nm_probe.container_ended(
            task.host, task.nm_http_port, task.container_id
        )
        self.seq = 0
        self.last_doc: str | None = None
        self.last_publish = 0.0
        self.last_progress: float | None = None
        self.last_container_check = 0.0
        self.published_addresses: set[str] = set()
        self.pages: set[str] = set()  # task ids whose web page is registered with skein's UI
        self.page_failures: dict[str, int] = {}  # task id -> failed tries to register its page
        self.history = MetricHistory(points_per_task(len(spec.task_ids())), bytes_per_task(len(spec.task_ids())))
        self.history_lock = threading.Lock()  # the loop appends, request threads read
        self.last_state_doc: StateDocument | None = None
        self.web: JobWebServer | None = None
        self.drain_started: float | None = None  # when the pending restart asked the uploader to finish
        self.service_nodes: dict[str, list[str]] | None = None  # skein service -> the nodes it may use
        # Tasks whose signal exit record waits for YARN's status (see SIGNAL_EXIT_HOLD_S) -> first seen.
        self.held_exits: dict[str, float] = {}
        # Pinned services of this gang given up for their fallback: their ended containers mean nothing.
        self.retired_services: set[str] = set()
        self.refresher: token_refresh.TokenRefresher | None = None  # kerberos.refresh_tokens
        # early_stopping: the sweep's finished trials, read through this AM's own (refreshed) client.
        self.sweep = (
            SweepWatch(spec.early_stopping, app_id, lambda: hdfs_io.Clients(default=self.hdfs))
            if spec.early_stopping.enabled
            else None
        )

    # ---------------------------------------------------------------- the job page

    def start_web(self) -> None:
        """Serve the state and the page, and register them with skein's web UI.

        A job runs without its page rather than not at all: a failure here is logged.
        """
        try:
            self.web = JobWebServer(self.render_page, self.history_json).start()
            # Loopback only: skein's UI, in this container, is the one client (see web.LOOPBACK).
            page = self.app.ui.add_page(PAGE_ROUTE, f"http://{LOOPBACK}:{self.web.port}/", link_name="TonY job")
            log.info("job page: %s", page.address)
        except Exception:
            log.exception("could not serve the job page")

    def job_history(self) -> JobHistory:
        with self.history_lock:
            return self.history.document(
                self.last_state_doc,
                name=self.spec.name,
                user=os.environ.get("USER", ""),
                nm_http_port=os.environ.get("NM_HTTP_PORT", ""),
                attempt=int(os.environ.get(C.ENV_ATTEMPT) or 1),
            )

    def history_json(self) -> bytes:
        return self.job_history().to_json()

    def render_page(self) -> str:
        return render_page(self.job_history(), now_wall=time.time())

    def hdfs(self) -> Any | None:
        """The AM's WebHDFS client: with the refresher's newest token when the job refreshes tokens."""
        url = os.environ.get(C.ENV_WEBHDFS_URL)
        fresh = self.refresher.client(url) if self.refresher is not None and url else None
        return fresh if fresh is not None else hdfs_io.client_from_env(kv=self.app.kv)

    def write_history(self) -> None:
        """The final history on HDFS, so the page and ``tony status`` outlive YARN's memory."""
        paths = history_paths(
            self.app_id,
            self.spec.checkpoint.dir,  # a URL stays one: write_history takes each path's own NameNode
            os.environ.get(C.ENV_HISTORY_DIR),
        )
        client = hdfs_io.Clients(default=self.hdfs) if paths else None
        if client is None or client.default() is None:
            return
        try:
            for path in write_history(client, paths, self.job_history()):
                log.info("history written to %s", path)
        except Exception as exc:  # noqa: BLE001 - the verdict matters more than its record
            log.warning("could not write the history to HDFS (%s): %s", ", ".join(paths), exc)

    def remove_staging(self) -> None:
        """Delete the job's staging folder ``~/.skein/<app>`` on HDFS: nothing needs it once the job is decided.

        It holds what YARN localised (skein's files, scripts, the job's local
        files) and, with ``kerberos.refresh_tokens``, the token files. skein's
        Java AM deletes it too, but only on an orderly shutdown; this does not
        wait for that. A failure is logged: ``tony gc`` removes what is left.
        """
        client = self.hdfs() if self.app_id else None
        if client is None:
            return
        try:
            if client.delete(f".skein/{self.app_id}", recursive=True):
                log.info("removed the staging folder ~/.skein/%s", self.app_id)
        except Exception as exc:  # noqa: BLE001 - the verdict matters more than the cleanup
            log.warning("could not remove the staging folder ~/.skein/%s: %s", self.app_id, type(exc).__name__)

    # ---------------------------------------------------------------- early stopping

    def stopping_points(self) -> list[Progress]:
        """The reports the median rule judges and records: the deciding task's, else task 0 of the first
        role that reports the metric (a job whose chief only coordinates)."""
        metric = self.spec.early_stopping.metric
        candidates = [self.spec.decider_task()] + [f"{role}:0" for role in self.spec.role_names()]
        with self.history_lock:
            for task_id in candidates:
                points = self.history.points.get(task_id, [])
                if any(metric in p.metrics for p in points):
                    return list(points)
        return []

    def check_early_stop(self, now: float) -> Verdict | None:
        """The median rule's stop, once the gang runs: the sweep folder read every
        ``sweep.READ_EVERY_S``, each new step judged."""
        watch = self.sweep
        if watch is None or self.tracker.cluster_published_at is None or self.tracker.restart_pending is not None:
            return None
        if watch.due(now):
            watch.look(now)
        stop = watch.judge(self.stopping_points())
        if stop is None:
            return None
        log.info("%s", stop.line())
        return self.tracker.stop_early(stop, now)

    def record_curve(self, verdict: Verdict) -> None:
        """A finished trial's curve into the sweep folder, before the final state is published (whoever sees
        the verdict finds the curve). A failed or stopped trial leaves none: only finished trials set the median."""
        watch = self.sweep
        if watch is None or not verdict.succeeded or verdict.early_stopped is not None:
            return
        metric = watch.rule.metric
        curve = curve_of(self.stopping_points(), metric)
        if not curve:
            self.tracker.events.append(f"early_stopping: no {metric} was reported; no curve for the sweep folder")
            return
        try:
            path = watch.record(curve)
        except Exception as exc:  # noqa: BLE001 - the verdict stands; the sweep misses one trial
            log.warning("could not write the curve to the sweep folder %s: %s", watch.folder, exc)
            self.tracker.events.append(f"early_stopping: could not write the curve to {watch.folder}: {exc}")
            return
        self.tracker.note_artefact(f"curve of {metric} ({len(curve)} steps) written to the sweep folder: {path}")

    # ---------------------------------------------------------------- input

    def read_store(self, now: float) -> None:
        """One read of the store, applied in causal order: a task's last
        heartbeat (with its progress) before its exit record."""
        store = self.app.kv.get_prefix(C.KV_PREFIX)

        def under(prefix: str, cls: type[_M]) -> list[tuple[str, _M]]:
            found = []
            for key, raw in sorted(store.items()):
                if key.startswith(prefix) and (msg := _decode(raw, cls, key)) is not None:
                    found.append((C.task_id_of(key, prefix), msg))
            return found

        for task_id, reg in under(C.KV_REGISTER_PREFIX, Registration):
            self.tracker.register(task_id, reg, now)
        for task_id, beat in under(C.KV_HEARTBEAT_PREFIX, Heartbeat):
            self.tracker.heartbeat(task_id, beat, now)
            self.keep_points(task_id, beat.points)
        for key, event in under(C.KV_EVENT_PREFIX, EventRecord):
            if event.artefact:
                self.tracker.note_artefact(event.message)
            else:
                self.tracker.events.append(event.message)
            del self.app.kv[C.KV_EVENT_PREFIX + key]
        for task_id, record in under(C.KV_EXIT_PREFIX, ExitRecord):
            self.apply_exit(task_id, record, now)

    def keep_points(self, task_id: str, points: list[Progress]) -> None:
        """Every report the script made, not only the one current at a beat: into the history."""
        if task_id in self.tracker.tasks and points:
            with self.history_lock:
                for point in points:
                    self.history.add(task_id, point)

    def apply_exit(self, task_id: str, record: ExitRecord, now: float, container_ended: bool = False) -> None:
        """An executor's exit record (code, stderr tail, last progress) into the tracker.

        A signal exit of the current gang is held until the container's YARN
        status is known (``check_containers``) or ``SIGNAL_EXIT_HOLD_S`` passed:
        a preempted container's executor reports 143 too.
        """
        task = self.tracker.tasks.get(task_id)
        live = task is not None and not task.state.finished and record.generation == self.tracker.generation
        if live and not container_ended and record.exit_code in C.SIGNAL_EXIT_CODES:
            first = self.held_exits.setdefault(task_id, now)
            if now - first < SIGNAL_EXIT_HOLD_S:
                return
        self.held_exits.pop(task_id, None)
        self.keep_points(task_id, record.points)
        self.tracker.exited(
            task_id,
            record.exit_code,
            record.stderr_tail,
            now,
            progress=record.progress,
            generation=record.generation,
            usage=record.usage,
        )

    def container_check_interval(self) -> float:
        return min(max(self.spec.heartbeat_interval, CONTAINER_CHECK_MIN_S), CONTAINER_CHECK_MAX_S)

    def check_containers(self, now: float) -> None:
        """Containers that ended without an exit record (killed, OOM, lost node) or preempted by YARN.

        Every tick while a signal exit waits for YARN's status or a failed task's peers may be
        silent for a reason YARN knows (killed for memory), else every ``container_check_interval``.
        """
        due = now - self.last_container_check >= self.container_check_interval()
        if not (due or self.held_exits or self.tracker.failing()):
            return
        self.last_container_check = now
        ended = self.app.get_containers(states=["SUCCEEDED", "FAILED", "KILLED"])
        for container in ended:
            if container.service_name in self.retired_services:
                continue
            task_id = self.tracker.task_of_container(container.service_name, container.instance)
            task = None if task_id is None else self.tracker.tasks.get(task_id)
            if task_id is None or task is None or task.state.finished:
                continue
            message = f"container {container.yarn_container_id} {container.state}: {container.exit_message}"
            record = self.exit_record(task_id)  # written before the container ended?
            kill = memory_kill(container.exit_message)
            if kill is not None:  # YARN's word, whatever the executor reported (the SIGTERM's 143)
                self.held_exits.pop(task_id, None)
                if record is not None:
                    self.keep_points(task_id, record.points)
                self.tracker.memory_killed(
                    task_id,
                    kill,
                    record.exit_code if record is not None else None,
                    now,
                    usage=record.usage if record is not None else None,
                    stderr_tail=record.stderr_tail if record is not None else None,
                )
                log.warning("%s: %s", task_id, " ".join(str(container.exit_message).split())[:400])
            elif record is not None and not is_preempted(container.exit_message):
                self.apply_exit(task_id, record, now, container_ended=True)
            else:  # no record, or YARN preempted it: YARN's word is the fact, not the executor's 143
                held = self.held_exits.pop(task_id, None)
                if held is not None and record is not None:
                    log.info(
                        "%s: its exit code %d came from YARN's preemption (known %.1fs after the exit record)",
                        task_id,
                        record.exit_code,
                        now - held,
                    )
                kind = FailureKind.PREEMPTED if is_preempted(container.exit_message) else FailureKind.LOST
                self.tracker.container_ended(task_id, message, now, kind=kind)
        if self.tracker.waiting_for_capacity():
            waiting = [c for c in self.app.get_containers(states=NOT_ALLOCATED) if c.id in self.tracker.slots]
            self.tracker.capacity_pending(len(waiting), now)

    # ---------------------------------------------------------------- output

    def publish_cluster(self, now: float) -> None:
        tracker = self.tracker
        if tracker.cluster_published_at is None and not tracker.rendezvous_ready():
            return
        registered = {t.task_id for t in tracker.tasks.values() if t.host is not None}
        if registered != self.published_addresses:  # first time, or a late (untracked) task
            self.app.kv[C.KV_CLUSTER] = tracker.cluster_doc(now).to_json()
            self.published_addresses = registered

    def register_pages(self) -> None:
        """Once the tensorboard role registered its port, serve it through skein's UI (the RM proxy).

        Before the state document shows the task's port, so a client that sees
        the port may link to the page at once.
        """
        for task in self.tracker.tasks.values():
            if task.role != C.TENSORBOARD_ROLE or task.task_id in self.pages or not (task.host and task.port):
                continue
            try:
                self.app.ui.add_page(C.TENSORBOARD_PAGE, f"http://{task.host}:{task.port}", link_name="TensorBoard")
            except Exception as exc:  # noqa: BLE001 - a missing link must not fail training
                # Tried again at the next tick (a busy AM's gRPC call can fail once); the link the
                # client already shows leads nowhere until it succeeds, so it is not given up on.
                if self._page_there():  # the call went through and only its answer was lost
                    self.pages.add(task.task_id)
                    continue
                failed = self.page_failures[task.task_id] = self.page_failures.get(task.task_id, 0) + 1
                if failed == 1 or failed % PAGE_RETRY_LOG_EVERY == 0:
                    log.warning("could not add the TensorBoard page to the application's UI (try %d): %s", failed, exc)
                continue
            self.pages.add(task.task_id)
            self.tracker.events.append(
                f"{task.task_id} served at the application's page {C.SKEIN_PAGES_PREFIX}/{C.TENSORBOARD_PAGE}"
            )

    def _page_there(self) -> bool:
        try:
            return C.TENSORBOARD_PAGE in self.app.ui.get_pages()
        except Exception:  # noqa: BLE001 - unknown: try to add it again next tick
            return False

    def publish_state(self, now: float, force: bool = False) -> None:
        doc = self.tracker.document(now, time.time(), self.seq, self.app_id)
        body = material(doc)
        # Clocks and progress alone: every other heartbeat interval (clients call an AM
        # stale only after minutes); anything material: now.
        with self.history_lock:
            self.history.observe(doc)  # every tick: a report between two publications is kept too
        if force or body != self.last_doc or now - self.last_publish >= 2 * self.spec.heartbeat_interval:
            self.seq += 1
            doc.seq = self.seq
            raw = doc.to_json()
            self.app.kv[C.KV_STATE] = raw
            self.last_state_doc = doc
            if self.web is not None:
                self.web.publish(raw, final=doc.final)
            if doc.progress != self.last_progress:
                self.app.set_progress(doc.progress)
                self.last_progress = doc.progress
            self.last_doc = body
            self.last_publish = now

    def acknowledged(self) -> bool:
        """A client read the final state (its GET of ``ack``, accepted only after the verdict).

        The key-value store's ``tony/final-ack`` (what clients before the HTTP
        route wrote) no longer counts: every container of the job, the training
        code included, can write the store, so it proves no reader; an old
        client's AM just waits out the linger.
        """
        if self.last_state_doc is None or not self.last_state_doc.final:
            return False
        return self.web is not None and self.web.acknowledged.is_set()

    def stop_remaining(self) -> None:
        remaining = self.tracker.to_stop()
        for role in sorted({self.tracker.tasks[t].role for t in remaining}):
            for service in self.spec.all_services(role):
                try:
                    self.app.scale(service, count=0)
                except Exception as exc:  # noqa: BLE001 - shutdown kills them anyway
                    log.warning("could not stop %s: %s", service, exc)
        for task_id in remaining:
            self.tracker.stopped(task_id)

    def exit_record(self, task_id: str) -> ExitRecord | None:
        """The task's exit record from the store; None when it has none yet or it is corrupt (logged)."""
        raw = self.app.kv.get(C.kv_exit(task_id))
        return None if raw is None else _decode(raw, ExitRecord, C.kv_exit(task_id))

    def drain(self, now: float) -> bool:
        """Let the checkpoint uploader finish before a restart stops it; True once it may go on.

        The first call asks (a ``Drain`` for this gang); later calls look for
        the uploader's ``Drained`` answer, its exit record (its own final flush
        already ran), or the timeout.
        """
        task_id = self.tracker.drain_task
        if task_id is None:  # nothing to wait for: the record's drain fields stay None
            return True
        if self.drain_started is None:
            self.drain_started = now
            self.app.kv[C.KV_DRAIN] = Drain(generation=self.tracker.generation).to_json()
            log.info("restart: waiting for %s to finish its checkpoint upload", task_id)
            return False
        waited = now - self.drain_started
        raw = self.app.kv.get(C.kv_drained(task_id))
        answer = None if raw is None else _decode(raw, Drained, C.kv_drained(task_id))
        if answer is not None and answer.generation == self.tracker.generation:
            if not answer.complete:
                log.warning("restart: %s could not upload its newest checkpoint: %s", task_id, answer.error)
            self.tracker.drained(answer.step, waited, answer.last_step)
            return True
        ended = self.exit_record(task_id)
        if ended is not None:  # it ended on its own (its collective failed) after its final flush
            reached = ended.progress.step if ended.progress is not None else None
            self.tracker.drained(ended.checkpoint_step, waited, reached)
            return True
        if waited > C.DRAIN_TIMEOUT_S:
            log.warning("restart: %s did not finish its upload in %gs; restarting anyway", task_id, C.DRAIN_TIMEOUT_S)
            self.tracker.drained(None, waited)
            return True
        return False

    def place_elsewhere(self, now: float) -> None:
        """Spread tasks whose node gives them no container in ``PLACEMENT_WAIT_S`` run elsewhere.

        The task's own service (pinned to one node) is scaled to 0 and the
        role's fallback service asked for one more container, whose slot names
        the task (the executor reads it, as in a restarted gang).
        """
        tracker = self.tracker
        if now - tracker.generation_started < PLACEMENT_WAIT_S:
            return
        for task in tracker.tasks.values():
            fallback = self.spec.fallback_service(task.role)
            service = f"{task.role}{PLACED_SERVICE_SEP}{task.index}"
            if task.state is not TaskState.PENDING or fallback is None or service in self.retired_services:
                continue
            if task.task_id in tracker.slots.values():  # already given a container by the AM
                continue
            if self.app.get_containers(services=[service], states=["RUNNING"]):
                continue  # its container runs: the executor is starting
            self.retired_services.add(service)
            self.app.scale(service, count=0)
            started = self.app.scale(fallback, delta=1)
            for container in started:
                tracker.slots[container.id] = task.task_id
                self.app.kv[C.kv_slot(container.id)] = Slot(
                    task_id=task.task_id, generation=tracker.generation
                ).to_json()
            tracker.events.append(
                f"{task.task_id} got no container on its node ({', '.join(self.nodes_of(service)) or '?'}) in "
                f"{PLACEMENT_WAIT_S:g}s: asked for one on any node the role may use"
            )
            log.warning("%s: no container on its node in %gs; placed elsewhere", task.task_id, PLACEMENT_WAIT_S)

    def nodes_of(self, service: str) -> list[str]:
        """The nodes a skein service was declared with (asked once, from skein's AM)."""
        if self.service_nodes is None:
            try:
                declared = self.app.get_specification().services
                self.service_nodes = {name: list(svc.nodes) for name, svc in declared.items()}
            except Exception as exc:  # noqa: BLE001 - then every task keeps its own service
                log.warning("could not read the application's services: %s", exc)
                self.service_nodes = {}
        return self.service_nodes.get(service, [])

    def restart_gang(self, now: float) -> None:
        """Carry out the tracker's restart: stop every container, clear the old
        gang's keys, ask skein for a fresh gang and tell each new container
        which task it is. The new executors restore the latest checkpoint.

        YARN places the new containers, and a node that stopped heartbeating
        gets none. A task of a ``spread`` role is pinned to its node: when that
        node is lost, its new container comes from the role's fallback service
        (any node the role may use) instead of waiting for the lost node.
        """
        record = self.tracker.restart_pending
        assert record is not None  # called only then
        log.warning("restart %d: %s", record.attempt, record.reason)
        # Placed (spread) roles ask first: their node-pinned requests then never follow
        # another role's requests in skein's per-request priorities, where a restarted
        # ParameterServerStrategy gang (chief and ps asked first) lost a pinned worker's container.
        order = sorted(self.spec.roles, key=lambda r: (self.spec.fallback_service(r) is None, r))
        services = {role: self.spec.all_services(role) for role in order}
        for role_services in services.values():
            for service in role_services:
                self.app.scale(service, count=0)
        self.app.kv.discard(C.KV_CLUSTER)
        self.app.kv.discard(C.KV_DRAIN)
        for prefix in C.KV_GANG_PREFIXES:
            self.app.kv.discard_prefix(prefix)
        self.published_addresses = set()
        self.drain_started = None
        self.retired_services = set()
        generation = self.tracker.generation + 1
        slots: dict[str, str] = {}
        lost = self.tracker.lost_hosts
        for role in services:
            fallback = self.spec.fallback_service(role)
            moved: list[str] = []
            for service in self.spec.role_services(role):
                if service == role:  # one service for the role: its instance order is the task order
                    started = self.app.scale(service, count=self.spec.roles[role].instances)
                    for index, container in enumerate(sorted(started, key=lambda c: c.instance)):
                        slots[container.id] = f"{role}:{index}"
                    continue
                # a spread role: one single-task service per task, named after it
                task_id = task_of_container(service, 0)
                pinned = self.nodes_of(service)
                if fallback is not None and pinned and set(pinned) <= lost:
                    moved.append(task_id)
                    record.moved[task_id] = pinned[0]
                    continue
                for container in self.app.scale(service, count=1):
                    slots[container.id] = task_id
            if moved and fallback is not None:
                started = self.app.scale(fallback, count=len(moved))
                for task_id, container in zip(moved, sorted(started, key=lambda c: c.instance), strict=True):
                    slots[container.id] = task_id
                log.warning("restart %d: %s moved off lost node(s) %s", record.attempt, moved, sorted(lost))
        # Before the slots are written: a new executor's registration is then never ignored.
        self.tracker.begin_generation(slots, now)
        for container_id, task_id in slots.items():
            self.app.kv[C.kv_slot(container_id)] = Slot(task_id=task_id, generation=generation).to_json()

    # ---------------------------------------------------------------- loop

    def tick(self) -> float:
        if not self.tracker.all_started():
            return min(STARTUP_TICK_S, self.spec.heartbeat_interval / 2)
        return min(RUNNING_TICK_S, self.spec.heartbeat_interval)

    def run(self) -> Verdict:
        failed_ticks = 0
        while True:
            try:
                verdict = self.step(time.monotonic())
                failed_ticks = 0
            except Exception as exc:
                failed_ticks += 1
                if not _skein_error(exc) or failed_ticks >= SKEIN_ERROR_TICKS:
                    raise
                log.warning("skein's AM failed a call (%d in a row, tick tried again): %r", failed_ticks, exc)
                verdict = None
            if verdict is not None:
                return verdict
            time.sleep(self.tick())

    def step(self, now: float) -> Verdict | None:
        """One tick: read, judge, act. Every action is safe to take again on the next tick (a restart
        cut short by an error starts over: its first act stops every container of the gang)."""
        self.read_store(now)
        self.check_containers(now)
        self.place_elsewhere(now)
        self.publish_cluster(now)
        self.register_pages()
        verdict = self.tracker.check(now, time.time()) or self.check_early_stop(now)
        if verdict is not None:
            return verdict
        if self.tracker.restart_pending is not None:
            self.publish_state(now, force=self.drain_started is None)  # followers see RESTARTING at once
            if self.drain(now):
                self.restart_gang(now)
        self.publish_state(now)
        return None

    def finish(self, verdict: Verdict) -> None:
        log.info("job %s: %s", verdict.final_status, verdict.diagnostics)
        self.stop_remaining()
        self.record_curve(verdict)
        self.publish_state(time.monotonic(), force=True)
        self.write_history()  # before the linger: a client that saw the verdict may read it next
        deadline = time.monotonic() + FINAL_LINGER_S
        while time.monotonic() < deadline and not self.acknowledged():
            time.sleep(0.2)
        self.remove_staging()
        self.app.shutdown(verdict.final_status, final_diagnostics(verdict, self.app_id))


def _skein_error(exc: BaseException) -> bool:
    """An error skein's client raised for a call to skein's AM (``skein.exceptions.SkeinError``)."""
    from skein.exceptions import SkeinError

    return isinstance(exc, SkeinError)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import skein

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Before skein's client starts its threads, so that they inherit it.
    priority.lower()
    if priority.is_skein_am(os.getppid()):
        priority.lower(os.getppid())
        priority.lower_session()  # the container's session: skein's JVM, this process
    app = skein.ApplicationClient.from_current()
    app_id = os.environ.get(C.ENV_SKEIN_APPLICATION_ID, "")
    try:
        spec = decode_spec(os.environ[C.ENV_JOB_SPEC])
    except Exception as exc:  # noqa: BLE001 - report it as the job's failure
        app.shutdown("FAILED", f"the application master could not read the job spec: {exc}")
        return 0
    am = ApplicationMaster(app, spec, app_id)
    am.start_web()
    try:
        # kerberos.refresh_tokens: a daemon thread, None otherwise. Before the loop, so before the
        # cluster spec is handed out: the keytab's staged copy must be gone before any job code runs.
        am.refresher = token_refresh.start_for_am(app, connect=hdfs_io.client_from_env)
        verdict = am.run()
    except KeytabCopyLeft as exc:
        verdict = Verdict(False, str(exc), retryable=False)
        am.tracker.verdict = verdict
    except Exception as exc:
        log.exception("application master failed")
        verdict = Verdict(False, f"application master error: {type(exc).__name__}: {exc}", retryable=True)
        am.tracker.verdict = verdict
    am.finish(verdict)
    return 0


if __name__ == "__main__":
    sys.exit(main())
