#!/usr/bin/env python3
"""PyTorch DDP throughput of two ranks three ways in one run: through TonY, by hand, on bare YARN.

    python bench/torch_ddp.py [--rounds 3] [--steps 300] [--smoke]

The job is ``tests/integration/jobs/torch_ddp.py`` (gloo on CPU; every step all-gathers a
checksum of the parameters, rank 0 checkpoints every ``--every`` steps), 2 ranks:

(a) ``tony``: ``TonyClient.submit`` of a ``framework: pytorch`` job of 2 workers on the local
    cluster: the AM's rendezvous sets ``MASTER_ADDR``/``MASTER_PORT``/``RANK``/``WORLD_SIZE``;
(b) ``by_hand``: the same two processes started here with those variables set by hand, no YARN:
    the floor;
(c) ``bare_yarn``: the same two processes as the services of a bare skein application (no TonY
    AM, no executor), the variables hand-set in each service's script: what YARN costs alone.

Only the training loop is timed, by the script itself (steps after the first, checksums and
checkpoints included); start-up is apart: from the launch (``submit`` for (a) and (c), the
``Popen`` for (b)) to rank 0's first step (its wall clock, ``TORCH_DDP_FIRST_STEP_WALL``). Each
round runs the three back to back, the order rotating, each on a quiet machine (``run.py``'s
``quiet_machine``); ratios are taken per round, so drift on the shared machine hits every side
alike. Nothing is asserted. Writes ``bench/results/torch_ddp.json`` and ``.md``
(``$TONY_BENCH_RESULTS`` instead when set); needs the cluster's environment
(``eval "$(make -s cluster-env)"``). ``--smoke`` (``bench/smoke.py``): one round of a few tiny steps.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import run as harness  # noqa: E402  (quiet_machine, stats, wait, _free_port: one copy of each)

from airflow_provider_tony.runtime.spec import JobSpec  # noqa: E402
from airflow_provider_tony.yarn.client import TonyClient  # noqa: E402

RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or REPO / "bench" / "results")
SCRIPT = REPO / "tests" / "integration" / "jobs" / "torch_ddp.py"
PY = sys.executable
WAYS = ("tony", "by_hand", "bare_yarn")
#: Per rank, on both YARN sides: a CPU torch process with gloo uses about 1.3 GiB (1 GiB was killed).
MEMORY = "2 GiB"
#: Steps between progress reports of the job (see ``job_args``).
REPORT_EVERY = 10
RATE_RE = re.compile(r"TORCH_DDP_STEPS_PER_S=([\d.]+)")
FIRST_RE = re.compile(r"TORCH_DDP_FIRST_STEP_WALL=([\d.]+)")


@dataclass(frozen=True)
class Run:
    """One run of the job: rank 0's training-loop rate and its start-up."""

    steps_per_s: float
    startup_s: float  # launch -> rank 0's first step


def job_args(steps: int, hidden: int, batch: int, every: int) -> list[str]:
    # Progress every REPORT_EVERY steps, as training scripts report (per log interval): a report
    # per step at this model's tens of steps a second costs the TonY side a share of its
    # throughput that the other two, without a progress file, never pay.
    return [
        "--steps", str(steps), "--every", str(every), "--hidden", str(hidden), "--batch", str(batch),
        "--report-every", str(REPORT_EVERY),
    ]  # fmt: skip


def parse_output(text: str, launched: float, what: str) -> Run:
    """Rank 0's figures from its stdout (``launched``: the wall clock of the launch)."""
    rate, first = RATE_RE.findall(text), FIRST_RE.findall(text)
    if not rate or not first:
        raise RuntimeError(f"no throughput from the {what}:\n{text[-3000:]}")
    return Run(float(rate[-1]), float(first[-1]) - launched)


def rank_env(rank: int, port: int) -> dict[str, str]:
    """What TonY's PyTorch rendezvous sets for a rank, by hand (one node: rank 0 on 127.0.0.1)."""
    return {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "0",
        "PYTHONPATH": str(REPO),
        "TONY_CHECKPOINT_DIR": "checkpoints",
        "TONY_MODEL_DIR": "model",
    }


