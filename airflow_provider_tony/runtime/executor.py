"""The task executor: runs in every task container and wraps the user's code.

Order matters and is the point of this module: hold a port so no one else
takes it, register it, wait for the whole cluster (GANG), build TF_CONFIG and
GPU visibility for this task, release the port only immediately before the
user process starts, then heartbeat until it exits and report the exit code
with the tail of its stderr. The executor itself exits 0 whenever it could
report, so that the AM, not skein, decides what a failure means.

:func:`main` runs these as named phases, one function each: ``identify``,
``prepare_workdir``, ``claim_gpus``, ``register``, ``stage_inputs``, (``wait_for_cluster``),
``task_environment``, ``restore``, ``start_user``, ``start_uploads``,
(``UserProcess.wait``), ``finish_uploads``, ``export_model``, ``report_exit``.

    python -m airflow_provider_tony.runtime.executor
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import checkpoint, gate, hdfs_io, inputs, namenodes, priority, usage, workspace
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import progress as progress_api
from airflow_provider_tony.runtime.errors import GpuLeaseError, InputTooLarge
from airflow_provider_tony.runtime.frameworks import framework_env, holds_port
from airflow_provider_tony.runtime.gpu import discover_local_gpus, gpu_env, parse_visible_devices
from airflow_provider_tony.runtime.gpu_lease import GpuLeases, lease_dir, yarn_assigned_gpus
from airflow_provider_tony.runtime.hdfs_refusal import HDFS_REFUSED_EXIT_CODE, REFUSED_PREFIX, refusal, refused_line
from airflow_provider_tony.runtime.messages import (
    ClusterDocument,
    Drain,
    Drained,
    EventRecord,
    ExitRecord,
    Progress,
    Registration,
    Slot,
    Usage,
)
from airflow_provider_tony.runtime.messages import Heartbeat as Beat
from airflow_provider_tony.runtime.spec import JobSpec, task_of_container
from airflow_provider_tony.runtime.transport import decode_spec

log = logging.getLogger("tony.executor")
STDERR_TAIL_LINES = 20
# How long a training process stopped for a gang restart has to save and exit
# after SIGTERM before it is killed (its checkpoint, if it writes one, counts).
USER_STOP_S = 10.0
CLUSTER_POLL_S = (0.05, 0.1, 0.2, 0.25)
RESTORING_ROLES = frozenset({"chief", "worker"})
# Inside the container's working directory.
PROGRESS_FILE = "progress.json"
MODEL_DIR = "model"
TENSORBOARD_DIR = "tensorboard"
BEATS_PER_POINT = 8  # heartbeats that carry each progress report (the AM may miss a few under load)
EVENTS_SYNC_S = 5.0  # the shortest interval between two mirrorings of the TensorBoard events to HDFS


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


def reserve_port() -> socket.socket:
    """Bind an ephemeral port and keep it bound until the user process starts,
    so that nothing else on the node can take it in between (tf-yarn's trick).

    With ``SO_REUSEPORT`` a server of this user that sets it too (TensorFlow's
    gRPC server does) may bind the port while we still hold it: see
    :func:`frameworks.holds_port`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("", 0))
    return sock


