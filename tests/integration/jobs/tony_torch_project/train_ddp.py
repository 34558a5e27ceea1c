"""A PyTorch training script written for TonY, run unchanged: its process group meets through
TonY's ``INIT_METHOD`` (``tcp://host:port``), ``RANK`` and ``WORLD``, as TonY's PyTorch examples do.

    train_ddp.py [--steps N] [--batch_size N] [--lr F]

No data set is downloaded: each rank draws its own synthetic batches of a fixed linear rule.
DistributedDataParallel averages the gradients, so both ranks end with the same parameters; the
script all-reduces ``rank + 1`` (3 with two ranks) and reports it with a checksum of its
parameters, so a test sees that the ranks met and trained one model.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description="PyTorch DDP on synthetic data, TonY style")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    return p.parse_args()


def batch(rank: int, step: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rank * 7919 + step)
    x = torch.randn(size, 8, generator=gen)
    truth = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8
    return x, x @ truth


def main() -> int:
    args = parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD"])
    dist.init_process_group(backend="gloo", init_method=os.environ["INIT_METHOD"], rank=rank, world_size=world)
    torch.manual_seed(rank)  # different weights per rank until DDP broadcasts rank 0's
    model = DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss = torch.tensor(float("nan"))
    for step in range(args.steps):
        x, y = batch(rank, step, args.batch_size)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    met = torch.tensor([rank + 1.0])
    dist.all_reduce(met)
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
    print(f"rank {rank} of {world}: loss {loss.item():.4f}, all-reduce {met.item()}, params {digest}", flush=True)
    try:
        from airflow_provider_tony.runtime import progress
    except ImportError:  # under TonY itself: the print above is the report
        progress = None
    if progress is not None:
        progress.report(
            step=args.steps,
            loss=float(loss.item()),
            rank=rank,
            world=world,
            all_reduce=float(met.item()),
            params=digest,
            init_method=os.environ["INIT_METHOD"],
        )
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
