"""Train a small PyTorch classifier on a day's digits partition with DistributedDataParallel.

Runs as every worker of a ``framework: pytorch`` TonY job: ``init_process_group("env://")``
reads the ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE`` the runtime sets (gloo on CPU).
The job ships this folder as its ``src_dir``, so ``tfrecords.py`` and ``digits_data.py`` import
from beside it.

    --epochs N --steps-per-epoch N --batch-size N --hidden N --learning-rate F --partition S
    --input NAME --eval-input NAME

With ``--input`` the training data is the job's HDFS input of that name as the executor staged
it (under ``sharding: shard`` each rank has only its own ``train/`` files), read by
``tfrecords.py`` without TensorFlow: the partition ``digits_data.py`` writes for the TensorFlow
job, unchanged. ``--eval-input`` is the held-out file every rank evaluates on. Without them the
digits come from scikit-learn, shuffled by ``--partition`` (a run outside a DAG).

Each step draws this rank's own batch from its shard (a seed per rank and step: the same on a
resumed run); DDP averages the gradients. Rank 0 saves ``ckpt-<step>.pt`` to
``$TONY_CHECKPOINT_DIR`` after every epoch (a temporary name, then a rename) and resumes from
the newest one there (the executor restored it from HDFS on a retry); DDP's constructor hands
rank 0's parameters to every rank. At the end rank 0 saves ``model.pt`` (the ``state_dict`` of
``build_model(hidden)``, with ``model.json`` naming the width) to ``$TONY_MODEL_DIR`` and reports
``accuracy`` on the held-out file for the quality gate.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

FEATURES, CLASSES = 64, 10
CKPT_RE = re.compile(r"^ckpt-(\d+)\.pt$")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=25)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--partition", default="all", help="data partition label (e.g. a date); any text")
    p.add_argument("--input", default=None, help="the job input to train on (TFRecords staged by TonY)")
    p.add_argument("--eval-input", default=None, help="the job input to evaluate on (with --input)")
    return p.parse_args(argv)


def build_model(hidden: int) -> Any:
    """The classifier; a reader of ``model.pt`` builds it with ``model.json``'s ``hidden``."""
    from torch import nn

    return nn.Sequential(nn.Linear(FEATURES, hidden), nn.ReLU(), nn.Linear(hidden, CLASSES))


def staged_arrays(name: str) -> tuple[Any, Any, list[str]]:
    """The staged TFRecords of job input ``name`` as (x, y) arrays, and the files' names."""
    import numpy as np
    from tfrecords import examples

    from airflow_provider_tony.runtime import inputs

    files = inputs.files(name)
    rows = list(examples(files))
    x = np.asarray([r["x"] for r in rows], dtype="float32").reshape(-1, FEATURES)
    y = np.asarray([r["y"][0] for r in rows], dtype="int64")
    return x, y, [os.path.basename(f) for f in files]


def sklearn_arrays(partition: str) -> tuple[Any, Any, Any, Any]:
    """Digits from scikit-learn, shuffled by the partition label: train and held-out (x, y)."""
    from digits_data import EVAL_SHARE, _digits

    x, y = _digits(partition, degrade=False)
    split = int(len(x) * (1 - EVAL_SHARE))
    return x[:split], y[:split], x[split:], y[split:]


def _newest(folder: Path) -> tuple[int, Path] | None:
    found = [(int(m.group(1)), p) for p in folder.glob("ckpt-*.pt") if (m := CKPT_RE.match(p.name))]
    return max(found) if found else None


def _save_checkpoint(model: Any, step: int, folder: Path) -> None:
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".ckpt-{step}.pt.tmp"
    torch.save({"step": step, "model": model.state_dict()}, tmp)
    os.replace(tmp, folder / f"ckpt-{step}.pt")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from airflow_provider_tony.runtime import progress

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=120))
    data: dict[str, Any] = {}
    if args.input:
        x, y, names = staged_arrays(args.input)
        x_eval, y_eval, _ = staged_arrays(args.eval_input or args.input)
        data = {"input_files": ",".join(names), "input_records": len(y), "eval_records": len(y_eval)}
        print(f"rank {rank}: training on {len(y)} records of {args.input} ({', '.join(names)})", flush=True)
    else:
        x, y, x_eval, y_eval = sklearn_arrays(args.partition)
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y)

    torch.manual_seed(rank)  # different initial weights per rank: DDP's broadcast makes them one
    model = build_model(args.hidden)
    ckpt_dir = Path(os.environ.get("TONY_CHECKPOINT_DIR", "checkpoints"))
    start = 0
    if rank == 0 and (newest := _newest(ckpt_dir)) is not None:
        model.load_state_dict(torch.load(newest[1], map_location="cpu")["model"])
        start = newest[0]
        print(f"resumed from {newest[1].name}", flush=True)
    start_t = torch.tensor([start], dtype=torch.int64)
    dist.broadcast(start_t, src=0)
    start = int(start_t.item())
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=args.learning_rate)  # stateless: the model is the checkpoint
    loss_fn = torch.nn.CrossEntropyLoss()
    total = args.epochs * args.steps_per_epoch
    loss = float("nan")
    for step in range(start + 1, total + 1):
        pick = torch.randint(
            len(y_t), (args.batch_size,), generator=torch.Generator().manual_seed(rank * 100_003 + step)
        )
        optimizer.zero_grad()
        out = loss_fn(ddp(x_t[pick]), y_t[pick])
        out.backward()
        optimizer.step()
        loss = float(out.item())
        if step % args.steps_per_epoch == 0:
            if rank == 0:
                _save_checkpoint(model, step, ckpt_dir)
            progress.report(step=step, epoch=step // args.steps_per_epoch, total_steps=total, loss=loss)

    with torch.no_grad():
        predicted = model(torch.from_numpy(x_eval)).argmax(dim=1)
    accuracy = float((predicted == torch.from_numpy(y_eval)).float().mean().item())
    print(f"rank {rank}: accuracy={accuracy:.4f} loss={loss:.4f}", flush=True)
    if rank == 0:
        model_dir = Path(os.environ.get("TONY_MODEL_DIR", "model"))
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), model_dir / "model.pt")
        (model_dir / "model.json").write_text(json.dumps({"hidden": args.hidden, "features": FEATURES}))
    progress.report(
        step=total,
        epoch=args.epochs,
        total_steps=total,
        loss=loss,
        accuracy=accuracy,
        partition=args.partition,
        rank=rank,
        world=world,
        resumed_from=start,
        **data,
    )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