def user_environment(
    spec: JobSpec,
    role: str,
    index: int,
    cluster: ClusterDocument,
    app_id: str,
    workdir: Path,
    base: dict[str, str],
    port: int | None = None,
) -> dict[str, str]:
    """Everything the user process sees, built from pure pieces."""
    task_id = f"{role}:{index}"
    env = {**base, **spec.role_env(role)}
    env.pop(C.ENV_TF_CONFIG, None)
    env.update(framework_env(spec.framework, cluster.addresses, task_id))
    env.update(gpu_env(cluster.gpus.get(task_id, [])))
    env.update(
        {
            C.ENV_ROLE: role,
            C.ENV_TASK_INDEX: str(index),
            C.ENV_TASK_ID: task_id,
            C.ENV_APP_ID: app_id,
            C.ENV_ATTEMPT: base.get(C.ENV_ATTEMPT, "1"),
            C.ENV_CLUSTER_SPEC: json.dumps(cluster.addresses, sort_keys=True),
            C.ENV_NUM_TASKS: json.dumps(cluster.num_tasks, sort_keys=True),
            C.ENV_PROGRESS_FILE: str(workdir / PROGRESS_FILE),
            C.ENV_CHECKPOINT_DIR: str(workdir / spec.checkpoint.local_dir),
            C.ENV_MODEL_DIR: str(workdir / MODEL_DIR),
            C.ENV_TENSORBOARD_DIR: str(workdir / TENSORBOARD_DIR),
            "PYTHONUNBUFFERED": "1",
        }
    )
    # The job's own modules first; a PYTHONPATH the user set in ``env`` comes next.
    env[C.ENV_PYTHONPATH] = workspace.python_path(
        workdir, spec.src_dir is not None, spec.role_env(role).get(C.ENV_PYTHONPATH), base.get(C.ENV_PYTHONPATH)
    )
    # TonY's variables, unless the job sets one itself.
    compat = workspace.tony_env(
        role, index, cluster.addresses, len(tracked_task_ids(spec)), task_id == spec.decider_task(), app_id, port
    )
    for key, value in compat.items():
        env.setdefault(key, value)
    return env


def tracked_task_ids(spec: JobSpec) -> list[str]:
    """The tasks whose exit counts (TonY's ``TASK_NUM`` counts these)."""
    tracked = set(spec.tracked_roles())
    return [t for t in spec.task_ids() if t.split(":")[0] in tracked]


def source_links(spec: JobSpec, workdir: Path) -> list[str]:
    """Link the unpacked source tree into the working directory; names left out (taken)."""
    if spec.src_dir is None or not (workdir / C.SRC_ALIAS).is_dir():
        return []
    reserved = {PROGRESS_FILE, MODEL_DIR, TENSORBOARD_DIR, spec.checkpoint.local_dir.split("/")[0], *spec.files}
    reserved |= {inputs.INPUTS_DIR} if spec.inputs else set()
    return workspace.link_source(workdir / C.SRC_ALIAS, workdir, reserved)


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


def start_sampler(spec: JobSpec, role: str, user: UserProcess, user_env: dict[str, str]) -> usage.UsageSampler | None:
    """The training process tree's peak memory, CPU and GPU use, sampled beside it (None if it did not start)."""
    if user.proc is None:
        return None
    sampler = usage.UsageSampler(
        user.proc.pid,
        visible_gpus=user_env.get(C.ENV_CUDA_VISIBLE_DEVICES),
        want_gpus=spec.roles[role].gpus > 0,
        env=user_env,
    )
    sampler.start()
    return sampler


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


def _pump_stderr(stream: Any, tail: collections.deque[str]) -> None:
    """Forward the user's stderr to the container log, keeping its last lines."""
    for raw in iter(stream.readline, b""):
        sys.stderr.buffer.write(raw)
        sys.stderr.buffer.flush()
        tail.append(raw.decode(errors="replace").rstrip("\n"))


