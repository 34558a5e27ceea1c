"""A PyTorch DDP job with a custom loop, written as a torchrun user writes one, for the PyTorch tests.

    torch_ddp.py [--steps N] [--every K] [--step-seconds S] [--fail-rank R --fail-at STEP]
                 [--exit-code C] [--hidden H] [--batch B] [--report-every K]

``init_process_group("env://")`` from the variables the runtime sets (gloo on CPU, NCCL where
the process sees a GPU, the process's GPU chosen by ``LOCAL_RANK``). Each step trains a small
classifier on this rank's own synthetic batch; DDP averages the gradients, so every rank must
hold the same parameters after the step. The proof is a checksum of the parameters that every
rank all-gathers and compares after each step: a rank that disagrees fails the job (exit 3),
and each rank reports the steps it checked, the last checksum and the step it resumed from
(``progress``, in every report: the AM keeps the latest only).

Checkpoints: global rank 0 saves ``$TONY_CHECKPOINT_DIR/ckpt-<step>.pt`` every K steps (written
under a temporary name, then renamed); on start it loads the newest one there (the executor
restored it from HDFS), and DDP's constructor hands its parameters to every rank, the start step
goes out by broadcast. At the end rank 0 saves the model to ``$TONY_MODEL_DIR/model.pt``, writes
TensorBoard events through ``torch.utils.tensorboard`` and reports ``accuracy`` for a quality gate.

Throughput (``bench/torch_ddp.py`` reads it): the loop's steps after the first are timed (the first
builds DDP's buckets and warms the collectives, start-up rather than training), checksum checks and
checkpoints included; rank 0 prints ``TORCH_DDP_STEPS_PER_S=`` and ``TORCH_DDP_FIRST_STEP_WALL=``
(the wall clock when its first step began, so a launcher can time start-up apart) and every rank
reports ``train_steps_per_s``, ``train_samples_per_s`` (all ranks' samples) and ``first_step_wall``.

``--fail-rank R --fail-at STEP`` makes global rank R raise a ValueError at that step, on the first
try only (``TONY_ATTEMPT`` 1) unless ``--every-attempt``: a bug of the script's own, or, with
``--exit-code``, an exit with that code instead. ``--step-seconds`` paces the steps, so a test
has time to kill a node mid-job.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from airflow_provider_tony.runtime import progress

FEATURES, CLASSES = 16, 4
CKPT_RE = re.compile(r"^ckpt-(\d+)\.pt$")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--every", type=int, default=5, help="checkpoint every K steps (0: never)")
    p.add_argument("--step-seconds", type=float, default=0.0)
    p.add_argument("--report-every", type=int, default=1, help="report progress every K steps (and the last)")
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--fail-at", type=int, default=-1)
    p.add_argument("--exit-code", type=int, default=0)
    p.add_argument("--every-attempt", action="store_true")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--batch", type=int, default=64)
    return p.parse_args(argv)


def _truth() -> torch.Tensor:
    """The rule the classifier learns: the same on every rank (a fixed seed), so accuracy means something."""
    return torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(1234))


def _batch(rank: int, step: int, size: int, truth: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's own batch for ``step``: different on every rank, the same on a retry."""
    gen = torch.Generator().manual_seed(rank * 1_000_003 + step)
    x = torch.randn(size, FEATURES, generator=gen)
    return x, (x @ truth).argmax(dim=1)


def checksum(model: nn.Module) -> str:
    """A digest of every parameter's bytes: equal only when the ranks hold the same model."""
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def _newest(folder: Path) -> tuple[int, Path] | None:
    found = [(int(m.group(1)), p) for p in folder.glob("ckpt-*.pt") if (m := CKPT_RE.match(p.name))]
    return max(found) if found else None


