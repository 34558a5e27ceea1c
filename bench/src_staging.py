"""Packing and staging time of a source tree (``JobSpec.src_dir``), first and second submit.

    python bench/src_staging.py [--mib 50] [--repeat 3]

Builds a tree of about ``--mib`` MiB in a temporary folder (Python modules,
text data and some incompressible binary assets, four fifths text), then
calls ``TonyClient.stage_source`` twice per round: the first uploads (packing
included), the second finds the archive on HDFS by its content hash. Each
round changes one byte so that its first call is really a first. Writes
``bench/results/src_staging.json``; needs the local cluster's environment
(``eval "$(make -s cluster-env)"``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

from airflow_provider_tony.yarn.client import TonyClient

RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or Path(__file__).parent / "results") / "src_staging.json"


def make_tree(root: Path, mib: int, seed: int = 7) -> int:
    """About ``mib`` MiB: 4/5 text (modules, csv) and 1/5 random bytes, in nested packages."""
    rng = random.Random(seed)
    target, written, i = mib * 2**20, 0, 0
    words = [f"name{j}" for j in range(500)]
    while written < target:
        pkg = root / f"pkg{i % 20}" / f"sub{i % 7}"
        pkg.mkdir(parents=True, exist_ok=True)
        if i % 5 == 4:
            data = rng.randbytes(200_000)
            path = pkg / f"asset{i}.bin"
        else:
            lines = [
                f"def f{k}({rng.choice(words)}, {rng.choice(words)}):\n    return {rng.random():.6f}\n"
                for k in range(2500)
            ]
            data = "".join(lines).encode()
            path = pkg / f"mod{i}.py"
        path.write_bytes(data)
        written += len(data)
        i += 1
    return written


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=50)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    rows = []
    with TonyClient.from_env() as client, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        size = make_tree(root, args.mib)
        for r in range(args.repeat):
            (root / "round.txt").write_text(f"{r} {time.time()}")  # a new tree each round
            t0 = time.perf_counter()
            first = client.stage_source(str(root))
            t1 = time.perf_counter()
            second = client.stage_source(str(root))
            t2 = time.perf_counter()
            assert first.uploaded and not second.uploaded and first.url == second.url
            rows.append(
                {
                    "first_s": round(t1 - t0, 3),
                    "first_scan_hash_s": round(first.scan_s, 3),
                    "first_pack_s": round(first.pack_s, 3),
                    "first_upload_s": round(first.upload_s, 3),
                    "second_s": round(t2 - t1, 3),
                    "archive_bytes": client.hdfs().status("/" + first.url.split("://", 1)[1].split("/", 1)[1])[
                        "length"
                    ],
                }
            )
            print(rows[-1], flush=True)
    doc = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "tree_bytes": size,
        "rounds": rows,
        "median_first_s": statistics.median(r["first_s"] for r in rows),
        "median_second_s": statistics.median(r["second_s"] for r in rows),
    }
    RESULTS.write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: v for k, v in doc.items() if k != "rounds"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
