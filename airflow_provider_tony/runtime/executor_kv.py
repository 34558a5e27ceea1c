"""The executor's side of skein's key-value store, the only channel between it and the AM.

Why a module of its own: every read and write an executor makes in the store is
here, with the polling rules they share (gets only, never a skein watch: see
:func:`wait_for_cluster`): who this container is (:func:`find_slot`), its
heartbeats, the gang's cluster spec, the AM's drain before a gang restart, and
the events the AM lists. :mod:`~airflow_provider_tony.runtime.executor` runs
them in its phases.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import checkpoint
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import progress as progress_api
from airflow_provider_tony.runtime.messages import ClusterDocument, Drain, Drained, EventRecord, Progress, Slot, Usage
from airflow_provider_tony.runtime.messages import Heartbeat as Beat
from airflow_provider_tony.runtime.spec import JobSpec, task_of_container

log = logging.getLogger("tony.executor")
CLUSTER_POLL_S = (0.05, 0.1, 0.2, 0.25)
BEATS_PER_POINT = 8  # heartbeats that carry each progress report (the AM may miss a few under load)
SLOT_POLL_S = 0.25
SLOT_WAIT_S = 120.0


def task_identity(env: dict[str, str]) -> tuple[str, int]:
    """Role and index of a first-gang container, from skein's ``<service>_<instance>`` container id
    (``worker_1``, or ``worker.1_0`` for a spread role's one-task service)."""
    container = env[C.ENV_SKEIN_CONTAINER_ID]
    service, _, instance = container.rpartition("_")
    role, _, index = task_of_container(service, int(instance)).rpartition(":")
    return role, int(index)


def find_slot(app: Any, spec: JobSpec, env: dict[str, str], wait_s: float = SLOT_WAIT_S) -> tuple[str, int, int]:
    """Role, task index and gang generation of this container.

    The first gang's containers are instances 0..n-1 of their service, so the
    container id says who they are. skein numbers the containers of a
    restarted gang on (``worker_2`` replaces ``worker_0``); the AM writes
    their task and generation under ``tony/slot/<container>`` once skein has
    named them, so such a container polls for it.
    """
    container = env[C.ENV_SKEIN_CONTAINER_ID]
    service, _, instance = container.rpartition("_")
    role, index = task_identity(env)
    # The first gang: instances 0..n-1 of a role's service, or instance 0 of a spread role's per-task
    # service. A spread role's fallback service (``worker.elsewhere``) names no role: restarts only.
    first_gang = role in spec.roles and int(instance) < (spec.roles[role].instances if service == role else 1)
    deadline = time.monotonic() + wait_s
    while True:
        raw = app.kv.get(C.kv_slot(container))
        if raw is not None:
            slot = Slot.from_json(raw)
            slot_role, slot_index = slot.task_id.rsplit(":", 1)
            return slot_role, int(slot_index), slot.generation
        if first_gang:
            return role, index, 0
        if time.monotonic() > deadline:
            raise RuntimeError(f"container {container} has no slot from the AM after {wait_s:g}s")
        time.sleep(SLOT_POLL_S)


class HeartbeatSender(threading.Thread):
    """Sends this task's ``messages.Heartbeat``: writes a beat (with the latest user progress) every heartbeat interval.

    A change the AM waits for (the user process has started) is sent at once
    through ``nudge`` rather than at the next interval, so a long interval
    slows no start-up.
    """

    def __init__(self, app: Any, task_id: str, interval: float, progress_file: Path, generation: int = 0) -> None:
        super().__init__(name="tony-heartbeat", daemon=True)
        self.generation = generation
        self.app = app
        self.key = C.kv_heartbeat(task_id)
        self.interval = interval
        self.progress_file = progress_file
        self.user_started = False
        self.restored_step: int | None = None
        self.usage: Callable[[], Usage | None] | None = None  # the training process's use so far, once it runs
        self.stop_event = threading.Event()
        self.wake = threading.Event()
        self.seq = 0
        self.newest_sent: collections.deque[float | None] = collections.deque(maxlen=BEATS_PER_POINT)

    def new_points(self, recent: list[Progress]) -> list[Progress]:
        """The reports made in the last ``BEATS_PER_POINT`` beats: each rides on that many beats.

        The AM reads the store about once a heartbeat interval, but a busy node
        can delay a read by a few: two beats lost points under load. A beat of
        a job that reports rarely still carries none instead of the whole window.
        """
        full = len(self.newest_sent) == self.newest_sent.maxlen
        floor = self.newest_sent[0] if full else None
        points = [p for p in recent if floor is None or p.time is None or p.time > floor]
        times = [p.time for p in recent if p.time is not None]
        self.newest_sent.append(max(times) if times else (self.newest_sent[-1] if self.newest_sent else None))
        return points

    def beat(self) -> None:
        self.seq += 1
        latest, recent = progress_api.read_all(self.progress_file)
        payload = Beat(
            seq=self.seq,
            time=time.time(),
            user_started=self.user_started,
            restored_step=self.restored_step,
            progress=latest,
            generation=self.generation,
            points=self.new_points(recent),  # the AM keeps those it has not seen
            usage=self.usage() if self.usage is not None else None,
        )
        self.app.kv[self.key] = payload.to_json()

    def nudge(self) -> None:
        """Beat now instead of at the end of the current interval."""
        self.wake.set()

    def stop(self) -> None:
        self.stop_event.set()
        self.wake.set()

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                self.beat()
            except Exception as exc:  # noqa: BLE001 - a missed beat is the AM's to judge
                log.warning("heartbeat failed: %s", exc)
            self.wake.wait(self.interval)
            self.wake.clear()


class DrainWatch(threading.Thread):
    """The uploader's side of a gang restart: on the AM's ``Drain``, stop training, upload, answer.

    The AM stops every container of a gang it restarts, and YARN kills a
    container within a fraction of a second. Without this, the checkpoint the
    script saved last (not yet picked up, or half uploaded) is lost with the
    gang. The order matters: the training process is stopped first (SIGTERM,
    then SIGKILL after ``USER_STOP_S``), so no checkpoint is saved after the
    flush; then the newest complete local checkpoint is uploaded, and only
    then does the AM, waiting for the ``Drained`` answer (bounded), stop the
    gang. The new gang redoes at most one checkpoint interval. Polled with a
    get every ``interval`` (no skein watch: see ``wait_for_cluster``).
    """

    def __init__(
        self,
        app: Any,
        task_id: str,
        generation: int,
        sync: checkpoint.CheckpointSync,
        interval: float,
        timeout: float,
        stop_training: Callable[[], None] = lambda: None,
        progress_file: Path | None = None,
    ) -> None:
        super().__init__(name="tony-drain-watch", daemon=True)
        self.app = app
        self.task_id = task_id
        self.generation = generation
        self.sync = sync
        self.interval = interval
        self.timeout = timeout
        self.stop_training = stop_training
        self.progress_file = progress_file
        self.stop_event = threading.Event()
        self.draining = threading.Event()  # a drain was asked for: the executor's exit waits for the answer

    def requested(self) -> bool:
        raw = self.app.kv.get(C.KV_DRAIN)
        if raw is None:
            return False
        try:
            return Drain.from_json(raw).generation == self.generation
        except Exception:  # noqa: BLE001 - a garbled request is no request
            return False

    def answer(self) -> Drained:
        self.draining.set()
        self.stop_training()
        progress = progress_api.read(self.progress_file) if self.progress_file is not None else None
        complete = self.sync.flush(timeout=self.timeout)
        drained = Drained(
            generation=self.generation,
            step=self.sync.newest_uploaded(),
            complete=complete,
            error="" if complete else self.sync.last_error,
            last_step=progress.step if progress is not None else None,
        )
        self.app.kv[C.kv_drained(self.task_id)] = drained.to_json()
        return drained

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                if not self.requested():
                    continue
                drained = self.answer()
            except Exception as exc:  # noqa: BLE001 - the AM stops waiting after its timeout
                log.warning("drain: %s", exc)
                continue
            log.info("%s drained for the restart: checkpoint step %s on HDFS", self.task_id, drained.step)
            return


def wait_for_cluster(app: Any, task_id: str, generation: int = 0) -> ClusterDocument:
    """The cluster spec of this executor's gang, once it lists this task.

    The AM publishes the spec as soon as the tracked tasks have registered and
    publishes it again when an untracked task (a tensorboard or ps that came
    up later) registers; an executor must wait for the copy that has its own
    address, or it cannot build its environment.

    Polled for (0.05 s, growing to 0.25 s, the AM's own start-up tick), not
    waited on with skein's ``kv.wait``: that opens a watch, and skein 0.8.2's
    AM answers a new watch and sends a put's event on the same stream from two
    threads without a lock, so the AM's put of the cluster spec and an
    executor's new watch could fail each other. Gets cannot race that way.
    """
    delays = itertools.chain(CLUSTER_POLL_S, itertools.repeat(CLUSTER_POLL_S[-1]))
    while True:
        raw = app.kv.get(C.KV_CLUSTER)
        if raw is not None:
            doc = ClusterDocument.from_json(raw)
            if doc.generation == generation and task_id in doc.addresses:
                return doc
        time.sleep(next(delays))


def report_event(app: Any, task_id: str, message: str) -> None:
    """A line for the AM's event list (and so for the Airflow log)."""
    log.info("%s", message)
    # Every executor event is a checkpoint's, the model's or an input's staging: all shown to users.
    record = EventRecord(message=message, artefact=True)
    app.kv[f"{C.KV_EVENT_PREFIX}{task_id}/{time.time():.6f}"] = record.to_json()
