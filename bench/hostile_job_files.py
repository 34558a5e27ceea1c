"""How long ``tony validate`` takes on the hostile job files of issue 35's review (point 10).

    python bench/hostile_job_files.py [--rounds 3]

Each file (10^7 and 10^23 instances, 3,000 long args, 5,000 nested brackets, a
1.6 KB alias bomb, a repeated key) is written to a temporary folder and
validated by a fresh ``python -m airflow_provider_tony validate FILE`` process,
``--rounds`` times; reported per file: the median wall time of the whole
process (interpreter start included), and of ``cli.main`` in-process, and the
line the command printed. Writes ``bench/results/hostile_job_files.json`` and ``.md``.
No cluster needed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")


def hostile_files() -> dict[str, str]:
    """The review's kinds of file, by name."""
    bomb = ["a: &a ['lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol', 'lol']"]
    for i in range(1, 9):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        bomb.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    bomb.append("roles: {worker: {command: *i}}")
    args = ", ".join(f"'--arg-{i}={'x' * 110}'" for i in range(3000))
    return {
        "instances_1e7": "roles: {worker: {instances: 10000000, command: ['true']}}\n",
        "instances_1e23": "roles: {worker: {instances: 100000000000000000000000, command: ['true']}}\n",
        "args_3000": f"roles: {{worker: {{script: /opt/t.py, args: [{args}]}}}}\n",
        "brackets_5000": "roles: {worker: {command: " + "[" * 5000 + "]" * 5000 + "}}\n",
        "alias_bomb": "\n".join(bomb) + "\n",
        "repeated_key": "queue: a\nroles: {worker: {command: ['true']}}\nqueue: b\n",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from airflow_provider_tony import cli

    out: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in hostile_files().items():
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(text)
            process, inline = [], []
            line = ""
            for _ in range(args.rounds):
                start = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-m", "airflow_provider_tony", "validate", str(path)],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                process.append(time.perf_counter() - start)
                line = (
                    (proc.stderr or proc.stdout).strip().splitlines()[-1][:200] if (proc.stderr or proc.stdout) else ""
                )
                start = time.perf_counter()
                with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                    cli.main(["validate", str(path)])
                inline.append(time.perf_counter() - start)
            out[name] = {
                "bytes": len(text.encode()),
                "process_s": round(statistics.median(process), 3),
                "in_process_s": round(statistics.median(inline), 4),
                "exit": proc.returncode,
                "said": line.replace(tmp, "<tmp>"),
            }
    RESULTS.mkdir(exist_ok=True)
    meta = {"python": platform.python_version(), "machine": platform.machine(), "rounds": args.rounds}
    (RESULTS / "hostile_job_files.json").write_text(json.dumps({"meta": meta, "files": out}, indent=2) + "\n")
    rows = [
        "| file | bytes | `tony validate` (process) | `cli.main` | exit | said |",
        "|---|---|---|---|---|---|",
    ]
    rows += [
        f"| {n} | {r['bytes']} | {r['process_s']} s | {r['in_process_s']} s | {r['exit']} | {r['said']} |"
        for n, r in out.items()
    ]
    (RESULTS / "hostile_job_files.md").write_text(
        "# Hostile job files (issue 35, point 10)\n\n" + "\n".join(rows) + "\n"
    )
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
