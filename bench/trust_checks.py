"""What the trust-boundary checks (issue 27) cost: submit-side and page-side, this code vs another.

    python bench/trust_checks.py [--before <checkout>] [--rounds 20]

Each measurement runs in a fresh Python process per side (``PYTHONPATH`` put
first on the side's checkout), alternating sides, and reports the median:

* ``runtime_zip_ms``: ``runtime_zip_path()`` once the zip exists (the submit's
  cost; now a private-folder check and a hash of the existing file);
* ``hdfs_cache_ms``: ``stage_archive`` of a 1 MiB archive already on HDFS (now
  with the cache folder's and the file's owner/mode checks) on the local cluster;
* ``parse_state_ms``: ``parse_state`` of a 64-task state document (each task with
  16 metrics and 5 stderr lines), as the follower reads it on every poll;
* ``page_ms``: ``render_page`` of a 16-task history with 500 points per task;
* ``am_round_*_cpu_ms``: the AM's CPU per heartbeat round for 100 and 1000 tasks
  (``bench/run.py``'s ``scale`` section: every message built, so capped, on each beat).

Writes ``bench/results/trust_checks.json`` and ``.md``; needs the local
cluster's environment (``eval "$(make -s cluster-env)"``) for ``hdfs_cache_ms``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or HERE / "results") / "trust_checks.json"

# Runs in the child: one sample of every measurement, printed as JSON.
CHILD = r"""
import json, os, statistics, sys, tempfile, time
import httpx

def ms(fn, n):
    fn()  # warm: the first call may create what later ones reuse
    t = []
    for _ in range(n):
        s = time.perf_counter(); fn(); t.append((time.perf_counter() - s) * 1000)
    return statistics.median(t)

out = {}
from airflow_provider_tony.yarn import appspec
out["runtime_zip_ms"] = ms(appspec.runtime_zip_path, 5)

from airflow_provider_tony.runtime.messages import JobHistory, Progress, StateDocument, TaskSummary
from airflow_provider_tony.yarn import http as web
tasks = {
    f"worker:{i}": TaskSummary(
        state="RUNNING", role="worker", index=i, host=f"node{i % 8}.example.com", port=4000 + i,
        container_id=f"container_1_0001_01_{i:06d}", stderr_tail=[f"line {k} " * 8 for k in range(5)],
        progress=Progress(step=100, epoch=2, total_steps=1000, time=1.0, metrics={f"m{k}": k / 3 for k in range(16)}),
    )
    for i in range(64)
}
doc = StateDocument(
    application_id="application_1_0001", app_state="RUNNING", tasks=tasks, events=["checkpoint 10"] * 50
)
body = doc.to_json()
resp = httpx.Response(200, content=body, headers={"content-type": "application/json"},
                      request=httpx.Request("GET", "http://x/"))
out["parse_state_ms"] = ms(lambda: web.parse_state(resp), 20)
out["state_bytes"] = len(body)

from airflow_provider_tony.runtime.page import render_page
hist = JobHistory(
    state=StateDocument(application_id="application_1_0001", tasks={k: v for k, v in list(tasks.items())[:16]}),
    metrics={f"worker:{i}": [Progress(step=s, metrics={"loss": 1 / (s + 1), "acc": s / 500}) for s in range(500)]
             for i in range(16)},
)
out["page_ms"] = ms(lambda: render_page(hist, now_wall=time.time()), 5)

# The AM's side: its bookkeeping per heartbeat round (every message built and capped), from run.py's scale section.
import importlib.util
spec = importlib.util.spec_from_file_location("bench_run", os.environ["TONY_BENCH_RUN"])
bench_run = importlib.util.module_from_spec(spec); spec.loader.exec_module(bench_run)
scale = bench_run.bench_scale()
out["am_round_100_tasks_cpu_ms"] = scale["100_tasks"]["cpu_ms_per_heartbeat_round"]
out["am_round_1000_tasks_cpu_ms"] = scale["1000_tasks"]["cpu_ms_per_heartbeat_round"]

if os.environ.get("TONY_WEBHDFS_URL"):
    from airflow_provider_tony.yarn.client import TonyClient
    archive = os.path.join(tempfile.gettempdir(), "tony-bench-trust-env.tar.gz")
    if not os.path.exists(archive):
        with open(archive, "wb") as fh:
            fh.write(os.urandom(1 << 20))
    with TonyClient.from_env() as client:
        client.stage_archive(archive)  # uploaded once, by either side
        out["hdfs_cache_ms"] = ms(lambda: TonyClient.from_env().stage_archive(archive), 5)
print(json.dumps(out))
"""


def sample(checkout: Path) -> dict[str, float]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{checkout}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "TONY_BENCH_RUN": str(HERE / "run.py"),  # this checkout's harness, the side's code under it
    }
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    sides = {"after": HERE.parent} | ({"before": args.before.resolve()} if args.before else {})
    got: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for _ in range(args.rounds):
        for side, checkout in sides.items():
            got[side].append(sample(checkout))
    medians = {
        side: {k: round(statistics.median(s[k] for s in samples), 3) for k in samples[0]}
        for side, samples in got.items()
    }
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
        "python": platform.python_version(),
        "rounds": args.rounds,
        "before": str(args.before) if args.before else None,
        "median": medians,
    }
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    keys = list(medians["after"])
    lines = [
        f"# Trust-boundary checks: cost ({result['date']}, {result['machine']}, {args.rounds} rounds)",
        "",
        "| measurement | " + " | ".join(sides) + " |",
        "|---|" + "---|" * len(sides),
        *(f"| {k} | " + " | ".join(str(medians[s].get(k, "-")) for s in sides) + " |" for k in keys),
        "",
    ]
    RESULTS.with_suffix(".md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