class UserProcess:
    """The user's command: started without a shell, stderr teed and tailed."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        port_sock: socket.socket,
        keep_fds: list[int] | None = None,
        hold_port: bool = False,
    ) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra: list[str] = []
        self.fail_code = C.TEMPFAIL_EXIT_CODE  # the exit of a stop of ours (``fail``)
        # Held through the start where the user's server shares it (hold_port), else released
        # at the last moment: the user's server binds it next.
        self.port_sock: socket.socket | None = port_sock if hold_port else None
        if not hold_port:
            port_sock.close()
        try:
            # keep_fds: the GPU leases, held by the training process too, so a
            # GPU stays leased while it runs even if this executor dies first.
            self.proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=None,
                stderr=subprocess.PIPE,  # never a shell: argv is a list
                pass_fds=tuple(keep_fds or ()),
            )
        except OSError as exc:
            self.extra.append(f"could not start {argv[0]!r}: {exc}")
            return
        self.pump = threading.Thread(target=_pump_stderr, args=(self.proc.stderr, self.tail), daemon=True)
        self.pump.start()
        signal.signal(signal.SIGTERM, self._forward)

    def _forward(self, signum: int, _frame: object) -> None:
        """YARN stops a container with SIGTERM: pass it on so user code can save and exit."""
        if self.proc is not None:
            self.proc.send_signal(signum)

    def stop(self, timeout: float) -> None:
        """Stop the user code and wait for it: SIGTERM (it may save and exit), SIGKILL after ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def fail(self, message: str) -> None:
        """Stop the user code for a reason of ours (e.g. checkpoints cannot be saved).

        The exit is then 75 (retryable), or 77 when the reason is HDFS refusing
        the folder for good (``runtime/hdfs_refusal.py``'s line).
        """
        if message.startswith(REFUSED_PREFIX):
            self.fail_code = HDFS_REFUSED_EXIT_CODE
        self.extra.append(message)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()

    def wait(self) -> tuple[int, list[str]]:
        if self.proc is None:
            self._release_port()
            return 127, self.extra
        code = self.proc.wait()
        self._release_port()
        self.pump.join(timeout=5)
        if code < 0:  # killed by a signal: report it the way a shell would
            code = 128 - code
        if self.extra and code in (0, 143):
            code = self.fail_code  # ours: retryable unless HDFS refused the folder
        return code, [*self.tail, *self.extra]

    def _release_port(self) -> None:
        if self.port_sock is not None:
            self.port_sock.close()
            self.port_sock = None


def after_final_flush(
    flushed: bool,
    code: int,
    tail: list[str],
    checkpoint_dir: str | None,
    error: str | None,
    refused: str | None = None,
) -> tuple[int, list[str]]:
    """The task's exit after its last checkpoint upload: a script that ended well but whose last
    checkpoint never reached HDFS did not succeed. 75 (retryable): the retry resumes from what is
    on HDFS and saves again; 77 when HDFS refused the folder (``refused``: its line), which a retry
    cannot change; a failed script keeps its own code."""
    if flushed or code != 0:
        return code, tail
    if refused:
        return HDFS_REFUSED_EXIT_CODE, [*tail, refused]
    return C.TEMPFAIL_EXIT_CODE, [*tail, f"the last checkpoint could not be uploaded to {checkpoint_dir}: {error}"]


def restore(
    app: Any, spec: JobSpec, hdfs: Any, role: str, task_id: str, ckpt_dir: Path, user_env: dict[str, str]
) -> int | None:
    """Bring back the newest whole checkpoint (this job's, else the warm start's); each one skipped
    as not whole is an event, so the Airflow log says why the job resumed from an older step."""
    user_env[C.ENV_RESTORED_STEP] = ""
    user_env[C.ENV_RESTORED_FROM] = ""
    user_env[C.ENV_RESTORED_KIND] = ""
    if hdfs is None or spec.checkpoint.dir is None or role not in RESTORING_ROLES and role not in spec.tracked_roles():
        return None
    sources = [spec.checkpoint.dir] + ([spec.checkpoint.warm_start_from] if spec.checkpoint.warm_start_from else [])
    started = time.monotonic()
    found = checkpoint.restore_latest(
        hdfs, sources, ckpt_dir, on_event=lambda msg: report_event(app, task_id, f"{task_id} {msg}")
    )
    if found is None:
        report_event(app, task_id, f"{task_id} found no whole checkpoint in {', '.join(sources)}: starting fresh")
        return None
    step, source = found
    user_env[C.ENV_RESTORED_STEP] = str(step)
    user_env[C.ENV_RESTORED_FROM] = source
    own = hdfs_io.hdfs_path(spec.checkpoint.dir).rstrip("/") + "/"
    user_env[C.ENV_RESTORED_KIND] = "resume" if source.startswith(own) else "warm_start"
    report_event(
        app, task_id, f"{task_id} restored checkpoint step {step} from {source} in {time.monotonic() - started:.2f}s"
    )
    return step


def best_of(spec: JobSpec) -> checkpoint.BestOf | None:
    """Best-N checkpoint retention as the job asks for it (``checkpoint.keep_best`` by the gate's metric)."""
    metric = spec.quality_gate.metric
    if spec.checkpoint.keep_best <= 0 or metric is None:
        return None
    return checkpoint.BestOf(spec.checkpoint.keep_best, metric, spec.quality_gate.mode)


