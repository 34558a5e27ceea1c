"""``make mutate``: mutation testing of the modules whose logic decides outcomes.

mutmut (configured in ``pyproject.toml``, ``[tool.mutmut]``) copies the
package into ``mutants/``, records which unit tests reach which function, then
runs each mutant in a fork with only those tests. This script chooses the
mutants (whole modules, or the functions named in :data:`SCOPE` where only part
of a module decides outcomes), runs them, and writes the score per module and
every surviving mutant to ``bench/results/mutation.{json,md}``.

``--only runtime/gate.py`` (repeatable) runs the named modules alone: on a
shared two-core machine a run of every module takes too long to repeat for
one module's new tests. The report then *merges*: the named modules' figures
are replaced, every other module keeps the figures (and the commit and date)
of the run that last measured it, so each row says when it was measured.

A survivor is either killed by a better test or explained in
``bench/mutation_notes.toml`` (``"mutant name" = "why no test can or should
kill it"``); the report shows the note beside the mutant, and lists notes whose
mutant no longer exists (renumbered after an edit) so they do not go stale
silently. Mutant names number the mutations of one function in order, so an
edit to a function renumbers its mutants: rerun and re-check its notes.

    python scripts/mutate.py [--max-children N] [--only MODULE ...] [--report-only | --survivors]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
NOTES = REPO / "bench" / "mutation_notes.toml"
PACKAGE = "airflow_provider_tony"
#: The score every listed module must reach (killed / all mutants in scope).
GOAL = 0.90

#: module -> mutant-name patterns in scope (``*``: the whole module).
SCOPE: dict[str, list[str]] = {
    # The job tracker, in its layers: records, ledger, failure policy, JobTracker (restarts, reporting).
    "runtime/state.py": ["*"],
    "runtime/task_records.py": ["*"],
    "runtime/task_ledger.py": ["*"],
    "runtime/failure_policy.py": ["*"],
    "runtime/checkpoint.py": ["*"],
    # The exit mapping: what code the AM sees for each way a task ends (the executor's helpers).
    "runtime/user_process.py": ["xǁUserProcessǁwait__mutmut_*"],
    "runtime/task_checkpoints.py": ["x_after_final_flush__mutmut_*"],
    "runtime/gpu_claim.py": ["x_gpu_lease_exit__mutmut_*"],
    "yarn/follower.py": ["*"],
    # Re-attach (submit or follow an existing application) and the result (XCom, failure, retry).
    "operators/tony.py": [
        f"xǁTonyOperatorǁ{name}__mutmut_*"
        for name in (
            "_existing",
            "submit_job",
            "get_job_status",
            "is_job_active",
            "is_job_succeeded",
            "get_job_result",
            "execute_complete",
        )
    ],
    # What follows a job's end (issue 39): the conclusion, and how the operator concludes and tells it.
    "conclusion.py": ["*"],
    "operators/concluding.py": [
        f"xǁConcludingǁ{name}__mutmut_*" for name in ("ended_result", "_concluded", "_finish", "_xcom_result")
    ],
    "operators/outcome.py": ["*"],
    # Every function that puts a value from a task into the page (escaping), not the CSS.
    "runtime/page.py": [
        f"x_{name}__mutmut_*" for name in ("_e", "_tasks_table", "_task_links", "_list", "_chart", "render_page")
    ],
    "yarn/source.py": ["*"],
    # The outcome modules written last (issue 41): what is retried, published, pruned, dealt, staged.
    "runtime/failure.py": ["*"],
    "runtime/gate.py": ["*"],
    "retention.py": ["*"],
    # ``tony gc``: its options. mutmut leaves decorated functions alone, so ``gc`` itself (under
    # ``@command``) has no mutants until its body moves to an undecorated helper; what it decides is
    # retention.py's scan/plan/remove, in scope above.
    "cli.py": ["x__gc_arguments__mutmut_*"],
    "runtime/inputs.py": ["*"],
    "runtime/token_refresh.py": ["*"],
    "lineage.py": ["*"],
    "runtime/usage.py": ["*"],
    "runtime/gpu.py": ["*"],
    "yarn/rest.py": ["*"],
    "yarn/submit.py": ["*"],
    # The sweep's decisions: the median-stopping rule, the trials' ranking, the deadline alert's test-run check.
    "runtime/median_stop.py": ["*"],
    "sweep_ranking.py": ["*"],
    "alerts.py": ["*"],
}


def module_name(rel: str) -> str:
    return f"{PACKAGE}." + rel.removesuffix(".py").replace("/", ".")


def patterns(modules: list[str]) -> list[str]:
    return [f"{module_name(rel)}.{pattern}" for rel in modules for pattern in SCOPE[rel]]


def in_scope(rel: str, mutant: str) -> bool:
    local = mutant.removeprefix(module_name(rel) + ".")
    return any(fnmatch.fnmatchcase(local, pattern) for pattern in SCOPE[rel])


def survivors(modules: list[str]) -> list[str]:
    """The in-scope mutants of ``modules`` not killed in the last run (what ``--survivors`` runs again)."""
    names = []
    for rel in modules:
        meta = REPO / "mutants" / PACKAGE / f"{rel}.meta"
        codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
        names += [name for name, code in codes.items() if in_scope(rel, name) and code not in (1, 3)]
    return sorted(names)


def run_mutmut(max_children: int, names: list[str]) -> float:
    """mutmut over ``names`` (patterns or mutants); returns the wall time in seconds."""
    started = time.monotonic()
    cmd = [str(Path(sys.executable).parent / "mutmut"), "run", "--max-children", str(max_children), *names]
    with open(REPO / "mutants-run.log", "w") as log:
        proc = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        sys.exit(f"mutmut failed ({proc.returncode}); see mutants-run.log")
    return time.monotonic() - started


def _diff(name: str, path: Path) -> str:
    """The mutated lines only (mutmut's diff is the whole function)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    try:
        diff = get_diff_for_mutant(name, path=path)
    except Exception as exc:  # noqa: BLE001 - a report without one diff is still a report
        return f"(no diff: {exc})"
    return "\n".join(line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))