def _save(model: nn.Module, step: int, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".ckpt-{step}.pt.tmp"
    torch.save({"step": step, "model": model.state_dict()}, tmp)
    os.replace(tmp, folder / f"ckpt-{step}.pt")


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    dist.init_process_group("nccl" if cuda else "gloo", init_method="env://", timeout=timedelta(seconds=120))

    torch.manual_seed(rank)  # different initial weights per rank: DDP's broadcast must make them one
    model = nn.Sequential(nn.Linear(FEATURES, args.hidden), nn.ReLU(), nn.Linear(args.hidden, CLASSES))
    ckpt_dir = Path(os.environ.get("TONY_CHECKPOINT_DIR", "checkpoints"))
    start = 0
    if rank == 0 and (newest := _newest(ckpt_dir)) is not None:
        state = torch.load(newest[1], map_location="cpu")
        model.load_state_dict(state["model"])
        start = int(state["step"])
    model.to(device)
    start_t = torch.tensor([start], dtype=torch.int64, device=device)
    dist.broadcast(start_t, src=0)
    start = int(start_t.item())
    ddp = DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)  # broadcasts rank 0's
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.2)  # stateless: the model alone is the checkpoint
    loss_fn = nn.CrossEntropyLoss()
    truth = _truth()
    attempt = os.environ.get("TONY_ATTEMPT", "1")
    checked, last_sum, loss = 0, checksum(model), float("nan")
    first_step_wall: float | None = None
    timed_from: float | None = None  # perf_counter at the end of the first step run here
    if local_rank == 0:  # the progress file is the container's: one process reports (nproc_per_node)
        progress.report(step=start, resumed_from=start, rank=rank, world=world, host=socket.gethostname())

    for step in range(start + 1, args.steps + 1):
        if first_step_wall is None:
            first_step_wall = time.time()
        if rank == args.fail_rank and step == args.fail_at and (args.every_attempt or attempt == "1"):
            if args.exit_code:
                print(f"torch_ddp: rank {rank} exits with {args.exit_code} at step {step}", file=sys.stderr)
                return args.exit_code
            raise ValueError(f"torch_ddp: a bug of the script's own at step {step} on rank {rank}")
        x, y = _batch(rank, step, args.batch, truth)
        optimizer.zero_grad()
        out = loss_fn(ddp(x.to(device)), y.to(device))
        out.backward()
        optimizer.step()
        loss = float(out.item())
        last_sum = checksum(model)
        sums: list[str | None] = [None] * world
        dist.all_gather_object(sums, last_sum)
        if len(set(sums)) != 1:
            print(f"torch_ddp: ranks disagree after step {step}: {sums}", file=sys.stderr)
            return 3
        checked += 1
        if rank == 0 and args.every and step % args.every == 0:
            _save(model, step, ckpt_dir)
        if local_rank == 0 and (step % args.report_every == 0 or step == args.steps):
            progress.report(
                step=step, loss=loss, checksum=last_sum, checked=checked, resumed_from=start, rank=rank, world=world
            )
        if args.step_seconds:
            time.sleep(args.step_seconds)  # pacing, so a test can act mid-job
        if timed_from is None:
            timed_from = time.perf_counter()
    rate = _throughput(timed_from, checked - 1)
    if rank == 0:
        print(f"TORCH_DDP_FIRST_STEP_WALL={first_step_wall}", flush=True)
        print(f"TORCH_DDP_STEPS_PER_S={rate}", flush=True)

    accuracy = _accuracy(model, truth, device)
    if rank == 0:
        model_dir = Path(os.environ.get("TONY_MODEL_DIR", "model"))
        model_dir.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), model_dir / "model.pt")
        _tensorboard(loss, accuracy, args.steps)
    if local_rank == 0:
        progress.report(
            step=args.steps,
            loss=loss,
            accuracy=accuracy,
            checksum=last_sum,
            checked=checked,
            resumed_from=start,
            rank=rank,
            world=world,
            train_steps_per_s=rate,
            train_samples_per_s=rate * args.batch * world if rate else None,
            first_step_wall=first_step_wall,
        )
    dist.destroy_process_group()
    return 0


def _throughput(timed_from: float | None, steps: int) -> float | None:
    """Steps per second since the end of the first step (None when fewer than two steps ran here)."""
    if timed_from is None or steps < 1:
        return None
    return steps / (time.perf_counter() - timed_from)


def _accuracy(model: nn.Module, truth: torch.Tensor, device: torch.device) -> float:
    x, y = _batch(10_000, 0, 2048, truth)  # held out: a rank no job has
    with torch.no_grad():
        return float((model(x.to(device)).argmax(dim=1).cpu() == y).float().mean().item())


def _tensorboard(loss: float, accuracy: float, step: int) -> None:
    folder = os.environ.get("TONY_TENSORBOARD_DIR")
    if not folder:
        return
    from torch.utils.tensorboard import SummaryWriter

    with SummaryWriter(folder) as writer:
        writer.add_scalar("loss", loss, step)
        writer.add_scalar("accuracy", accuracy, step)


if __name__ == "__main__":
    sys.exit(main())
