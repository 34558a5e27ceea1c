"""A torchrun-style launch on real YARN: ``nproc_per_node`` processes in each PyTorch container.

Real torch decides: the processes join one gloo process group from the runtime's variables, so a
wrong numbering (two processes with one rank, a world that does not add up, the store on the
wrong port) hangs or fails ``init_process_group`` instead of passing. Each container runs two
processes; torch's memory (its import alone holds most of a GiB resident, which YARN counts per
process) sizes the containers at 3 GiB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration._runtime import job, run

pytestmark = pytest.mark.cluster

JOBS = Path(__file__).parent / "jobs"
TORCH_WORKERS = {"instances": 2, "memory": "3 GiB", "vcores": 2}


def _torch_job(python: str, script: str, *args: str) -> Any:
    return job(
        python,
        {"worker": {**TORCH_WORKERS, "script": str(JOBS / script), "args": list(args)}},
        framework="pytorch",
        nproc_per_node=2,
        success_policy="all_workers",
        registration_timeout=300,
    )


def test_two_processes_in_each_of_two_containers_are_four_ranks_to_torch(tony_client, app_tag, python_exe) -> None:
    """torch's own all_gather, seen from each container's local rank 0: ranks 0..3, four distinct
    processes, LOCAL_RANK 0 and 1 in each container, container g holding global ranks 2g and 2g+1."""
    result = run(tony_client, _torch_job(python_exe, "torch_ranks.py"), app_tag)
    assert result.succeeded, result.diagnostics
    reports = {t: result.am_state.tasks[t].progress.metrics for t in ("worker:0", "worker:1")}
    worlds = [json.loads(m["world"]) for m in reports.values()]
    assert worlds[0] == worlds[1], "both containers gathered the same world"
    world = worlds[0]
    assert [p["rank"] for p in world] == [0, 1, 2, 3] and {m["world_size"] for m in reports.values()} == {4}
    assert len({(p["host"], p["pid"]) for p in world}) == 4, "four distinct processes"
    by_task = {t: [(p["local_rank"], p["rank"], p["group_rank"]) for p in world if p["task"] == t] for t in reports}
    assert by_task == {"worker:0": [(0, 0, 0), (1, 1, 0)], "worker:1": [(0, 2, 1), (1, 3, 1)]}
    assert {p["local_world_size"] for p in world} == {2}
    assert {t: json.loads(m["me"])["local_rank"] for t, m in reports.items()} == {"worker:0": 0, "worker:1": 0}


def test_ddp_over_two_processes_per_container_keeps_every_rank_in_step(tony_client, app_tag, python_exe) -> None:
    """tests/integration/jobs/torch_ddp.py with 2 x 2 processes: every step's all-gathered parameter
    checksum agrees on the four ranks (the job exits 3 otherwise), each container checked all steps."""
    steps = 6
    result = run(tony_client, _torch_job(python_exe, "torch_ddp.py", "--steps", str(steps), "--every", "0"), app_tag)
    assert result.succeeded, result.diagnostics
    for task in ("worker:0", "worker:1"):
        metrics = result.am_state.tasks[task].progress.metrics
        assert metrics["checked"] == steps and metrics["world"] == 4, (task, metrics)
    # Local rank 0 of each container reports: global ranks 0 and 2.
    assert [result.am_state.tasks[t].progress.metrics["rank"] for t in ("worker:0", "worker:1")] == [0, 2]


def test_a_failed_process_ends_its_container_with_its_code_and_labelled_tail(tony_client, app_tag, python_exe) -> None:
    """Global rank 1 (worker:0's local rank 1) exits 4 at step 2: torchrun's semantics stop its
    container's other process, and the job's diagnostics carry rank 1's code and its own line."""
    args = ["--steps", "6", "--every", "0", "--fail-rank", "1", "--fail-at", "2", "--exit-code", "4"]
    spec = _torch_job(python_exe, "torch_ddp.py", *args)
    result = run(tony_client, spec, app_tag)
    assert not result.succeeded
    for needle in ("worker:0", "code 4", "[local_rank 1] torch_ddp: rank 1 exits with 4 at step 2"):
        assert needle in result.diagnostics, (needle, result.diagnostics)