def collect(selected: list[str]) -> dict[str, Any]:
    """The figures of the ``selected`` modules as ``mutants/`` holds them (their ``.meta`` files)."""
    os.chdir(REPO)  # mutmut reads its configuration and mutants/ from the working directory
    from mutmut.stats import status_by_exit_code

    notes = tomllib.loads(NOTES.read_text()) if NOTES.exists() else {}
    modules: dict[str, Any] = {}
    seen: set[str] = set()
    for rel in selected:
        meta = REPO / "mutants" / PACKAGE / f"{rel}.meta"
        if not meta.exists():  # not measured here (yet): the previous report's entry stays
            continue
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        left = [name for name, code in codes.items() if code is None and in_scope(rel, name)]
        if left:  # a run stopped part way: a partial score would mislead, the previous entry stays
            print(f"{rel}: {len(left)} mutants not run yet; left out of the report (run it again to finish)")
            continue
        counts: dict[str, int] = {}
        survivors = []
        for name, code in sorted(codes.items()):
            if not in_scope(rel, name):
                continue
            seen.add(name)
            status = status_by_exit_code[code]
            counts[status] = counts.get(status, 0) + 1
            if status not in ("killed", "timeout"):
                survivors.append(
                    {
                        "mutant": name,
                        "status": status,
                        "diff": _diff(name, Path(PACKAGE) / rel),
                        "note": notes.get(name, ""),
                    }
                )
        total = sum(counts.values())
        killed = counts.get("killed", 0) + counts.get("timeout", 0)
        justified = sum(1 for s in survivors if s["note"])
        modules[rel] = {
            "mutants": total,
            "killed": killed,
            "by_status": counts,
            "score": round(killed / total, 4) if total else None,
            "justified": justified,
            "score_with_justified": round((killed + justified) / total, 4) if total else None,
            "survivors": survivors,
        }
    return {"modules": modules, "notes": notes, "seen": seen}


def merge(previous: dict[str, Any], fresh: dict[str, Any], stamp: dict[str, Any] | None) -> dict[str, Any]:
    """The report: ``fresh``'s modules over ``previous``'s, in :data:`SCOPE`'s order.

    A fresh module gets ``stamp`` (the commit and date it was measured at;
    None keeps its previous stamp: a report rewritten without a run). A module
    this run did not measure keeps its previous entry, stamp and stale notes
    (an entry from before modules were stamped gets the previous report's).
    """
    old = previous.get("modules", {})
    legacy = {key: previous.get(key) for key in ("commit", "when")}
    modules: dict[str, Any] = {}
    for rel in SCOPE:
        if rel in fresh["modules"]:
            kept = {key: old.get(rel, legacy).get(key) for key in ("commit", "when")}
            modules[rel] = fresh["modules"][rel] | (stamp or kept)
        elif rel in old:
            modules[rel] = {**legacy, **old[rel]}

    def owner(name: str) -> str | None:
        return next((rel for rel in SCOPE if name.startswith(module_name(rel) + ".")), None)

    stale = [n for n in fresh["notes"] if owner(n) in fresh["modules"] and n not in fresh["seen"]]
    stale += [n for n in fresh["notes"] if owner(n) is None]
    stale += [n for n in previous.get("stale_notes", []) if owner(n) in modules and owner(n) not in fresh["modules"]]
    return {"modules": modules, "stale_notes": sorted(set(stale))}


