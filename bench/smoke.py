#!/usr/bin/env python3
"""Every benchmark's smallest round, so that one that no longer runs fails CI, not its next user.

    python bench/smoke.py                 # all, on the cluster of `devcluster.py env`
    python bench/smoke.py --only tracking --only run

Why: a benchmark runs rarely (``make bench``, by hand before a release note), so the code it calls
changes under it unseen; ``bench/tracking.py`` once ended in an AttributeError for weeks while the
README quoted its figures. Each benchmark here runs as its own process with its smallest
arguments (one round, the smallest sizes); no figure is asserted. Its results go to a temporary
folder (``TONY_BENCH_RESULTS``), never over ``bench/results/``; that the files it writes appear
there is the proof it ran to the end. ``tests/integration/test_bench_smoke.py`` runs each one on
the open part's cluster.

Some benchmarks cannot run here and say so (``NOT_HERE``): ``node_loss.py`` needs the chaos
tests' four-node cluster and minutes per path (``tests/unit/repo/test_bench.py`` drives its code
paths with a stand-in client instead), and ``tf_yarn_peer.py`` needs tf-yarn's own venv and a
420 MiB pex (``run.py --smoke`` says it left tf-yarn out; its parsing of the peer's lines is
unit-tested); the two HA benchmarks need the HA profile, which ``make test-ha`` drives through
the same failovers. ``tests/unit/repo/test_bench.py`` fails when a file in ``bench/`` is in neither table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


@dataclass(frozen=True)
class Smoke:
    """One benchmark's smallest round: its arguments and the result files it must write."""

    script: str
    args: tuple[str, ...]
    writes: tuple[str, ...]
    timeout_s: float = 900.0


SMOKES: dict[str, Smoke] = {
    # Every section but tf-yarn's (run.py says why in its results); RUN_NOT_YET names any left out.
    "run": Smoke(
        "run.py",
        ("--smoke", "--only", "scale,startup,failure,resume,training,tracking"),
        ("latest.json", "latest.md"),
        timeout_s=1800.0,
    ),
    "tracking": Smoke("tracking.py", ("--smoke",), ("tracking.json", "tracking.md")),
    # Both sides are this checkout: the smoke proves the harness runs, not a comparison.
    "submit_time": Smoke(
        "submit_time.py",
        ("--before", str(REPO), "--rounds", "1", "--concurrent", "2"),
        ("submit_time.json", "submit_time.md"),
    ),
    "trust_checks": Smoke("trust_checks.py", ("--rounds", "1"), ("trust_checks.json", "trust_checks.md")),
    "hostile_job_files": Smoke(
        "hostile_job_files.py", ("--rounds", "1"), ("hostile_job_files.json", "hostile_job_files.md")
    ),
    "input_read": Smoke(
        "input_read.py",
        ("--mib", "2", "--files", "2", "--small", "4", "--repeat", "1"),
        ("input_read.json", "input_read.md"),
    ),
    "src_staging": Smoke("src_staging.py", ("--mib", "1", "--repeat", "1"), ("src_staging.json",)),
    "torch_ddp": Smoke("torch_ddp.py", ("--smoke",), ("torch_ddp.json", "torch_ddp.md")),
}

#: Benchmarks this smoke cannot run, and where their code paths are covered instead.
NOT_HERE: dict[str, str] = {
    "node_loss.py": "needs the chaos four-node cluster and minutes per path: tests/unit/repo/test_bench.py drives "
    "its main, job and one_run with a stand-in client and cluster",
    "tf_yarn_peer.py": "needs tf-yarn's own venv and a 420 MiB pex (bench/tf_yarn_setup.sh, minutes): "
    "run.py --smoke reports it left out; tests/unit/repo/test_bench.py checks its arguments parse",
    "ha_failover.py": "needs the HA profile (ten JVMs) and kills its active daemons: make test-ha's tests drive "
    "the same RM and NameNode failovers; tests/unit/repo/test_bench.py checks its arguments parse",
    "ha_cluster.py": "starts and stops the HA profile (minutes): make test-ha starts it the same way; "
    "tests/unit/repo/test_bench.py checks its arguments parse",
}

#: run.py's sections the smoke leaves out for now (printed on every run, never silently).
RUN_NOT_YET: dict[str, str] = {}

#: Modules of bench/ that are no benchmark: helpers, this file.
HELPERS = ("proctree.py", "smoke.py")


def smoke(name: str, results: Path) -> tuple[int, str]:
    """Run ``name``'s smallest round with its results in ``results``; (exit code, what went wrong)."""
    spec = SMOKES[name]
    results.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TONY_BENCH_RESULTS": str(results), "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, str(BENCH / spec.script), *spec.args]
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=spec.timeout_s)
    except subprocess.TimeoutExpired:
        return 124, f"{spec.script} ran past {spec.timeout_s:.0f} s"
    if proc.returncode != 0:
        return proc.returncode, f"{spec.script} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}"
    missing = [f for f in spec.writes if not (results / f).is_file()]
    if missing:
        return 1, f"{spec.script} exited 0 but did not write {', '.join(missing)}:\n{proc.stdout[-2000:]}"
    return 0, ""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(SMOKES), help="one benchmark (repeatable)")
    args = parser.parse_args(argv)
    failed = 0
    for script, why in NOT_HERE.items():
        print(f"smoke {script}: not run here: {why}", flush=True)
    for sections, why in RUN_NOT_YET.items():
        print(f"smoke run.py --only {sections}: left out: {why}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tony-bench-smoke-") as tmp:
        for name in args.only or list(SMOKES):
            started = time.monotonic()
            rc, why = smoke(name, Path(tmp) / name)
            took = time.monotonic() - started
            print(f"smoke {SMOKES[name].script}: {'ok' if rc == 0 else 'FAILED'} in {took:.0f} s", flush=True)
            if rc != 0:
                print(why, file=sys.stderr, flush=True)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