def latest_metrics(progress_file: Path) -> dict[str, Any] | None:
    """The metrics of the script's latest report, to be kept with the checkpoint uploaded now."""
    latest = progress_api.read(progress_file)
    return dict(latest.metrics) if latest is not None else None


def report_event(app: Any, task_id: str, message: str) -> None:
    """A line for the AM's event list (and so for the Airflow log)."""
    log.info("%s", message)
    # Every executor event is a checkpoint's, the model's or an input's staging: all shown to users.
    record = EventRecord(message=message, artefact=True)
    app.kv[f"{C.KV_EVENT_PREFIX}{task_id}/{time.time():.6f}"] = record.to_json()


def export_model(
    app: Any,
    spec: JobSpec,
    workdir: Path,
    env: dict[str, str],
    task_id: str,
    code: int,
    tail: list[str],
    upload_tag: str,
    clients: namenodes.Router | None = None,
) -> tuple[int, list[str]]:
    """Publish the decider's ``$TONY_MODEL_DIR`` to ``checkpoint.model_dir`` on HDFS, on its own NameNode
    (``clients``: the process's, else made from ``env``)."""
    local = workdir / MODEL_DIR
    target = spec.checkpoint.model_dir
    assert target is not None  # called only when the job sets model_dir
    if not local.is_dir() or not any(local.iterdir()):
        report_event(app, task_id, f"{task_id} wrote no model to $TONY_MODEL_DIR; nothing exported")
        return code, tail
    client = namenodes.pick(clients or hdfs_io.Clients(env, kv=app.kv), target)
    if client is None:
        return 1, [*tail, "model_dir is set but the job has no WebHDFS URL to export the model with"]
    app_id = env.get(C.ENV_SKEIN_APPLICATION_ID, "")
    gated = spec.quality_gate.enabled
    # A gated model waits beside model_dir until the submitting side has judged it (runtime/gate.py).
    destination = gate.candidate_dir(target, app_id) if gated else target
    record = gate.model_record(app_id, progress_api.read(workdir / PROGRESS_FILE), hdfs_io.hdfs_path(target))
    (local / gate.MODEL_METADATA).write_bytes(record.to_json())
    try:
        remote = hdfs_io.publish(client, str(local), destination, upload_tag)
    except Exception as exc:  # noqa: BLE001 - becomes the task's failure
        answer = refusal(exc)
        if answer is not None:  # the model folder's quota or permissions: no retry changes them
            return HDFS_REFUSED_EXIT_CODE, [*tail, refused_line(hdfs_io.hdfs_path(destination), answer)]
        return C.TEMPFAIL_EXIT_CODE, [*tail, f"model export to {destination} failed: {exc}"]
    if gated:
        report_event(app, task_id, f"{task_id} exported the model to {remote} for the quality gate to judge")
    else:
        report_event(app, task_id, f"{task_id} exported the model to {remote}")
    return code, tail


#: Exit code reported when the node's GPUs stayed taken: EX_TEMPFAIL, retryable,
#: because GPUs on a node free up as other jobs end.
GPU_LEASE_EXIT_CODE = C.TEMPFAIL_EXIT_CODE


def gpu_lease_exit(exc: GpuLeaseError, generation: int, now: float | None = None) -> ExitRecord:
    """The exit record of a task whose GPUs stayed taken.

    It carries the gang's ``generation`` like every exit record: the AM drops
    records of other gangs, so without it a restarted gang's lease failure
    would be ignored and the job would end in a registration timeout instead.
    """
    return ExitRecord(
        exit_code=GPU_LEASE_EXIT_CODE,
        stderr_tail=[f"GPU lease: {exc}"],
        time=time.time() if now is None else now,
        generation=generation,
    )


