"""The benchmark harness's own logic (no cluster): it must not rot between `make bench` runs.

No timing is asserted here; figures belong to bench/results, not to tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import proctree  # noqa: E402
import run  # noqa: E402


def test_scale_simulation_reports_cpu_and_document_size_per_task_count() -> None:
    # A CPU clock that advances 0.5 s per reading: registering all tasks spans
    # one step (500 ms), the 20 heartbeat rounds one step (25 ms a round).
    ticks = iter(range(100))
    out = run.bench_scale(cpu_clock=lambda: next(ticks) * 0.5)
    assert out == {
        "100_tasks": {
            "register_all_cpu_ms": 500.0,
            "cpu_ms_per_heartbeat_round": 25.0,
            "state_document_kib": out["100_tasks"]["state_document_kib"],
        },
        "1000_tasks": {
            "register_all_cpu_ms": 500.0,
            "cpu_ms_per_heartbeat_round": 25.0,
            "state_document_kib": out["1000_tasks"]["state_document_kib"],
        },
    }
    # The document lists every task: ten times the tasks, about ten times the size.
    small, large = out["100_tasks"]["state_document_kib"], out["1000_tasks"]["state_document_kib"]
    assert small > 10 and 8 * small < large < 12 * small, (small, large)


def test_stats_and_markdown_table() -> None:
    assert run.stats([3.0, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0, "n": 3}
    assert run.stats([]) == {"n": 0}
    doc = {
        "date": "d",
        "machine": {"cores": 2, "memory_gib": 24},
        "versions": {"python": "3.11"},
        "benchmarks": {"failure": {"sigkill": {"to_am_failed": run.stats([1.0, 2.0])}, "note": "x"}},
    }
    text = run.markdown(doc)
    assert "| sigkill / to_am_failed | 1.5 | 1.0 | 2.0 | 2 |" in text
    assert "| note | x | | | |" in text


def test_airflow_log_time_is_the_lines_own_timestamp() -> None:
    line = "2026-11-29T18:20:11.325027Z [info     ] Task instance state updated"
    assert run._log_time(line) == pytest.approx(1795976411.325027)


def test_process_tree_usage_counts_children() -> None:
    # Blocks on its stdin until killed: alive for exactly as long as the test needs it.
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert child.pid in proctree.tree(os.getpid())
        mine, its = proctree.usage(os.getpid()), proctree.usage(child.pid)
        assert its["rss_mib"] > 1 and its["jvms"] == 0
        assert mine["cpu"] > its["cpu"] and mine["rss_mib"] > its["rss_mib"], "the child counts in the tree"
    finally:
        child.kill()
        child.communicate()  # reaps it and closes its stdin pipe


def _fake_peer(tmp_path: Path, lines: list[str]) -> Path:
    """A stand-in for tf-yarn's venv python: prints the peer's JSON lines, whatever it is asked."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\n" + "".join(f"echo '{line}'\n" for line in lines))
    script.chmod(0o755)
    return script


def test_tf_yarn_runs_that_failed_are_kept_apart_from_the_timed_ones(tmp_path: Path) -> None:
    python = _fake_peer(tmp_path, ['{"user_code_started": 20.0, "all_done": 24.0}', '{"error": "ApplicationError: "}'])
    timed, errors = run.tf_yarn_startup(python, workers=2, repeat=2)
    assert timed == [{"user_code_started": 20.0, "all_done": 24.0}]
    assert errors == ["ApplicationError: "]


def test_tf_yarn_that_never_ran_says_why(tmp_path: Path) -> None:
    python = _fake_peer(tmp_path, ['{"error": "no NodeManager"}'])
    with pytest.raises(RuntimeError, match="tf-yarn did not run: no NodeManager"):
        run.tf_yarn_startup(python, workers=1, repeat=1)


def test_training_rounds_rotate_the_order_and_report_each_ratio(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []

    def arm(name: str, rate: float) -> Any:
        return lambda *_args: order.append(name) or rate

    monkeypatch.setattr(run, "quiet_machine", lambda: order.append("quiet"))
    monkeypatch.setattr(run, "by_hand", arm("hand", 30.0))
    monkeypatch.setattr(run, "on_bare_yarn", arm("bare", 28.5))
    monkeypatch.setattr(run, "via_operator", arm("tony", 27.0))
    out = run.bench_training(client=None, rounds=3, airflow_env={})  # type: ignore[arg-type]
    runs = [name for name in order if name != "quiet"]
    assert runs == ["hand", "bare", "tony", "bare", "tony", "hand", "tony", "hand", "bare"]
    assert order.count("quiet") == 9  # before every run
    assert out["ratio_tony_over_hand"] == 0.9
    assert out["pair_ratio_bare_yarn_over_hand"]["median"] == 0.95
    assert out["pair_ratio_tony_over_bare_yarn"]["median"] == round(27.0 / 28.5, 3)
    assert out["tony_operator_steps_per_s"]["n"] == 3


PROC_STAT = "cpu  {user} 0 {system} {idle} {iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 0 0 0 0 0\n"


def test_the_idle_fraction_counts_idle_and_iowait_of_all_cores() -> None:
    before = run._cpu_sample(PROC_STAT.format(user=100, system=50, idle=800, iowait=50))
    after = run._cpu_sample(PROC_STAT.format(user=160, system=90, idle=1070, iowait=80))
    assert before == (850, 1000)  # the aggregate line, not cpu0's
    # 400 jiffies passed: 100 busy (60 user + 40 system), 300 idle (270 idle + 30 iowait).
    assert run._idle_between(before, after) == 0.75
    assert run._idle_between(before, before) == 0.0, "no time passed: not idle, so never 'quiet'"
