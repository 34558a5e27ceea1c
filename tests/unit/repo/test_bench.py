"""The benchmark harness's own logic (no cluster): it must not rot between `make bench` runs.

No timing is asserted here; figures belong to bench/results, not to tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests._util import load_script
from tests.unit.support.paths import REPO

BENCH = REPO / "bench"
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


# ---------------------------------------------------------------- the smoke (bench/smoke.py)


def test_every_benchmark_is_smoked_or_says_where_its_code_paths_are_covered() -> None:
    """A new bench/*.py must join bench/smoke.py's SMOKES (CI runs it) or NOT_HERE (with the reason)."""
    smoke = load_script("bench/smoke.py", "tony_bench_smoke")
    smoked = {s.script for s in smoke.SMOKES.values()}
    listed = smoked | set(smoke.NOT_HERE) | set(smoke.HELPERS)
    on_disk = {p.name for p in BENCH.glob("*.py")}
    assert on_disk - listed == set(), "benchmarks neither smoked nor listed in NOT_HERE"
    assert listed - on_disk == set(), "smoke.py names benchmarks that are gone"
    assert not smoked & set(smoke.NOT_HERE) and all(smoke.NOT_HERE.values())
    for spec in smoke.SMOKES.values():
        assert spec.writes, f"{spec.script}: the files it writes are the proof it ran to the end"


def test_the_smoke_writes_results_to_its_own_folder_and_fails_a_benchmark_that_fails(tmp_path: Path) -> None:
    smoke = load_script("bench/smoke.py", "tony_bench_smoke")
    fake = tmp_path / "fake.py"
    fake.write_text(
        "import os, sys, pathlib\n"
        "if '--fail' in sys.argv: raise AttributeError('no release_driver')\n"
        "pathlib.Path(os.environ['TONY_BENCH_RESULTS'], 'fake.json').write_text('{}')\n"
    )
    smoke.BENCH = tmp_path
    smoke.SMOKES = {
        "ok": smoke.Smoke("fake.py", (), ("fake.json",)),
        "fails": smoke.Smoke("fake.py", ("--fail",), ("fake.json",)),
        "writes-nothing": smoke.Smoke("fake.py", (), ("other.json",)),
    }
    assert smoke.smoke("ok", tmp_path / "a") == (0, "") and (tmp_path / "a" / "fake.json").exists()
    rc, why = smoke.smoke("fails", tmp_path / "b")
    assert rc == 1 and "AttributeError: no release_driver" in why
    rc, why = smoke.smoke("writes-nothing", tmp_path / "c")
    assert rc == 1 and "did not write other.json" in why
    assert smoke.main(["--only", "ok"]) == 0
    assert smoke.main(["--only", "ok", "--only", "fails"]) == 1


def test_tf_yarn_peer_parses_its_arguments_without_tf_yarn() -> None:
    """What the smoke cannot run (tf-yarn's venv) at least starts: its imports are deferred, --help works."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "tf_yarn_peer.py"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "--return-grace" in out.stdout, out.stderr


@pytest.mark.parametrize("bench", ["ha_failover.py", "ha_cluster.py"])
def test_the_ha_benchmarks_parse_their_arguments_without_a_cluster(bench: str) -> None:
    """What the smoke cannot run (the HA profile) at least starts: --help works."""
    out = subprocess.run([sys.executable, str(BENCH / bench), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "usage" in out.stdout, out.stderr


class _NodeLossClient:
    """A stand-in TonyClient for bench/node_loss.py: the first application's worker node is lost.

    In-application path (max_restarts 1): the AM restarts the gang (generation 1) and succeeds.
    Retry path (max_restarts 0): the first application fails as retryable, the retry resumes.
    """

    def __init__(self) -> None:
        self.submitted: list[tuple[str, int, int]] = []  # (app id, max_restarts, attempt)
        self.killed: list[str] = []
        self.deleted: list[str] = []

    def __enter__(self) -> _NodeLossClient:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def hdfs(self) -> Any:
        return SimpleNamespace(delete=lambda path, recursive: self.deleted.append(path))

    def submit(self, spec: Any, attempt: int = 1) -> str:
        app_id = f"application_1_{len(self.submitted) + 1:04d}"
        self.submitted.append((app_id, spec.max_restarts, attempt))
        return app_id

    def _restarts(self, app_id: str) -> int:
        return next(r for a, r, _ in self.submitted if a == app_id)

    def am_state(self, app_id: str) -> Any:
        progress = SimpleNamespace(step=40)
        generation = 1 if self._restarts(app_id) else 0
        return SimpleNamespace(generation=generation, task=lambda _t: SimpleNamespace(progress=progress))

    def wait(self, app_id: str, poll_interval: float) -> Any:
        restarts, attempt = next((r, at) for a, r, at in self.submitted if a == app_id)
        task = SimpleNamespace(progress=SimpleNamespace(step=40), restored_step=30)
        record = SimpleNamespace(last_step=40, resumed_step=30, at_wall=time.time())
        state = SimpleNamespace(
            restarts=[record] if restarts else [], task=lambda _t: task, milestone_wall=lambda _m: time.time()
        )
        ok = bool(restarts) or attempt == 2
        return SimpleNamespace(am_state=state, succeeded=ok, retryable=not ok, diagnostics="node lost")

    def job_history(self, app_id: str) -> Any:
        """Each task's metric points: one step before the loss (ignored) and one a second after it."""
        points = [SimpleNamespace(step=9, time=time.time() - 3600), SimpleNamespace(step=11, time=time.time() + 1)]
        return SimpleNamespace(metrics=dict.fromkeys(("chief:0", "worker:0"), points))

    def kill(self, app_id: str) -> None:
        self.killed.append(app_id)


def test_node_loss_bench_runs_both_paths_and_writes_its_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/node_loss.py's code paths with a stand-in client and cluster (the real one is the chaos
    part's four-node cluster, too costly for the smoke): both paths, the node stopped and started
    again, every application killed, the checkpoints removed, the report in TONY_BENCH_RESULTS."""
    monkeypatch.setenv("TONY_BENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("TONY_RM_URL", "http://127.0.0.1:1")
    node_loss = load_script("bench/node_loss.py", "tony_bench_node_loss")
    import airflow_provider_tony.runtime.checkpoint as checkpoint
    import tests.chaos._support as chaos_support
    from airflow_provider_tony.yarn.client import TonyClient

    client, calls = _NodeLossClient(), []
    monkeypatch.setattr(node_loss, "chaos_env", lambda: calls.append(("up",)))
    monkeypatch.setattr(node_loss, "devcluster", lambda *args: calls.append(args))
    monkeypatch.setattr(TonyClient, "from_env", classmethod(lambda cls: client))
    monkeypatch.setattr(checkpoint, "remote_checkpoints", lambda hdfs, path: [10])
    monkeypatch.setattr(chaos_support, "victim_of", lambda cluster, app_id, doc, uploader: (2, None))
    monkeypatch.setattr(sys, "argv", ["node_loss.py"])
    assert node_loss.main() == 0
    assert [(r, at) for _, r, at in client.submitted] == [(1, 1), (0, 1), (0, 2)], "in-application, then a retry"
    assert calls == [("up",), ("stop-nm", "2", "--lose"), ("start-nm", "2"), ("stop-nm", "2", "--lose")] + [
        ("start-nm", "2"),
        ("down",),
    ]
    assert sorted(client.killed) == sorted(a for a, _, _ in client.submitted) and len(client.deleted) == 2
    doc = json.loads((tmp_path / "node_loss.json").read_text())
    assert doc["paths"]["in_application"]["runs"][0]["applications"] == 1
    assert doc["paths"]["airflow_retry"]["runs"][0]["applications"] == 2
    assert doc["paths"]["airflow_retry"]["runs"][0]["steps_redone"] == 10
    for path in ("in_application", "airflow_retry"):  # the step after the loss, by its report's time
        run = doc["paths"][path]["runs"][0]
        assert 0 < run["loss_to_training_resumed_s"] < 5 and run["loss_to_resumed_seen_s"] >= 0, run
    assert "| in_application |" in (tmp_path / "node_loss.md").read_text()


class _Ended:
    """A client whose application ended; its history holds ``points`` for worker:1."""

    def __init__(self, points: list[Any]) -> None:
        self.points = points

    def am_state(self, app_id: str) -> None:
        return None  # the AM is gone

    def report(self, app_id: str) -> Any:
        return SimpleNamespace(active=False)

    def job_history(self, app_id: str) -> Any:
        return SimpleNamespace(metrics={"worker:1": self.points})


def test_a_report_that_never_reached_the_am_is_untimed_and_the_round_runs_again() -> None:
    # Ended with the report in its history: timed from the report's own clock.
    assert run._report_time(_Ended([SimpleNamespace(time=12.5)]), "app_1", "worker:1") == 12.5
    # Ended with no report (the executor froze before a heartbeat carried it): untimed, not 300 s waited.
    with pytest.raises(run.Untimed, match="app_1 ended before worker:1's report"):
        run._report_time(_Ended([]), "app_1", "worker:1")
    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise run.Untimed("no report")
        return "timed"

    assert run._timed(flaky) == "timed" and len(tries) == 3
    tries.clear()
    with pytest.raises(run.Untimed):
        run._timed(flaky, tries=2)


# ---------------------------------------------------------------- bench/torch_ddp.py


def test_torch_ddp_bench_reads_rank0s_lines_rotates_and_takes_ratios_per_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0's stdout gives the loop's rate and its first step's wall clock (start-up = that - launch);
    a run without them is an error, not a zero; rounds rotate; ratios are taken per round."""
    torch_bench = load_script("bench/torch_ddp.py", "tony_bench_torch_ddp")
    out = "noise\nTORCH_DDP_FIRST_STEP_WALL=1000.5\nTORCH_DDP_STEPS_PER_S=12.5\n"
    assert torch_bench.parse_output(out, 990.0, "x") == torch_bench.Run(12.5, 10.5)
    with pytest.raises(RuntimeError, match="no throughput from the by-hand run"):
        torch_bench.parse_output("TORCH_DDP_STEPS_PER_S=12.5\n", 0.0, "by-hand run")

    order: list[str] = []
    monkeypatch.setattr(torch_bench.harness, "quiet_machine", lambda: order.append("quiet"))
    rates = {"tony": [9.0, 10.0], "by_hand": [10.0, 10.0], "bare_yarn": [9.5, 8.0]}

    def arm(name: str) -> Any:
        return lambda: order.append(name) or torch_bench.Run(rates[name].pop(0), 3.0)

    runs = torch_bench.rounds_of({name: arm(name) for name in ("tony", "by_hand", "bare_yarn")}, 2)
    assert [n for n in order if n != "quiet"] == ["tony", "by_hand", "bare_yarn", "by_hand", "bare_yarn", "tony"]
    assert order.count("quiet") == 6
    summary = torch_bench.summary(runs, batch=4)
    assert summary["ratio_tony_over_by_hand"] == {"median": 0.95, "min": 0.9, "max": 1.0, "n": 2}
    assert summary["ratio_tony_over_bare_yarn"]["max"] == 1.25  # round 2: 10 / 8, not a ratio of medians
    assert summary["by_hand"]["samples_per_s"]["median"] == 80.0  # 10 steps/s x batch 4 x 2 ranks
    text = torch_bench.markdown(
        {
            **summary,
            "args": ["--steps", "2"],
            "rounds": 2,
            "machine": "m",
            "torch": "t",
            "date": "d",
            "load_average": [1.0],
        }
    )
    assert "| (a) TonY: `TonyClient.submit`, `framework: pytorch` | 9.5 (9.0-10.0) | 76.0 (72.0-80.0) |" in text