def take_gpus(
    spec: JobSpec,
    role: str,
    task_id: str,
    env: dict[str, str],
    host: str,
    local_gpus: list[str],
    pinned: list[str] | None,
    app_id: str,
) -> tuple[GpuLeases | None, list[str] | None]:
    """This container's own GPUs on the node, so that no other application uses them.

    Under the NVIDIA runtime (``pinned``) YARN's choice stands. Else the
    NodeManager's REST view, when it assigned devices to this container
    (LinuxContainerExecutor with GPU isolation). Else node-local leases
    (:mod:`~airflow_provider_tony.runtime.gpu_lease`), held for the
    container's life. Returns the leases (to keep) and the devices owned, or
    ``(None, None)`` when the AM may divide the node's GPUs itself (a role
    without GPUs, or pinned by the runtime).
    """
    wanted = spec.roles[role].gpus
    if wanted == 0 or pinned is not None:
        return None, None
    container_id = env.get(C.ENV_YARN_CONTAINER_ID)
    nm_http = f"{host}:{env[C.ENV_NM_HTTP_PORT]}" if env.get(C.ENV_NM_HTTP_PORT) else None
    assigned = yarn_assigned_gpus(nm_http, container_id)
    if assigned is not None:
        log.info("%s: YARN assigned GPUs %s to this container", task_id, assigned)
        return None, assigned
    leases = GpuLeases(
        lease_dir({**spec.role_env(role), **env}, host), owner=f"{container_id or '?'} ({app_id} {task_id})"
    )
    # Bounded below the registration timeout, so the job fails with this
    # message rather than with the AM's generic "never registered".
    got = leases.acquire(
        local_gpus,
        wanted,
        timeout=0.75 * spec.registration_timeout,
        on_wait=lambda msg: log.warning("%s: %s", task_id, msg),
    )
    log.info("%s leased GPUs %s in %s", task_id, got, leases.directory)
    return leases, got


@dataclasses.dataclass(frozen=True)
class ContainerTask:
    """Who this container is, learnt once at start-up and passed to every phase of :func:`main`
    (the AM's record of a task is ``state.TaskRecord``)."""

    app: Any
    spec: JobSpec
    env: dict[str, str]
    role: str
    index: int
    generation: int
    workdir: Path

    @property
    def task_id(self) -> str:
        return f"{self.role}:{self.index}"

    @property
    def is_decider(self) -> bool:
        return self.task_id == self.spec.decider_task()

    @property
    def app_id(self) -> str:
        return self.env.get(C.ENV_SKEIN_APPLICATION_ID, "")

    @property
    def upload_tag(self) -> str:
        """Names this process's temporary uploads: unique per try, gang and process."""
        return f"{self.env.get(C.ENV_ATTEMPT, '1')}-{self.generation}-{os.getpid()}"

    @functools.cached_property
    def clients(self) -> hdfs_io.Clients:
        """This process's WebHDFS clients, one per NameNode the job touches, each made when first used."""
        return hdfs_io.Clients(self.env, kv=self.app.kv)

    def event(self, message: str) -> None:
        """An event line for the AM, prefixed with this task."""
        report_event(self.app, self.task_id, f"{self.task_id} {message}")


@dataclasses.dataclass
class Gpus:
    """What this container found and owns of the node's GPUs (see :func:`take_gpus`)."""

    local: list[str]
    pinned: list[str] | None  # by the NVIDIA runtime: the container sees only these
    owned: list[str] | None  # YARN's assignment or our leases
    leases: GpuLeases | None


@dataclasses.dataclass
class Uploads:
    """The decider's uploaders while the user process runs: checkpoints, TensorBoard events, the drain."""

    sync: checkpoint.CheckpointSync
    drain_watch: DrainWatch


def identify(app: Any, spec: JobSpec, env: dict[str, str], workdir: Path) -> ContainerTask:
    """Phase 1: learn this container's task and gang (see :func:`find_slot`)."""
    role, index, generation = find_slot(app, spec, env)
    return ContainerTask(app=app, spec=spec, env=env, role=role, index=index, generation=generation, workdir=workdir)


def prepare_workdir(task: ContainerTask) -> None:
    """Phase 2: the local checkpoint folder and the job's source tree linked in."""
    (task.workdir / task.spec.checkpoint.local_dir).mkdir(parents=True, exist_ok=True)
    skipped = source_links(task.spec, task.workdir)
    if skipped:
        log.warning(
            "source entries %s not linked into the working directory: the name is taken by a shipped"
            " file or the runtime (import them from %s/)",
            skipped,
            C.SRC_ALIAS,
        )


