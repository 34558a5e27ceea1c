#!/usr/bin/env python3
"""Benchmarks on the local cluster, side by side in one run; figures go to bench/results/.

    make bench                      # all, REPEAT times each
    python bench/run.py --only startup,scale --repeat 2
    python bench/run.py --smoke     # one short round of every section: does each still run?

Absolute times on a shared 2-core machine drift; ratios taken in the same run
do not, so each benchmark reports its baseline beside it. Nothing here is a
test: no thresholds fail the run. Output: ``bench/results/latest.json`` and
``bench/results/latest.md`` (median, min, max, ratios), plus the machine,
versions and date; ``$TONY_BENCH_RESULTS`` instead when set (``bench/smoke.py`` writes there, so
a smoke run never replaces the real figures).

``--smoke`` (``bench/smoke.py``, which CI runs) is the smallest round of each section: one
repeat, start-up with one worker, the Airflow side of failure detection for one signal, a
training round of a tiny model, tracking for a few seconds of two jobs; tf-yarn is left out
(its own venv and pex take minutes: the result says so). Its figures mean nothing; that it ends
means every section still runs.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import proctree  # noqa: E402

from airflow_provider_tony.runtime.messages import (  # noqa: E402
    MILESTONE_ALL_USER_STARTED,
    MILESTONE_CLUSTER_PUBLISHED,
    MILESTONE_VERDICT,
    Heartbeat,
    Progress,
    Registration,
)
from airflow_provider_tony.runtime.spec import JobSpec  # noqa: E402
from airflow_provider_tony.yarn.client import TonyClient  # noqa: E402

RESULTS = Path(os.environ.get("TONY_BENCH_RESULTS") or REPO / "bench" / "results")
TRAINING = REPO / "dags" / "training" / "digits_mwms.py"
BEHAVE = REPO / "tests" / "integration" / "jobs" / "behave.py"
COUNT = REPO / "tests" / "integration" / "jobs" / "count_steps.py"
PY = sys.executable
AIRFLOW = str(Path(PY).parent / "airflow")  # the venv's CLI, for the DAG-driven benchmarks
ALL = ("scale", "startup", "failure", "resume", "training", "tracking")
#: Set by ``--smoke``: every section runs its smallest round (see the module's docstring).
SMOKE = False


def stats(values: list[float]) -> dict[str, Any]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"n": 0}
    return {
        "median": round(statistics.median(vals), 3),
        "min": round(min(vals), 3),
        "max": round(max(vals), 3),
        "n": len(vals),
    }


def wait(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(what)


def job(roles: dict[str, Any], **extra: Any) -> JobSpec:
    return JobSpec.from_dict(
        {
            "name": "bench",
            "roles": roles,
            "python": {"interpreter": PY},
            "heartbeat_interval": 1,
            "heartbeat_timeout": 30,
            "tags": ["tony-bench"],
            **extra,
        }
    )


# ---------------------------------------------------------------- 1. training overhead


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tf_config(ports: list[int], index: int) -> str:
    return json.dumps(
        {"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]}, "task": {"type": "worker", "index": index}}
    )


def _steps_per_s(text: str, what: str) -> float:
    rate = re.findall(r"TRAIN_STEPS_PER_S=([\d.]+)", text)
    if not rate:
        raise RuntimeError(f"no steps/s from the {what}:\n{text[-3000:]}")
    return float(rate[-1])


def _cpu_sample(proc_stat: str) -> tuple[int, int]:
    """(idle + iowait, all) jiffies from the aggregate ``cpu`` line of /proc/stat's text."""
    fields = [int(v) for v in proc_stat.split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


def _idle_between(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of CPU time spent idle between two samples (0 when no time passed)."""
    return (after[0] - before[0]) / max(1, after[1] - before[1])


def _cpu_idle_fraction(window: float = 1.0) -> float:
    before = _cpu_sample(Path("/proc/stat").read_text())
    time.sleep(window)
    return _idle_between(before, _cpu_sample(Path("/proc/stat").read_text()))


def quiet_machine(timeout: float = 60.0) -> None:
    """Waits until the cores are 90 % idle: the previous run's tail (a JVM
    exiting, YARN cleaning up a container, Airflow closing) must not fall into
    the next run's timed phase. Goes on after ``timeout`` whatever the load (at once in a smoke
    run: its figures are not kept)."""
    if SMOKE:
        return
    try:
        wait(lambda: _cpu_idle_fraction() >= 0.9, timeout, "a quiet machine", interval=0)
    except TimeoutError:
        print(f"  the machine did not quieten within {timeout:.0f}s; measuring anyway", flush=True)


def by_hand(steps_args: list[str]) -> float:
    """Two local processes with a hand-made TF_CONFIG: the floor.

    Each gets a local checkpoint and TensorBoard directory, as the executor
    gives it under TonY (the script writes both when told where; the
    TensorBoard callback alone costs about 5 %), so the only difference left is
    what TonY adds: executor, AM, HDFS uploads, Airflow.
    """
    ports = [_free_port(), _free_port()]
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(2):
            env = {
                **os.environ,
                "PYTHONPATH": str(REPO),
                "TONY_CHECKPOINT_DIR": f"{tmp}/ckpt-{index}",
                "TONY_TENSORBOARD_DIR": f"{tmp}/tensorboard-{index}",
                "TF_CONFIG": _tf_config(ports, index),
            }
            procs.append(
                subprocess.Popen(
                    [PY, str(TRAINING), *steps_args],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            )
        outs = [p.communicate(timeout=600)[0] for p in procs]
    return _steps_per_s(outs[0], "by-hand run")


def on_bare_yarn(client: TonyClient, steps_args: list[str]) -> float:
    """The same two processes as YARN containers of a bare skein application
    (no TonY AM, no executor, no Airflow): what running on YARN costs by itself.

    The single-node cluster shares this machine's file system, so worker 0
    writes its output where this process reads it.
    """
    import skein

    ports = [_free_port(), _free_port()]
    with tempfile.TemporaryDirectory() as tmp:
        services = {}
        for index in range(2):
            env = {
                "PYTHONPATH": str(REPO),
                "TONY_CHECKPOINT_DIR": "ckpt",
                "TONY_TENSORBOARD_DIR": "tensorboard",
                "TF_CONFIG": _tf_config(ports, index),
            }
            command = shlex.join([PY, str(TRAINING), *steps_args])
            exports = "; ".join(f"export {k}={shlex.quote(v)}" for k, v in env.items())  # skein's env is not quoted
            services[f"worker{index}"] = skein.Service(
                resources=skein.Resources(memory="1 GiB", vcores=1),
                script=f"{exports}; {command} > {shlex.quote(f'{tmp}/out-{index}')}",
            )
        spec = skein.ApplicationSpec(
            name="bench-bare-training", queue="default", tags=["tony-bench"], services=services
        )
        app_id = client.submitter().submit(spec)
        rep = wait(lambda: not (r := client.report(app_id)).active and r, 600, f"{app_id} to end", interval=0.5)
        if rep.final_status != "SUCCEEDED":
            raise RuntimeError(f"bare skein training {app_id} ended {rep.final_status}: {rep.diagnostics}")
        return _steps_per_s(Path(f"{tmp}/out-0").read_text(), f"bare skein application {app_id}")


def via_operator(steps_args: list[str], airflow_env: dict[str, str]) -> float:
    """The same script through TonyOperator (airflow dags test) on YARN."""
    conf = json.dumps({"args": steps_args})
    out = subprocess.run(
        [AIRFLOW, "dags", "test", "bench_train", "--conf", conf],
        env=airflow_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    text = out.stdout + out.stderr
    found = re.findall(r'"train_steps_per_s": ([\d.]+)', text)
    if not found:
        raise RuntimeError(f"no steps/s in the operator's result:\n{text[-3000:]}")
    return float(found[-1])


TRAINING_ARGS = [
    "--epochs",
    "12",
    "--steps-per-epoch",
    "60",
    "--batch-size",
    "1024",
    "--hidden",
    "2048",
    "--partition",
    "bench",
]


#: The smoke run's model: two epochs (the first is not timed) of a few small steps.
SMOKE_TRAINING_ARGS = ["--epochs", "2", "--steps-per-epoch", "3", "--batch-size", "64", "--hidden", "32"]
SMOKE_TRAINING_ARGS += ["--partition", "bench"]


def bench_training(client: TonyClient, rounds: int, airflow_env: dict[str, str]) -> dict[str, Any]:
    """Rounds of three runs back to back (by hand, bare YARN, TonyOperator), the
    order rotating each round, each started on a quiet machine, so that drift
    on the shared machine hits every side alike; the headline is the median of
    the per-round ratios TonyOperator / by hand."""
    train_args = SMOKE_TRAINING_ARGS if SMOKE else TRAINING_ARGS
    arms: dict[str, Callable[[], float]] = {
        "by_hand": lambda: by_hand(train_args),
        "bare_yarn": lambda: on_bare_yarn(client, train_args),
        "tony_operator": lambda: via_operator(train_args, airflow_env),
    }
    names = list(arms)
    runs: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            quiet_machine()
            runs[name].append(arms[name]())
        print(
            "  round {}: by hand {:.1f}, bare YARN {:.1f}, TonyOperator {:.1f} steps/s".format(
                i + 1, *(runs[name][-1] for name in names)
            ),
            flush=True,
        )

    def ratios(top: str, bottom: str) -> list[float]:
        return [a / b for a, b in zip(runs[top], runs[bottom], strict=True)]

    tony_hand = ratios("tony_operator", "by_hand")
    return {
        "by_hand_steps_per_s": stats(runs["by_hand"]),
        "bare_yarn_steps_per_s": stats(runs["bare_yarn"]),
        "tony_operator_steps_per_s": stats(runs["tony_operator"]),
        "pair_ratio_tony_over_hand": stats(tony_hand),
        "pair_ratio_bare_yarn_over_hand": stats(ratios("bare_yarn", "by_hand")),
        "pair_ratio_tony_over_bare_yarn": stats(ratios("tony_operator", "bare_yarn")),
        "ratio_tony_over_hand": round(statistics.median(tony_hand), 3),
        "ratio_of_medians": round(statistics.median(runs["tony_operator"]) / statistics.median(runs["by_hand"]), 3),
        "target_ratio": 0.97,
        "note": "2 tf-keras MWMS workers on sklearn digits: " + " ".join(train_args) + "; on every side "
        "a local checkpoint per epoch and TensorBoard events (under TonyOperator also uploaded to "
        "HDFS); bare YARN: the same two processes as containers of a skein application without TonY; "
        "the first epoch (tracing) is not timed",
    }


# ---------------------------------------------------------------- 2. start-up latency


def _log_time(line: str) -> float:
    """The wall time an Airflow log line carries (``2026-11-29T18:20:11.325027Z [info ...``)."""
    import pendulum

    return pendulum.parse(line.split(" ", 1)[0]).timestamp()


def tony_startup(client: TonyClient, workers: int) -> dict[str, float]:
    spec = job(
        {"worker": {"instances": workers, "memory": "256 MiB", "script": str(BEHAVE), "args": ["ok"]}},
        success_policy="all_workers",
    )
    t0 = time.time()
    app_id = client.submit(spec)
    submitted = time.time()
    accepted = running = None
    while True:
        rep = client.report(app_id)
        now = time.time()
        if rep.state in ("ACCEPTED", "RUNNING") and accepted is None:
            accepted = now
        if rep.state == "RUNNING" and running is None:
            running = now
        if rep.state == "RUNNING":
            doc = client.am_state(app_id)
            if doc is not None and doc.milestone_wall(MILESTONE_ALL_USER_STARTED) is not None:
                break
        if rep.state in ("FINISHED", "FAILED", "KILLED"):
            raise RuntimeError(f"{app_id} ended early: {rep.diagnostics}")
        time.sleep(0.05)
    am0 = doc.am_started_wall or 0.0
    result = {
        "submit_call": submitted - t0,
        "accepted": (accepted or submitted) - t0,
        "am_running": am0 - t0,
        "all_registered": doc.milestone_wall(MILESTONE_CLUSTER_PUBLISHED) - t0,
        "user_code_started": doc.milestone_wall(MILESTONE_ALL_USER_STARTED) - t0,
    }
    client.wait(app_id, poll_interval=0.5, emit=lambda _l: None)
    return result


def skein_floor(client: TonyClient, workers: int) -> float:
    """A bare skein application with the same containers running `true`: submit -> all started."""
    import skein

    spec = skein.ApplicationSpec(
        name="bench-floor",
        queue="default",
        tags=["tony-bench"],
        master=skein.Master(resources=skein.Resources(memory="512 MiB", vcores=1)),
        services={
            "worker": skein.Service(
                instances=workers, resources=skein.Resources(memory="256 MiB", vcores=1), script="true"
            )
        },
    )
    t0 = time.time()
    app_id = client.submitter().submit(spec)
    # skein's Python client straight to the AM (its gRPC address from the RM's report): no driver.
    address = wait(
        lambda: client._rm_get(f"apps/{app_id}")["app"].get("amRPCAddress") or None, 300, "the floor's AM address"
    )
    app = skein.ApplicationClient(address, app_id, security=client._security())
    wait(
        lambda: (
            len(app.get_containers(states=["RUNNING", "SUCCEEDED"])) >= workers
            or len(app.get_containers(states=["SUCCEEDED"])) >= workers
        ),
        300,
        "floor containers",
    )
    took = time.time() - t0
    client.kill(app_id)
    return took


def tf_yarn_venv() -> tuple[Path | None, str]:
    """tf-yarn's own venv (bench/tf_yarn_setup.sh), made on first use; (python, why not)."""
    venv = Path(os.environ.get("TONY_DEVCLUSTER_HOME", REPO / ".devcluster")) / "tf-yarn-venv"
    out = subprocess.run(
        ["bash", str(REPO / "bench" / "tf_yarn_setup.sh"), str(venv)], capture_output=True, text=True, timeout=1800
    )
    if out.returncode != 0:
        last = [line for line in (out.stderr + out.stdout).splitlines() if line.strip()][-3:]
        return None, "tf-yarn could not be installed: " + " | ".join(last)
    return venv / "bin" / "python", ""


def tf_yarn_startup(python: Path, workers: int, repeat: int) -> tuple[list[dict[str, Any]], list[str]]:
    """tf-yarn (skein-based peer) on the same cluster: submit -> user code started in all workers.

    Returns the timed runs and the errors of the runs that failed (reported beside them).
    """
    out = subprocess.run(
        [
            str(python),
            str(REPO / "bench" / "tf_yarn_peer.py"),
            "--workers",
            str(workers),
            "--repeat",
            str(repeat),
            "--return-grace",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=900 * repeat,
    )
    runs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    timed = [r for r in runs if "error" not in r]
    errors = [r["error"] for r in runs if "error" in r]
    if not timed:
        raise RuntimeError("tf-yarn did not run: " + ("; ".join(errors) or out.stderr[-2000:]))
    return timed, errors


def operator_to_submitted(airflow_env: dict[str, str]) -> float:
    """TonyOperator.execute starting (its hook connecting) to YARN accepting the application.

    This is what the client-side figures above leave out: the operator's own
    work before ``submit`` (connection, skein driver JVM start, re-attach
    lookup, staging the runtime archive).
    """
    out = subprocess.run(
        [AIRFLOW, "dags", "test", "bench_start"], env=airflow_env, capture_output=True, text=True, timeout=600
    )
    lines = (out.stdout + out.stderr).splitlines()
    started = next(line for line in lines if "YARN cluster http" in line and line[:4].isdigit())
    submitted = next(line for line in lines if re.search(r"submitted application_\d+_\d+ \(", line))
    return _log_time(submitted) - _log_time(started)


def bench_startup(client: TonyClient, repeat: int, airflow_env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operator_execute_to_submitted": stats([operator_to_submitted(airflow_env) for _ in range(repeat)])
    }
    if SMOKE:
        tf_yarn, why_not = None, "not in a smoke run: tf-yarn's own venv and pex take minutes (bench/tf_yarn_setup.sh)"
    else:
        tf_yarn, why_not = tf_yarn_venv()
    for workers in (1,) if SMOKE else (1, 2, 4, 8):
        runs = [tony_startup(client, workers) for _ in range(repeat)]
        floor = [skein_floor(client, workers) for _ in range(repeat)]
        phases = {k: stats([r[k] for r in runs]) for k in runs[0]}
        row = out[f"{workers}_workers"] = {
            **phases,
            "bare_skein_all_started": stats(floor),
            "ratio_user_code_started_over_floor": round(
                phases["user_code_started"]["median"] / stats(floor)["median"], 3
            ),
        }
        if tf_yarn is None:
            row["tf_yarn"] = why_not
            continue
        try:
            peer, errors = tf_yarn_startup(tf_yarn, workers, repeat)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            row["tf_yarn"] = str(exc)[:500]
            continue
        if errors:
            row["tf_yarn_failed_runs"] = f"{len(errors)} of {len(peer) + len(errors)}: " + "; ".join(
                e[:200] for e in errors
            )
        row["tf_yarn_user_code_started"] = stats([r["user_code_started"] for r in peer])
        row["tf_yarn_app_finished"] = stats([r["all_done"] for r in peer])
        row["ratio_tf_yarn_over_tony_user_code_started"] = round(
            row["tf_yarn_user_code_started"]["median"] / phases["user_code_started"]["median"], 2
        )
    out["tf_yarn_setup"] = (
        "tf-yarn 0.7.0 + tensorflow-cpu 2.15.1 in its own venv (bench/tf_yarn_setup.sh); its environment "
        "ships as a cluster-pack pex on HDFS, unpacked per submission (tf-yarn's default); the body only "
        "records the time, like behave.py here; run_on_yarn's log fetching after the end is not timed"
    )
    return out


# ---------------------------------------------------------------- 3. failure detection


class Untimed(Exception):
    """The round's executor froze before any heartbeat carried its report to the AM: no clock to
    time the failure from, so the round is run again rather than waited on or guessed."""


def _report_time(client: TonyClient, app_id: str, task_id: str) -> float:
    """When ``task_id`` first reported progress (its host's wall clock), from the AM while it runs,
    else from the job's history once it ended; ``Untimed`` when it ended with no report."""

    def look() -> float | None:
        doc = client.am_state(app_id)
        task = doc.task(task_id) if doc is not None else None
        if task is not None and task.progress is not None and task.progress.time:
            return task.progress.time
        if (doc is not None and doc.final) or not client.report(app_id).active:
            history = client.job_history(app_id)
            times = [p.time for p in (history.metrics.get(task_id, []) if history else []) if p.time]
            if times:
                return min(times)
            raise Untimed(f"{app_id} ended before {task_id}'s report reached its AM")
        return None

    return wait(look, 300, f"{task_id} to report")


def _timed(round_: Callable[[], Any], tries: int = 3) -> Any:
    """``round_()``, run again (at most ``tries`` times in all) while it is ``Untimed``."""
    for left in range(tries - 1, -1, -1):
        try:
            return round_()
        except Untimed as exc:
            if not left:
                raise
            print(f"  not timed ({exc}); again", flush=True)
    raise AssertionError("unreachable")


#: behave.py freezes (or kills) its executor this long after its progress report: long enough for
#: a heartbeat (every 1 s here) to carry the report to the AM, which times the failure from it.
#: Three beats; a round whose report still did not arrive (a loaded machine) is ``Untimed`` and run
#: again. The figures are timed from report + FREEZE_AFTER, so they do not depend on its value.
FREEZE_AFTER = 3.0
FREEZE_ARGS = ["--freeze-after", str(FREEZE_AFTER)]


def detection(client: TonyClient, mode: str, timeout: float) -> dict[str, float]:
    spec = job(
        {
            "worker": {
                "instances": 2,
                "memory": "256 MiB",
                "script": str(BEHAVE),
                "args": [mode, "--index", "1", *FREEZE_ARGS],
            }
        },
        heartbeat_interval=1,
        heartbeat_timeout=timeout,
    )
    app_id = client.submit(spec)
    # behave.py reports progress step 1 and FREEZE_AFTER s later stops or kills its executor.
    try:
        event_wall = _report_time(client, app_id, "worker:1") + FREEZE_AFTER
    except Untimed:
        client.wait(app_id, poll_interval=1.0, emit=lambda _l: None)  # ended: acknowledged, nothing left
        raise
    final = wait(lambda: (d := client.am_state(app_id)) and d.final and d, 300, "the verdict")
    verdict_wall = final.milestone_wall(MILESTONE_VERDICT)
    result = client.wait(app_id, poll_interval=1.0, emit=lambda _l: None)
    ended_wall = time.time()
    assert not result.succeeded
    return {"to_am_failed": verdict_wall - event_wall, "to_client_failed": ended_wall - event_wall}


def airflow_detection(client: TonyClient, mode: str, airflow_env: dict[str, str]) -> float:
    """Failure to the Airflow task failing: the bench_fail DAG through ``airflow dags test``."""
    import threading

    conf = json.dumps({"args": [mode, "--index", "1", *FREEZE_ARGS]})
    proc = subprocess.Popen(
        [AIRFLOW, "dags", "test", "bench_fail", "--conf", conf],
        env=airflow_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:

        def submitted() -> str | None:
            found = re.findall(r"submitted (application_\d+_\d+)", "".join(lines))
            if not found and proc.poll() is not None:  # ended without submitting: no point waiting
                reader.join(timeout=30)
                raise RuntimeError("airflow dags test bench_fail ended before submitting:\n" + "".join(lines[-60:]))
            return found[0] if found else None

        app_id = wait(submitted, 300, "the operator to submit")
        try:
            progress = _report_time(client, app_id, "worker:1")
        finally:
            proc.wait(timeout=300)
            reader.join(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    failed = [line for line in lines if "Task instance state updated" in line and "new_state=failed" in line]
    if not failed:
        raise RuntimeError("the Airflow task did not fail:\n" + "".join(lines[-60:]))
    return _log_time(failed[0]) - (progress + FREEZE_AFTER)  # behave.py acts FREEZE_AFTER s after its report


def bench_failure(client: TonyClient, repeat: int, airflow_env: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, mode in (("sigstop_executor", "stop-executor"), ("sigkill_executor", "kill-executor")):
        runs = [_timed(functools.partial(detection, client, mode, 5.0)) for _ in range(repeat)]
        out[name] = {k: stats([r[k] for r in runs]) for k in runs[0]}
        if SMOKE and mode == "stop-executor":
            out[name]["to_airflow_task_failed"] = "not in a smoke run: the same DAG as for SIGKILL, one signal only"
            continue
        out[name]["to_airflow_task_failed"] = stats(
            [_timed(functools.partial(airflow_detection, client, mode, airflow_env)) for _ in range(repeat)]
        )
    out["config"] = {
        "heartbeat_interval": 1.0,
        "heartbeat_timeout": 5.0,
        "client_poll_interval": 1.0,
        "operator_poll_interval": 1.0,
    }
    return out


# ---------------------------------------------------------------- 4. resume cost


def bench_resume(client: TonyClient, repeat: int) -> dict[str, Any]:
    redone, restore = [], []
    for _ in range(repeat):
        ckpt = f"/tmp/bench-ckpt-{time.time_ns()}"
        args = ["--steps", "60", "--every", "10", "--fail-at", "35"]
        spec = job(
            {"worker": {"memory": "1 GiB", "script": str(COUNT), "args": args}},
            checkpoint={"dir": ckpt, "poll_interval": 0.5},
        )
        first = client.wait(client.submit(spec, attempt=1), poll_interval=0.5, emit=lambda _l: None)
        second = client.wait(client.submit(spec, attempt=2), poll_interval=0.5, emit=lambda _l: None)
        assert not first.succeeded and second.succeeded
        task = second.am_state.task("worker:0")
        redone.append(35 - task.restored_step)
        took = [float(m) for e in second.am_state.events for m in re.findall(r"restored checkpoint .* in ([\d.]+)s", e)]
        restore.extend(took)
        client.hdfs().delete(ckpt, recursive=True)
    return {
        "steps_redone": stats(redone),
        "checkpoint_interval": 10,
        "killed_after_step": 35,
        "restore_seconds": stats(restore),
    }


# ---------------------------------------------------------------- 5. tracking cost


def _am_container_pid(app_id: str) -> int:
    """The AM container's top process: skein's ApplicationMaster JVM, whose child runs tony's AM."""
    suffix = app_id.split("_", 1)[1]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
                cwd = os.readlink(proc / "cwd")
            except OSError:
                continue
            if "skein.ApplicationMaster" in cmd and suffix in cwd:
                return int(proc.name)
    raise LookupError(app_id)


def bench_tracking(client: TonyClient, seconds: float, concurrent: int) -> dict[str, Any]:
    """Per hour of following a running job; the skein driver JVM is counted with the Python process."""
    tasks = 2 if SMOKE else 8
    sleepers = job(
        {"worker": {"instances": tasks, "memory": "128 MiB", "script": str(BEHAVE), "args": ["sleep"]}}, am_memory=384
    )
    app_id = client.submit(sleepers)
    try:
        wait(lambda: (d := client.am_state(app_id)) and d.milestone_wall(MILESTONE_ALL_USER_STARTED), 300, "the tasks")
        am = _am_container_pid(app_id)
        am_before = proctree.usage(am)
        # Polling mode: this process (and its skein driver) follows the job the way the operator does.
        from airflow_provider_tony.yarn.follower import Follower

        follower = Follower(app_id, startup_timeout=600, am_stale_timeout=600)
        client.poll(follower, emit=lambda _l: None)
        before, t0 = proctree.usage(os.getpid()), time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(min(5.0, seconds))
            client.poll(follower, emit=lambda _l: None)
        after, elapsed = proctree.usage(os.getpid()), time.monotonic() - t0
        am_after = proctree.usage(am)
        am_cpu = (am_after["cpu"] - am_before["cpu"]) / elapsed
    finally:
        client.kill(app_id)
    deferrable = bench_triggers(client, seconds, concurrent)
    return {
        "am_cpu_seconds_per_hour_8_tasks": round(am_cpu * 3600, 1),
        "am_rss_mib_8_tasks": round(am_after["rss_mib"], 1),
        "polling_cpu_seconds_per_hour": round((after["cpu"] - before["cpu"]) / elapsed * 3600, 1),
        "polling_rss_mib": round(after["rss_mib"], 1),
        "polling_jvms": after["jvms"],
        **deferrable,
        "poll_interval_s": 5.0,
        "measured_seconds": seconds,
        "note": "CPU and RSS count whole process trees: the AM is skein's ApplicationMaster JVM with tony's "
        "AM under it; polling and the triggerer include their skein driver JVM",
    }


def bench_triggers(client: TonyClient, seconds: float, concurrent: int) -> dict[str, Any]:
    """``concurrent`` TonyTriggers in one event loop, as the triggerer runs them."""
    spec = job(
        {"worker": {"instances": 1, "memory": "128 MiB", "script": str(BEHAVE), "args": ["sleep"]}}, am_memory=384
    )
    apps = [client.submit(spec) for _ in range(concurrent)]
    try:
        wait(
            lambda: all((d := client.am_state(a)) is not None and d.app_state == "RUNNING" for a in apps),
            900,
            f"{concurrent} jobs to run",
        )
        code = (
            "import asyncio, json, os, sys\n"
            f"sys.path.insert(0, {str(REPO / 'bench')!r})\n"
            "import proctree\n"
            "from airflow_provider_tony.triggers.tony import TonyTrigger\n"
            f"apps = {apps!r}\n"
            "async def one(app):\n"
            "    trig = TonyTrigger(app_id=app, yarn_conn_id='tony_yarn_default', poll_interval=5.0,\n"
            "                       startup_timeout=600, am_stale_timeout=600)\n"
            "    async for _ in trig.run():\n"
            "        return\n"
            "async def main():\n"
            "    tasks = [asyncio.create_task(one(a)) for a in apps]\n"
            f"    await asyncio.sleep({2 if SMOKE else 15})  # the first polls start the skein driver\n"
            "    before = proctree.usage(os.getpid())\n"
            f"    await asyncio.sleep({seconds})\n"
            "    after = proctree.usage(os.getpid())\n"
            "    for t in tasks: t.cancel()\n"
            "    await asyncio.gather(*tasks, return_exceptions=True)\n"
            "    print(json.dumps({'cpu': after['cpu'] - before['cpu'], 'rss_mib': after['rss_mib'],\n"
            "                      'jvms': after['jvms']}))\n"
            "asyncio.run(main())\n"
        )
        out = subprocess.run(
            [PY, "-c", code],
            capture_output=True,
            text=True,
            timeout=seconds + 300,
            env={**os.environ, "AIRFLOW_HOME": tempfile.mkdtemp()},
        )
        if out.returncode != 0:
            raise RuntimeError(f"the trigger process failed:\n{out.stderr[-3000:]}")
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        for app in apps:
            client.kill(app)
    return {
        "deferrable_jobs": concurrent,
        "deferrable_cpu_seconds_per_hour_per_job": round(doc["cpu"] / seconds * 3600 / concurrent, 1),
        "deferrable_cpu_seconds_per_hour_all_jobs": round(doc["cpu"] / seconds * 3600, 1),
        "deferrable_rss_mib_triggerer_process": round(doc["rss_mib"], 1),
        "deferrable_rss_mib_per_job": round(doc["rss_mib"] / concurrent, 1),
        "deferrable_jvms": doc["jvms"],
    }


# ---------------------------------------------------------------- 6. scale on paper


def bench_scale(cpu_clock: Callable[[], float] = time.process_time) -> dict[str, Any]:
    """The AM's bookkeeping for 100 and 1000 tasks, with ``cpu_clock`` (seconds) timing it."""
    from airflow_provider_tony.runtime.state import JobTracker

    out = {}
    for tasks in (100, 1000):
        spec = job({"worker": {"instances": tasks, "memory": "128 MiB", "command": ["true"]}})
        tracker = JobTracker(spec, 0.0)
        t0 = cpu_clock()
        for i, task_id in enumerate(spec.task_ids()):
            tracker.register(task_id, Registration(host=f"node{i % 50}", port=20000 + i), 1.0)
        register_cpu = cpu_clock() - t0
        tracker.cluster_doc(2.0)
        rounds, t0 = 20, cpu_clock()
        size = 0
        for r in range(rounds):
            now = 3.0 + r
            for task_id in spec.task_ids():
                tracker.heartbeat(
                    task_id,
                    Heartbeat(
                        seq=r,
                        user_started=True,
                        progress=Progress(step=r, epoch=0, time=now, total_steps=100, metrics={"loss": 0.5}),
                    ),
                    now,
                )
            tracker.check(now)
            size = len(tracker.document(now, now, r, "application_0_1").to_json())
        per_round = (cpu_clock() - t0) / rounds
        out[f"{tasks}_tasks"] = {
            "register_all_cpu_ms": round(register_cpu * 1000, 2),
            "cpu_ms_per_heartbeat_round": round(per_round * 1000, 2),
            "state_document_kib": round(size / 1024, 1),
        }
    return out


# ---------------------------------------------------------------- main


@functools.cache
def airflow_env() -> dict[str, str]:
    home = Path(os.environ["TONY_DEVCLUSTER_HOME"]) / "bench-airflow"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "bench" / "dags"),
    }
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True)
    return env


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# Benchmark results ({doc['date']})",
        "",
        f"Machine: {doc['machine']['cores']} cores, {doc['machine']['memory_gib']} GiB; "
        f"Python {doc['versions']['python']}, TensorFlow {doc['versions'].get('tensorflow')}, "
        f"Airflow {doc['versions'].get('airflow')}, skein {doc['versions'].get('skein')}, Hadoop 3.4.2.",
        "",
    ]

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and {"median", "min", "max"} <= set(value):
            lines.append(f"| {prefix} | {value['median']} | {value['min']} | {value['max']} | {value['n']} |")
        elif isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix} / {key}" if prefix else key, sub)
        else:
            lines.append(f"| {prefix} | {value} | | | |")

    for name, section in doc["benchmarks"].items():
        lines += [f"## {name}", "", "| measure | median | min | max | n |", "|---|---|---|---|---|"]
        walk("", section)
        lines.append("")
    return "\n".join(lines)


def versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {"python": platform.python_version()}
    for pkg, key in (("tensorflow-cpu", "tensorflow"), ("apache-airflow", "airflow"), ("skein", "skein")):
        try:
            out[key] = version(pkg)
        except Exception:  # noqa: BLE001
            out[key] = "?"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=",".join(ALL))
    parser.add_argument("--tracking-seconds", type=float, default=120)
    parser.add_argument("--concurrent-triggers", type=int, default=20)
    parser.add_argument("--smoke", action="store_true", help="the smallest round of each section: does it run?")
    parser.add_argument(
        "--training-rounds",
        type=int,
        default=8,
        help="rounds of by hand / bare YARN / TonyOperator for the training benchmark (noisier than the others)",
    )
    args = parser.parse_args()
    if args.smoke:
        global SMOKE
        SMOKE = True
        args.repeat, args.training_rounds, args.tracking_seconds, args.concurrent_triggers = 1, 1, 3.0, 2
    wanted = args.only.split(",")
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "versions": versions(),
        "machine": {
            "cores": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        },
        "repeat": args.repeat,
        "smoke": args.smoke,
        "benchmarks": {},
    }
    previous = RESULTS / "latest.json"
    if previous.exists() and set(wanted) != set(ALL):
        # A partial run (--only) updates its sections and keeps the others.
        doc["benchmarks"] = json.loads(previous.read_text()).get("benchmarks", {})
    with TonyClient.from_env() as client:
        for name in wanted:
            started = time.monotonic()
            print(f"== {name}", flush=True)
            if name == "scale":
                doc["benchmarks"][name] = bench_scale()
            elif name == "startup":
                doc["benchmarks"][name] = bench_startup(client, args.repeat, airflow_env())
            elif name == "failure":
                doc["benchmarks"][name] = bench_failure(client, args.repeat, airflow_env())
            elif name == "resume":
                doc["benchmarks"][name] = bench_resume(client, args.repeat)
            elif name == "training":
                doc["benchmarks"][name] = bench_training(client, args.training_rounds, airflow_env())
            elif name == "tracking":
                doc["benchmarks"][name] = bench_tracking(client, args.tracking_seconds, args.concurrent_triggers)
            doc["benchmarks"][name]["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
            print(json.dumps(doc["benchmarks"][name], indent=1), f"({time.monotonic() - started:.0f}s)", flush=True)
            (RESULTS / "latest.json").write_text(json.dumps(doc, indent=2) + "\n")
            (RESULTS / "latest.md").write_text(markdown(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
