"""The counting jobs (``jobs/count_steps.py``) that tests, test DAGs and ``bench/node_loss.py`` run.

One definition of each job, so that a DAG, a test that submits directly and
the benchmark cannot drift apart. It lives beside the test DAGs because a DAG
file can import only from its own folder (Airflow puts the DAG folder on
``sys.path``; the repository root is not there); tests and the benchmark
import it as ``tests.integration.dags.training_jobs``. Plain dictionaries:
``JobSpec.from_dict`` or ``TonyOperator(job=...)`` take them as they are.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

COUNT_STEPS = str(Path(__file__).resolve().parents[1] / "jobs" / "count_steps.py")
#: Real TensorFlow training under each strategy, resumable from its checkpoints (``--mode``).
STRATEGIES_SCRIPT = str(Path(__file__).resolve().parents[1] / "jobs" / "strategies.py")
#: Real PyTorch DDP training, resumable from its ``ckpt-<step>.pt`` checkpoints.
TORCH_DDP_SCRIPT = str(Path(__file__).resolve().parents[1] / "jobs" / "torch_ddp.py")

#: The node-loss job: one worker per unlabelled node (``spread`` over the chaos
#: cluster's three), so some node runs a worker but neither the AM nor worker:0
#: (the checkpoint uploader) whatever YARN does. STEPS * SLEEP keeps it training
#: long enough for a fault after the first checkpoint; EVERY bounds the steps a
#: restart redoes.
CHAOS_WORKERS, CHAOS_STEPS, CHAOS_EVERY, CHAOS_SLEEP = 3, 150, 10, 0.2

#: The resume job: S steps, a checkpoint every C, the first try dies after K.
RESUME_STEPS, RESUME_EVERY, RESUME_FAIL_AT = 60, 10, 35


def count_steps_job(
    args: list[str],
    *,
    instances: int = 1,
    placement: str | None = None,
    memory: str,
    heartbeat_interval: float,
    heartbeat_timeout: float,
    checkpoint: dict[str, Any],
    plain: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """A job of ``instances`` workers running count_steps.py with ``args`` under this interpreter.

    ``plain``: the workers count without TensorFlow, in its checkpoint layout (``count_steps.py --plain``).
    """
    args = [*args, "--plain"] if plain else args
    worker = {"instances": instances, "memory": memory, "script": COUNT_STEPS, "args": args}
    return {
        "roles": {"worker": {**worker, **({"placement": placement} if placement else {})}},
        "python": {"interpreter": sys.executable},
        "heartbeat_interval": heartbeat_interval,
        "heartbeat_timeout": heartbeat_timeout,
        "checkpoint": checkpoint,
        **extra,
    }


def chaos_job(max_restarts: int, ckpt: str | None = None, *, plain: bool = False, **extra: Any) -> dict[str, Any]:
    """The node-loss job; ``ckpt`` None leaves the checkpoint dir to the operator (a DAG's job).

    The tests run it ``plain`` (what they test is the AM's restart; real TensorFlow through a lost
    node is tests/chaos/test_strategies.py); bench/node_loss.py runs it with TensorFlow, whose
    start-up is part of the time a resume takes.
    """
    return count_steps_job(
        ["--steps", str(CHAOS_STEPS), "--every", str(CHAOS_EVERY), "--sleep", str(CHAOS_SLEEP)],
        instances=CHAOS_WORKERS,
        placement="spread",
        memory="1 GiB",
        heartbeat_interval=1.0,
        heartbeat_timeout=30,
        max_restarts=max_restarts,
        checkpoint={"poll_interval": 0.5, "keep": 20, **({"dir": ckpt} if ckpt else {})},
        plain=plain,
        **extra,
    )


def resume_job() -> dict[str, Any]:
    """One worker whose first try exits retryably after step RESUME_FAIL_AT."""
    return count_steps_job(
        ["--steps", str(RESUME_STEPS), "--every", str(RESUME_EVERY), "--fail-at", str(RESUME_FAIL_AT)],
        memory="1 GiB",
        heartbeat_interval=0.5,
        heartbeat_timeout=20,
        checkpoint={"poll_interval": 0.5},
    )


#: Real TensorFlow strategies that survive a lost node (``jobs/strategies.py``): the
#: steps, the checkpoint interval, the decider that uploads, and the roles of each mode.
#: Workers are spread one per unlabelled node, so a node with a worker but neither the AM
#: nor the uploader always exists.
STRATEGY_STEPS, STRATEGY_EVERY = 150, 10
STRATEGY_MODES: dict[str, tuple[str, dict[str, int]]] = {
    "mwms-loop": ("worker:0", {"worker": 3}),
    "keras-fit": ("worker:0", {"worker": 3}),
    "ps": ("chief:0", {"chief": 1, "worker": 3, "ps": 1}),
}


def strategy_job(
    mode: str, max_restarts: int, ckpt: str | None = None, model_dir: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A ``mode`` job (see STRATEGY_MODES); ``ckpt`` None leaves the checkpoint dir to the operator."""
    args = ["--mode", mode, "--steps", str(STRATEGY_STEPS), "--every", str(STRATEGY_EVERY), "--sleep", "0.2"]
    roles = {
        role: {
            "instances": instances,
            "memory": "1 GiB",
            "script": STRATEGIES_SCRIPT,
            "args": args,
            **({"placement": "spread"} if role == "worker" else {}),
        }
        for role, instances in STRATEGY_MODES[mode][1].items()
    }
    return {"name": f"strategy-{mode}", "roles": roles, **_restartable(max_restarts, ckpt, model_dir), **extra}


def _restartable(max_restarts: int, ckpt: str | None, model_dir: str | None) -> dict[str, Any]:
    """What the node-loss jobs share: quick loss detection, ``max_restarts``, checkpoints polled often."""
    checkpoint: dict[str, Any] = {"poll_interval": 0.5, "keep": 20}
    checkpoint.update({"dir": ckpt} if ckpt else {})
    checkpoint.update({"model_dir": model_dir} if model_dir else {})
    return {
        "python": {"interpreter": sys.executable},
        "heartbeat_interval": 1.0,
        "heartbeat_timeout": 15,
        "registration_timeout": 240,
        "max_restarts": max_restarts,
        "checkpoint": checkpoint,
    }


#: The PyTorch node-loss job (``jobs/torch_ddp.py``): three DDP ranks spread one per unlabelled
#: node, so a node runs a rank but neither the AM nor worker:0 (rank 0, which saves the checkpoints
#: and whose executor uploads them). TORCH_STEPS * TORCH_STEP_SECONDS keeps it training long
#: enough for a node loss after the first checkpoint; TORCH_EVERY bounds the steps a resume redoes.
TORCH_STEPS, TORCH_EVERY, TORCH_STEP_SECONDS = 150, 10, 0.3


def torch_job(max_restarts: int, ckpt: str | None = None, model_dir: str | None = None, **extra: Any) -> dict[str, Any]:
    """The PyTorch DDP node-loss job; ``ckpt`` None leaves the checkpoint dir to the operator (a DAG's job)."""
    args = ["--steps", str(TORCH_STEPS), "--every", str(TORCH_EVERY), "--step-seconds", str(TORCH_STEP_SECONDS)]
    return {
        "name": "torch-ddp",
        "framework": "pytorch",
        # torch and a gloo process group take about 1 GiB per rank, and rank 0's TensorBoard writer at the
        # end (torch.utils.tensorboard) pushes it past that: YARN killed a 1 GiB rank 0 for its memory there
        "roles": {
            "worker": {
                "instances": 3,
                "memory": "2 GiB",
                "script": TORCH_DDP_SCRIPT,
                "args": args,
                "placement": "spread",
            }
        },
        **_restartable(max_restarts, ckpt, model_dir),
        **extra,
    }