def claim_gpus(task: ContainerTask, host: str) -> Gpus:
    """Phase 3: the node's GPUs this task may use; raises :class:`GpuLeaseError` when they stayed taken."""
    pinned = parse_visible_devices(task.env.get("NVIDIA_VISIBLE_DEVICES"))
    local = discover_local_gpus() if task.spec.roles[task.role].gpus > 0 else []
    leases, owned = take_gpus(task.spec, task.role, task.task_id, task.env, host, local, pinned, task.app_id)
    return Gpus(local=local, pinned=pinned, owned=owned, leases=leases)


def report_gpu_failure(task: ContainerTask, exc: GpuLeaseError) -> None:
    """Phase 3's failure, reported like any task exit and before registering: the AM fails the job
    with this message instead of a registration timeout."""
    log.error("%s: %s", task.task_id, exc)
    task.app.kv[C.kv_exit(task.task_id)] = gpu_lease_exit(exc, task.generation).to_json()


def register(task: ContainerTask, host: str, port: int, gpus: Gpus) -> HeartbeatSender:
    """Phase 4: start beating and register this task's address; returns the running heartbeat."""
    # gpus_pinned: devices this container owns on the node (YARN's or leased);
    # the AM treats them as fixed and withholds them from the job's other tasks.
    registration = Registration(
        host=host,
        port=port,
        pid=os.getpid(),
        container_id=task.env.get(C.ENV_YARN_CONTAINER_ID),
        gpus_local=gpus.local,
        gpus_pinned=gpus.pinned if gpus.pinned is not None else gpus.owned,
        generation=task.generation,
        nm_http_port=int(task.env[C.ENV_NM_HTTP_PORT]) if task.env.get(C.ENV_NM_HTTP_PORT, "").isdigit() else None,
    )
    heartbeat = HeartbeatSender(
        task.app, task.task_id, task.spec.heartbeat_interval, task.workdir / PROGRESS_FILE, task.generation
    )
    heartbeat.start()
    task.app.kv[C.kv_register(task.task_id)] = registration.to_json()
    log.info("%s registered %s:%s; waiting for the cluster spec", task.task_id, host, port)
    return heartbeat


def stage_inputs(task: ContainerTask) -> dict[str, str] | None:
    """Phase 4b: the job's HDFS inputs on this task's disk before its script starts (see
    :mod:`~airflow_provider_tony.runtime.inputs`); returns the script's variables.

    Runs after registering, while the other tasks register: the gang's start waits for the
    slowest stager only. None when staging failed: the exit record (retryable, naming the
    input) is already sent, so the AM fails the job with that message.
    """
    spec = task.spec
    if not any(task.task_id in spec.input_tasks(name) for name in spec.inputs):
        return {}
    try:
        if task.clients.default() is None:
            raise RuntimeError("the job has inputs but no WebHDFS URL to read them with")
        found, _ = inputs.stage_inputs(
            task.clients,  # each input from its own NameNode
            spec,
            task.task_id,
            task.workdir,
            task.env,
            on_event=lambda msg: report_event(task.app, task.task_id, msg),
        )
    except Exception as exc:  # noqa: BLE001 - becomes the task's exit: retryable unless the disk cannot hold it
        log.error("%s: staging inputs failed: %s", task.task_id, exc)
        # Too large for the cap or the disk: exit 1 is a failure of the job itself (not retried), since a
        # retry would stage the same bytes onto the same disks; anything else (HDFS trouble) is 75.
        too_large = isinstance(exc, InputTooLarge)
        task.app.kv[C.kv_exit(task.task_id)] = ExitRecord(
            exit_code=1 if too_large else C.TEMPFAIL_EXIT_CODE,
            stderr_tail=[f"staging the job's inputs failed: {exc}"],
            time=time.time(),
            generation=task.generation,
        ).to_json()
        return None
    return found