def write_report(report: dict[str, Any]) -> bool:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mutation.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    lines = [
        "# Mutation testing (`make mutate`)",
        "",
        f"mutmut {report.get('mutmut_version', '?')} over the unit tests listed in `pyproject.toml`"
        f" (`[tool.mutmut]`); scope in `scripts/mutate.py`. Last timed run"
        f" ({len(report.get('run_modules') or [])} of {len(SCOPE)} modules): {report.get('when', '?')}"
        f" at commit {report.get('commit', '?')},"
        f" {report.get('wall_s', '?')} s wall with {report.get('max_children', '?')} worker(s)"
        f" on {report.get('cpus', '?')} CPUs (load average before: {report.get('load_before', '?')});"
        " `--survivors` reruns after it are not timed. Each row names the commit and date it was measured at"
        " (`--only` measures some modules and keeps the others' rows).",
        "A timeout counts as killed (the mutant hangs the code, and the test run says so).",
        "",
        "| module | mutants | killed | survived (+ no tests) | score | explained | score with explained | measured |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ok = True
    for rel, m in report["modules"].items():
        score = m["score_with_justified"]
        explained = m["justified"] == len(m["survivors"])
        ok = ok and m["score"] is not None and m["score"] >= GOAL and explained
        lines.append(
            f"| `{rel}` | {m['mutants']} | {m['killed']} | {m['mutants'] - m['killed']} |"
            f" {100 * (m['score'] or 0):.1f}% | {m['justified']} | {100 * (score or 0):.1f}% |"
            f" {m.get('commit') or '?'}, {m.get('when') or '?'} |"
        )
    missing = [rel for rel in SCOPE if rel not in report["modules"]]
    lines += [f"| `{rel}` | not measured yet | | | | | | |" for rel in missing]
    ok = ok and not missing
    lines += [
        "",
        f"Goal: at least {100 * GOAL:.0f}% of the mutants killed in each module, and every survivor explained"
        f" (`bench/mutation_notes.toml`). {'Met.' if ok else 'NOT met.'}",
        "",
    ]
    for rel, m in report["modules"].items():
        if not m["survivors"]:
            continue
        lines += [f"## `{rel}`: survivors", ""]
        for s in m["survivors"]:
            lines.append(f"- `{s['mutant']}` ({s['status']}): {s['note'] or '**not explained**'}")
            lines += ["  ```diff", *[f"  {line}" for line in s["diff"].splitlines()], "  ```"]
        lines.append("")
    if report["stale_notes"]:
        lines += ["## Notes whose mutant no longer exists (renumbered: re-check)", ""]
        lines += [f"- `{name}`" for name in report["stale_notes"]] + [""]
    (RESULTS / "mutation.md").write_text("\n".join(lines))
    return ok


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--max-children", type=int, default=1, help="mutants tested at once (default 1: the machine is shared)"
    )
    p.add_argument(
        "--only",
        action="append",
        choices=list(SCOPE),
        metavar="MODULE",
        help="run only this module of the scope (repeatable; the report keeps the other modules' figures)",
    )
    p.add_argument("--report-only", action="store_true", help="rewrite the report from mutants/ without running")
    p.add_argument(
        "--survivors",
        action="store_true",
        help="run only the mutants the last run did not kill (after adding tests); keeps the full run's time",
    )
    args = p.parse_args()
    selected = args.only or list(SCOPE)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3]) if Path("/proc/loadavg").exists() else "?"
    previous = json.loads((RESULTS / "mutation.json").read_text()) if (RESULTS / "mutation.json").exists() else {}
    git = shutil.which("git") or "git"
    head = subprocess.run([git, "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    commit = head.stdout.strip() or "?"
    today = time.strftime("%Y-%m-%d", time.gmtime())
    if args.report_only:
        wall = None
    elif args.survivors:
        run_mutmut(args.max_children, survivors(selected))
        wall = None
    else:
        wall = round(run_mutmut(args.max_children, patterns(selected)), 1)
    stamp = None if args.report_only else {"commit": commit, "when": today}
    report = merge(previous, collect(selected), stamp)
    from importlib.metadata import version

    timed = wall is not None
    report |= {
        "mutmut_version": version("mutmut"),
        "wall_s": wall if timed else previous.get("wall_s"),
        "max_children": args.max_children if timed else previous.get("max_children"),
        "cpus": os.cpu_count(),
        "load_before": load if timed else previous.get("load_before"),
        "when": today if timed else previous.get("when"),
        "commit": commit if timed else previous.get("commit"),
        "run_modules": selected if timed else previous.get("run_modules", list(previous.get("modules", {}))),
    }
    ok = write_report(report)
    for rel, m in report["modules"].items():
        print(f"{rel}: {m['killed']}/{m['mutants']} killed, {m['justified']} explained -> {m['score_with_justified']}")
    print(f"report: {RESULTS / 'mutation.md'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
