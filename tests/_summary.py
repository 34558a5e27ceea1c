"""``make test``'s closing lines and its time report (``tests/conftest.py`` writes each part's file).

    python -m tests._summary unit open secure chaos
    python -m tests._summary --times bench/results/test_times unit open secure chaos

The lines say how many tests each part ran. ``--times PREFIX`` also writes ``PREFIX.json`` and
``PREFIX.md``: seconds per part (its pytest session, and the whole ``make test`` when the
Makefile left its start time in ``started``), seconds per test file, and the slowest tests named
with what each proves (the first line of its docstring). Why: CI has a time limit, and knowing
where the suite's time goes is what lets it stay under it while it proves more.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import PARTS_DIR

REPO = Path(__file__).resolve().parents[1]
#: How many of the slowest tests the report names.
SLOWEST = 30


def _load(part: str) -> dict[str, Any] | None:
    path = PARTS_DIR / f"{part}.json"
    return json.loads(path.read_text()) if path.exists() else None  # type: ignore[no-any-return]


def line(part: str) -> str:
    c = _load(part)
    if c is None:
        return f"  {part:<7} no result: its pytest did not run to the end (cluster start-up failed?)"
    ran = c["passed"] + c["failed"]
    wall = f", {c['wall_s']:.0f} s" if "wall_s" in c else ""
    return (
        f"  {part:<7} {ran} ran: {c['passed']} passed, {c['failed']} failed, {c['error']} errors,"
        f" {c['skipped']} skipped (pytest exit {c['exit_status']}{wall})"
    )


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def _make_test_wall() -> float | None:
    """Seconds since the Makefile's ``test`` recipe wrote its start (epoch seconds) to ``started``."""
    started = PARTS_DIR / "started"
    try:
        return round(time.time() - float(started.read_text().strip()), 1)
    except (OSError, ValueError):
        return None


def report(parts: list[str]) -> dict[str, Any]:
    """The time report of the parts that left a file (a part that did not is listed with no figures)."""
    doc: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": _commit(),
        "machine": f"{os.cpu_count()} CPUs, {platform.machine()}",
        "load_average_1m_at_end": round(os.getloadavg()[0], 1),
        "make_test_wall_s": _make_test_wall(),
        "parts": {},
        "slowest": [],
        "files": {},
        "tests": {},
    }
    slow: list[tuple[float, str, str, str]] = []
    for part in parts:
        c = _load(part)
        if c is None:
            doc["parts"][part] = {"result": "none: its pytest did not run to the end"}
            continue
        doc["parts"][part] = {
            "wall_s": c.get("wall_s"),
            "ran": c["passed"] + c["failed"],
            **{k: c[k] for k in ("passed", "failed", "error", "skipped", "exit_status")},
        }
        doc["files"][part] = {f: {"tests": n, "seconds": s} for f, (n, s) in c.get("files", {}).items()}
        doc["tests"][part] = c.get("tests", {})
        slow += [(s, n, part, c.get("proves", {}).get(n, "")) for n, s in c.get("tests", {}).items()]
    slow.sort(key=lambda row: -row[0])
    doc["slowest"] = [{"seconds": s, "part": p, "test": n, "proves": what} for s, n, p, what in slow[:SLOWEST]]
    return doc


def markdown(doc: dict[str, Any]) -> str:
    total = doc["make_test_wall_s"]
    lines = [
        f"# Where `make test`'s time goes ({doc['date']}, {doc['commit']}, {doc['machine']},"
        f" load average {doc['load_average_1m_at_end']} at the end)",
        "",
        f"`make test` wall: {total:.0f} s ({total / 60:.1f} min); the parts run side by side (docs/development.md)."
        if total is not None
        else "`make test` wall: not recorded (the parts' pytest runs alone).",
        "",
        "| part | tests ran | passed | failed | errors | skipped | pytest wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    for part, p in doc["parts"].items():
        if "ran" not in p:
            lines.append(f"| {part} | {p['result']} | | | | | |")
            continue
        lines.append(
            f"| {part} | {p['ran']} | {p['passed']} | {p['failed']} | {p['error']} | {p['skipped']} | {p['wall_s']} |"
        )
    lines += ["", f"## The {len(doc['slowest'])} slowest tests (set-up, call and teardown)", ""]
    lines += ["| s | part | test | what it proves |", "|---|---|---|---|"]
    for row in doc["slowest"]:
        proves = row["proves"].replace("|", "\\|")
        lines.append(f"| {row['seconds']:.1f} | {row['part']} | `{row['test']}` | {proves} |")
    lines += ["", "## Seconds per test file", "", "| part | file | tests | s |", "|---|---|---|---|"]
    for part, files in doc["files"].items():
        for f, v in sorted(files.items(), key=lambda kv: -kv[1]["seconds"]):
            lines.append(f"| {part} | `{f}` | {v['tests']} | {v['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def write_times(prefix: Path, parts: list[str]) -> None:
    doc = report(parts)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{prefix}.json").write_text(json.dumps(doc, indent=1) + "\n")
    Path(f"{prefix}.md").write_text(markdown(doc))
    print(f"time report: {prefix}.json and .md")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--times", type=Path, help="write the time report to TIMES.json and TIMES.md")
    parser.add_argument("parts", nargs="+")
    args = parser.parse_args(argv)
    print("tests per part of make test:")
    for part in args.parts:
        print(line(part))
    if args.times is not None:
        write_times(args.times, args.parts)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