def task_environment(task: ContainerTask, cluster: ClusterDocument, port: int, gpus: Gpus) -> dict[str, str]:
    """Phase 5: the user process's environment, once the gang's cluster spec is known."""
    user_env = user_environment(
        task.spec, task.role, task.index, cluster, task.app_id, task.workdir, task.env, port=port
    )
    if gpus.pinned is not None:
        # Under the NVIDIA runtime the container sees only its own GPUs,
        # renumbered from 0: expose exactly what is visible inside.
        user_env[C.ENV_CUDA_VISIBLE_DEVICES] = ",".join(discover_local_gpus()) if gpus.pinned else ""
    user_env[C.ENV_PORT] = str(port)
    return user_env


def start_user(
    task: ContainerTask, user_env: dict[str, str], sock: socket.socket, gpus: Gpus, heartbeat: HeartbeatSender
) -> UserProcess:
    """Phase 7: release the port and start the user's code; the AM counts its start-up from the next beat."""
    role = task.spec.roles[task.role]
    argv = workspace.task_argv(role, task.spec.python.python_command() or sys.executable)
    program = role.script or role.module or argv[0]
    log.info(
        "%s starting %s (CUDA_VISIBLE_DEVICES=%r)", task.task_id, program, user_env.get(C.ENV_CUDA_VISIBLE_DEVICES)
    )
    user = UserProcess(
        argv,
        user_env,
        task.workdir,
        sock,
        keep_fds=gpus.leases.fds if gpus.leases else None,
        hold_port=holds_port(task.spec.framework, task.role),
    )
    heartbeat.user_started = True
    heartbeat.nudge()  # the AM counts the start-up from this beat: not one interval later
    priority.lower()  # the user process is forked: from now on ours yield to it
    return user


def start_events(task: ContainerTask, hdfs: Any, events: str | None) -> checkpoint.DirSync | None:
    """Phase 8a (the decider, when someone reads them): mirror the TensorBoard events to ``events`` on HDFS.

    With checkpoints at their pace (each upload costs the nodes that train);
    without (a job whose only reader is its tensorboard role), every 5 s.
    """
    if hdfs is None or events is None:
        return None
    spec = task.spec
    every = max(EVENTS_SYNC_S, spec.checkpoint.poll_interval) if spec.checkpoint.dir else EVENTS_SYNC_S
    # Under checkpoint.dir, on its NameNode; else under the connection's base_path, on the default one.
    client = namenodes.pick(hdfs, spec.checkpoint.dir or events)
    sync = checkpoint.DirSync(client, task.workdir / TENSORBOARD_DIR, events, interval=every, push=True)
    sync.start()
    return sync


def start_uploads(task: ContainerTask, hdfs: Any, user: UserProcess, restored: int | None, resumed: bool) -> Uploads:
    """Phase 8 (the decider, with a checkpoint dir): upload checkpoints while the user code runs, and
    answer the AM's drain before a gang restart."""
    spec = task.spec
    assert spec.checkpoint.dir is not None  # hdfs is set only when it is
    sync = checkpoint.CheckpointSync(
        namenodes.pick(hdfs, spec.checkpoint.dir),
        task.workdir / spec.checkpoint.local_dir,
        spec.checkpoint.dir,
        keep=spec.checkpoint.keep,
        poll_interval=spec.checkpoint.poll_interval,
        window=spec.checkpoint.upload_failure_window,
        tag=task.upload_tag,
        # A warm start's steps belong to another run: ours count from scratch.
        start_after_step=restored if restored is not None and resumed else -1,
        on_event=task.event,
        on_fatal=user.fail,
        best=best_of(spec),
        metrics=lambda: latest_metrics(task.workdir / PROGRESS_FILE),
    )
    sync.start()
    drain_watch = DrainWatch(
        task.app,
        task.task_id,
        task.generation,
        sync,
        interval=C.DRAIN_POLL_S,
        timeout=C.DRAIN_UPLOAD_S,
        stop_training=lambda: user.stop(USER_STOP_S),
        progress_file=task.workdir / PROGRESS_FILE,
    )
    drain_watch.start()
    return Uploads(sync=sync, drain_watch=drain_watch)


