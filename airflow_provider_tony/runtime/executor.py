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

The phases are here; what they use lives in modules of one purpose each:
``executor_kv.py`` (every read and write of the store shared with the AM: the
slot, heartbeats, the cluster spec, the drain, events), ``gpu_claim.py`` (the
container's GPUs), ``user_env.py`` (the user process's environment),
``user_process.py`` (its port, stderr and exit code), ``task_checkpoints.py``
(what a task resumes from, what its last upload means for its exit) and
``model_export.py`` (the model published to HDFS). This module re-exports the
names callers and tests import from it.

    python -m airflow_provider_tony.runtime.executor
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import checkpoint, hdfs_io, inputs, namenodes, priority, usage, workspace
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import progress as progress_api
from airflow_provider_tony.runtime.errors import GpuLeaseError, InputTooLarge
from airflow_provider_tony.runtime.executor_kv import BEATS_PER_POINT as BEATS_PER_POINT
from airflow_provider_tony.runtime.executor_kv import (
    DrainWatch,
    HeartbeatSender,
    find_slot,
    report_event,
    wait_for_cluster,
)
from airflow_provider_tony.runtime.executor_kv import task_identity as task_identity
from airflow_provider_tony.runtime.frameworks import holds_port
from airflow_provider_tony.runtime.gpu import discover_local_gpus, parse_visible_devices
from airflow_provider_tony.runtime.gpu_claim import GPU_LEASE_EXIT_CODE as GPU_LEASE_EXIT_CODE
from airflow_provider_tony.runtime.gpu_claim import Gpus, gpu_lease_exit, take_gpus
from airflow_provider_tony.runtime.messages import ClusterDocument, ExitRecord, Registration, Usage
from airflow_provider_tony.runtime.model_export import export_model
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.task_checkpoints import after_final_flush, best_of, latest_metrics, restore
from airflow_provider_tony.runtime.transport import decode_spec
from airflow_provider_tony.runtime.user_env import MODEL_DIR as MODEL_DIR
from airflow_provider_tony.runtime.user_env import (
    PROGRESS_FILE,
    TENSORBOARD_DIR,
    local_environments,
    source_links,
    user_environment,
)
from airflow_provider_tony.runtime.user_process import STDERR_TAIL_LINES as STDERR_TAIL_LINES
from airflow_provider_tony.runtime.user_process import USER_STOP_S, UserProcess, reserve_port

log = logging.getLogger("tony.executor")
EVENTS_SYNC_S = 5.0  # the shortest interval between two mirrorings of the TensorBoard events to HDFS


def start_sampler(spec: JobSpec, role: str, user: UserProcess, user_env: dict[str, str]) -> usage.UsageSampler | None:
    """The training processes' trees' peak memory, CPU and GPU use, sampled beside them (None if none started)."""
    if not user.pids:
        return None
    sampler = usage.UsageSampler(
        user.pids,
        visible_gpus=user_env.get(C.ENV_CUDA_VISIBLE_DEVICES),
        want_gpus=spec.roles[role].gpus > 0,
        env=user_env,
    )
    sampler.start()
    return sampler


@dataclasses.dataclass(frozen=True)
class ContainerTask:
    """Who this container is, learnt once at start-up and passed to every phase of :func:`main`
    (the AM's record of a task is ``task_records.TaskRecord``)."""

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
    task: ContainerTask,
    user_envs: list[dict[str, str]],
    sock: socket.socket,
    gpus: Gpus,
    heartbeat: HeartbeatSender,
) -> UserProcess:
    """Phase 7: release the port and start the user's code, one process per environment (a PyTorch job's
    ``nproc_per_node``: local ranks 0..n-1); the AM counts its start-up from the next beat.

    The processes share the container's progress file; by convention local rank 0 reports
    (``tests/integration/jobs/torch_ddp.py`` does), as one report per container is what the AM shows.
    """
    role = task.spec.roles[task.role]
    argv = workspace.task_argv(role, task.spec.python.python_command() or sys.executable)
    program = role.script or role.module or argv[0]
    log.info(
        "%s starting %s in %d process(es) (CUDA_VISIBLE_DEVICES=%r)",
        task.task_id,
        program,
        len(user_envs),
        user_envs[0].get(C.ENV_CUDA_VISIBLE_DEVICES),
    )
    user = UserProcess(
        argv,
        user_envs,
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


def report_exit(
    task: ContainerTask, code: int, tail: list[str], used: Usage | None = None, checkpoint_step: int | None = None
) -> None:
    """Phase 11: the exit record; it carries the last progress and the recent reports too, because the
    script's final report (its metrics) often lands after the last heartbeat, what the user process used,
    and the uploader's newest checkpoint on HDFS (a restart's drain may find this record, not an answer)."""
    latest, recent = progress_api.read_all(task.workdir / PROGRESS_FILE)
    task.app.kv[C.kv_exit(task.task_id)] = ExitRecord(
        exit_code=code,
        stderr_tail=tail,
        time=time.time(),
        progress=latest,
        generation=task.generation,
        points=recent,
        usage=used,
        checkpoint_step=checkpoint_step,
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
    user_envs = local_environments(spec, task.role, task.index, cluster, user_env)
    user = start_user(task, user_envs, sock, gpus, heartbeat)
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
    report_exit(task, code, tail, used, uploads.sync.newest_uploaded() if uploads is not None else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
