"""Who the processes of a PyTorch job are, as torch itself sees them (``nproc_per_node``'s proof).

Every process joins the process group from the runtime's variables (``env://``, gloo) and
all-gathers what it is: its global rank, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``,
its container's task id, its host and pid. Local rank 0 of each container reports the gathered
world (``progress``: one report per container, the file being the container's), so a test sees
from every container that torch counted the same distinct processes.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import timedelta

import torch.distributed as dist

from airflow_provider_tony.runtime import progress


def main() -> int:
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=120))
    me = {
        "rank": dist.get_rank(),
        "local_rank": int(os.environ["LOCAL_RANK"]),
        "local_world_size": int(os.environ["LOCAL_WORLD_SIZE"]),
        "group_rank": int(os.environ["GROUP_RANK"]),
        "task": os.environ.get("TONY_TASK_ID"),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    world: list[dict[str, object] | None] = [None] * dist.get_world_size()
    dist.all_gather_object(world, me)
    if me["local_rank"] == 0:
        progress.report(step=1, me=json.dumps(me), world=json.dumps(world), world_size=dist.get_world_size())
    dist.barrier()  # no process leaves before every one has gathered
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