def finish_uploads(task: ContainerTask, uploads: Uploads, code: int, tail: list[str]) -> tuple[int, list[str]]:
    """Phase 9: the last checkpoint upload after the user process exited (see :func:`after_final_flush`)."""
    if uploads.drain_watch.draining.is_set():  # stopped for a gang restart: the watch uploads and answers
        uploads.drain_watch.join(timeout=C.DRAIN_UPLOAD_S + USER_STOP_S)
    uploads.drain_watch.stop_event.set()  # the flush below is the last upload; the AM sees the exit record
    # A failed script's last complete checkpoint is worth saving too (bounded wait).
    window = task.spec.checkpoint.upload_failure_window
    window = window if code == 0 else min(30.0, window)
    flushed = uploads.sync.flush(timeout=window)
    sync = uploads.sync
    return after_final_flush(flushed, code, tail, task.spec.checkpoint.dir, sync.last_error, sync.refused)


def report_exit(task: ContainerTask, code: int, tail: list[str], used: Usage | None = None) -> None:
    """Phase 11: the exit record; it carries the last progress and the recent reports too, because the
    script's final report (its metrics) often lands after the last heartbeat, and what the user process used."""
    latest, recent = progress_api.read_all(task.workdir / PROGRESS_FILE)
    task.app.kv[C.kv_exit(task.task_id)] = ExitRecord(
        exit_code=code,
        stderr_tail=tail,
        time=time.time(),
        progress=latest,
        generation=task.generation,
        points=recent,
        usage=used,
    ).to_json()


def main() -> int:
    """The phases in order; each is a function above. Exits 0 whenever the exit could be reported."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    import skein

    env = dict(os.environ)
    task = identify(skein.ApplicationClient.from_current(), decode_spec(env[C.ENV_JOB_SPEC]), env, Path.cwd())
    spec = task.spec
    prepare_workdir(task)
    sock = reserve_port()
    host = env.get(C.ENV_NM_HOST) or socket.getfqdn()
    try:
        gpus = claim_gpus(task, host)
    except GpuLeaseError as exc:
        report_gpu_failure(task, exc)
        return 0
    port = sock.getsockname()[1]
    heartbeat = register(task, host, port, gpus)
    input_env = stage_inputs(task)
    if input_env is None:
        heartbeat.stop()
        return 0
    cluster = wait_for_cluster(task.app, task.task_id, task.generation)
    user_env = {**task_environment(task, cluster, port, gpus), **input_env}
    events = checkpoint.events_remote(spec, env.get(C.ENV_EVENTS_DIR), task.app_id) if task.is_decider else None
    # The process's clients, one per NameNode: checkpoints, a warm start and events may each be on another.
    wanted = (spec.checkpoint.dir or events) and task.clients.default() is not None
    hdfs = task.clients if wanted else None
    restored = restore(
        task.app, spec, hdfs, task.role, task.task_id, task.workdir / spec.checkpoint.local_dir, user_env
    )  # phase 6
    heartbeat.restored_step = restored
    user = start_user(task, user_env, sock, gpus, heartbeat)
    sampler = start_sampler(spec, task.role, user, user_env)  # phase 7a: what the user process uses
    heartbeat.usage = sampler.snapshot if sampler is not None else None
    resumed = user_env[C.ENV_RESTORED_KIND] == "resume"
    events_sync = start_events(task, hdfs, events)
    deciding = hdfs is not None and task.is_decider and spec.checkpoint.dir is not None
    uploads = start_uploads(task, hdfs, user, restored, resumed) if deciding else None
    code, tail = user.wait()
    log.info("%s user process exited with code %d", task.task_id, code)
    used = sampler.stop() if sampler is not None else None
    if events_sync is not None:
        events_sync.final()  # the last epoch's scalars, written just before the exit
    if uploads is not None:
        code, tail = finish_uploads(task, uploads, code, tail)
    if code == 0 and task.is_decider and spec.checkpoint.model_dir:  # phase 10
        code, tail = export_model(
            task.app, spec, task.workdir, env, task.task_id, code, tail, task.upload_tag, task.clients
        )
    heartbeat.stop()
    report_exit(task, code, tail, used)
    return 0


if __name__ == "__main__":
    sys.exit(main())