def by_hand(args: list[str]) -> Run:
    """Two local processes, each in a folder of its own (its checkpoints and model): the floor."""
    port = harness._free_port()
    with tempfile.TemporaryDirectory(prefix="bench-torch-hand-") as tmp:
        launched = time.time()
        procs = []
        for rank in range(2):
            cwd = Path(tmp, f"rank{rank}")
            cwd.mkdir()
            procs.append(
                subprocess.Popen(
                    [PY, str(SCRIPT), *args],
                    cwd=cwd,
                    env={**os.environ, **rank_env(rank, port)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        outs = [p.communicate(timeout=900)[0] for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(f"by hand: exit codes {[p.returncode for p in procs]}:\n{outs[0][-2000:]}")
        return parse_output(outs[0], launched, "by-hand run")


def on_bare_yarn(client: TonyClient, args: list[str]) -> Run:
    """The same two processes as the services of a bare skein application, variables hand-set.

    The single-node cluster shares this machine's file system, so rank 0 writes its output
    where this process reads it.
    """
    import skein

    port = harness._free_port()
    with tempfile.TemporaryDirectory(prefix="bench-torch-bare-") as tmp:
        services = {}
        for rank in range(2):
            exports = "; ".join(f"export {k}={shlex.quote(v)}" for k, v in rank_env(rank, port).items())
            command = shlex.join([PY, str(SCRIPT), *args])
            services[f"rank{rank}"] = skein.Service(
                resources=skein.Resources(memory=MEMORY, vcores=1),
                script=f"{exports}; {command} > {shlex.quote(f'{tmp}/out-{rank}')} 2>&1",
            )
        spec = skein.ApplicationSpec(
            name="bench-bare-torch-ddp", queue="default", tags=["tony-bench"], services=services
        )
        launched = time.time()
        app_id = client.submitter().submit(spec)
        try:
            rep = harness.wait(
                lambda: not (r := client.report(app_id)).active and r, 900, f"{app_id} to end", interval=0.5
            )
        except TimeoutError:
            client.kill(app_id)
            raise
        out = Path(f"{tmp}/out-0").read_text() if Path(f"{tmp}/out-0").exists() else ""
        if rep.final_status != "SUCCEEDED":
            raise RuntimeError(f"bare skein {app_id} ended {rep.final_status}: {rep.diagnostics}\n{out[-2000:]}")
        return parse_output(out, launched, f"bare skein application {app_id}")


def via_tony(client: TonyClient, args: list[str]) -> Run:
    """``TonyClient.submit`` of a ``framework: pytorch`` job; rank 0's figures from its last report."""
    spec = JobSpec.from_dict(
        {
            "name": "bench-torch-ddp",
            "framework": "pytorch",
            "roles": {"worker": {"instances": 2, "memory": MEMORY, "vcores": 1, "script": str(SCRIPT), "args": args}},
            "python": {"interpreter": PY},
            "success_policy": "all_workers",
            "heartbeat_timeout": 60,
            "tags": ["tony-bench"],
        }
    )
    launched = time.time()
    app_id = client.submit(spec)
    result = client.wait(app_id, poll_interval=0.5, emit=lambda _line: None)
    task = result.am_state.task("worker:0") if result.am_state is not None else None
    metrics = task.progress.metrics if task is not None and task.progress is not None else {}
    if not result.succeeded or not metrics.get("train_steps_per_s"):
        raise RuntimeError(f"TonY job {app_id} ended {result.final_status}: {result.diagnostics}; {metrics}")
    return Run(float(metrics["train_steps_per_s"]), float(metrics["first_step_wall"]) - launched)


def rounds_of(arms: dict[str, Callable[[], Run]], rounds: int) -> dict[str, list[Run]]:
    """``rounds`` of every arm back to back, the order rotating each round, each on a quiet machine."""
    names = list(arms)
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            harness.quiet_machine()
            runs[name].append(arms[name]())
            print(f"  round {i + 1} {name}: {runs[name][-1]}", flush=True)
    return runs


def summary(runs: dict[str, list[Run]], batch: int) -> dict[str, Any]:
    """Per way: steps/s, samples/s (both ranks) and start-up; per-round ratios against by hand and bare YARN."""
    out: dict[str, Any] = {}
    for name, done in runs.items():
        rates = [r.steps_per_s for r in done]
        out[name] = {
            "steps_per_s": harness.stats(rates),
            "samples_per_s": harness.stats([r * batch * 2 for r in rates]),
            "startup_s": harness.stats([r.startup_s for r in done]),
            "runs": [asdict(r) for r in done],
        }

    def ratio(top: str, bottom: str) -> dict[str, Any]:
        return harness.stats([a.steps_per_s / b.steps_per_s for a, b in zip(runs[top], runs[bottom], strict=True)])

    out["ratio_tony_over_by_hand"] = ratio("tony", "by_hand")
    out["ratio_bare_yarn_over_by_hand"] = ratio("bare_yarn", "by_hand")
    out["ratio_tony_over_bare_yarn"] = ratio("tony", "bare_yarn")
    return out


LABELS = {
    "tony": "(a) TonY: `TonyClient.submit`, `framework: pytorch`",
    "by_hand": "(b) by hand: 2 local processes, variables hand-set",
    "bare_yarn": "(c) bare YARN: 2 skein services, variables hand-set",
}


def markdown(r: dict[str, Any]) -> str:
    def cell(s: dict[str, Any]) -> str:
        return f"{s['median']} ({s['min']}-{s['max']})" if s.get("n") else "n/a"

    lines = [
        "# PyTorch DDP throughput: TonY, by hand, bare YARN (bench/torch_ddp.py)",
        "",
        f"`tests/integration/jobs/torch_ddp.py {' '.join(r['args'])}`, 2 ranks (gloo, CPU), {r['rounds']} rounds"
        f" of the three ways back to back, the order rotating; {r['machine']}, torch {r['torch']},"
        f" {r['date']}; load average at the end {r['load_average']} (other work shared the machine)."
        " Training: rank 0's steps/s after its first step (checksum all-gather and checkpoints included);"
        " samples/s counts both ranks. Start-up: launch (submit, or the processes' start) to rank 0's first step."
        " Median (min-max). The job reports progress every"
        f" {REPORT_EVERY} steps; only the TonY side has a progress file to write (a report per step, at"
        " this model's tens of steps a second, cost that side about a third of its rate in an earlier run).",
        "",
        "| way | steps/s | samples/s | start-up s |",
        "|---|---|---|---|",
    ]
    for name in WAYS:
        row = r[name]
        lines.append(
            f"| {LABELS[name]} | {cell(row['steps_per_s'])} | {cell(row['samples_per_s'])} | {cell(row['startup_s'])} |"
        )
    lines += [
        "",
        "Per-round ratios of steps/s, median (min-max):",
        "",
        f"- TonY / by hand: {cell(r['ratio_tony_over_by_hand'])}",
        f"- bare YARN / by hand: {cell(r['ratio_bare_yarn_over_by_hand'])}",
        f"- TonY / bare YARN: {cell(r['ratio_tony_over_bare_yarn'])}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--every", type=int, default=100, help="rank 0 checkpoints every K steps")
    p.add_argument("--smoke", action="store_true", help="one round of a few tiny steps: does it still run?")
    a = p.parse_args(argv)
    if a.smoke:
        harness.SMOKE = True  # quiet_machine does not wait
        a.rounds, a.steps, a.hidden, a.batch, a.every = 1, 4, 16, 32, 2
    args = job_args(a.steps, a.hidden, a.batch, a.every)
    import torch

    with TonyClient.from_env() as client:
        arms: dict[str, Callable[[], Run]] = {
            "tony": lambda: via_tony(client, args),
            "by_hand": lambda: by_hand(args),
            "bare_yarn": lambda: on_bare_yarn(client, args),
        }
        runs = rounds_of(arms, a.rounds)
    out = {
        "args": args,
        "rounds": a.rounds,
        **summary(runs, a.batch),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "load_average": [round(x, 1) for x in os.getloadavg()],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "torch_ddp.json").write_text(json.dumps(out, indent=2) + "\n")
    (RESULTS / "torch_ddp.md").write_text(markdown(out))
    print(markdown(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
