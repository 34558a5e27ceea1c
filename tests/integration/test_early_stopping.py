"""The median-stopping rule on the dev cluster (``early_stopping``): a losing trial stops itself early,
as a success with the stop in its state document; a trial ahead of the finished ones runs to its
end and leaves its own curve in the sweep folder for the next trials.

The finished trials are curve files written here into the sweep folder on HDFS, as a finished
trial's AM writes them (``runtime/median_stop.curve_document``); the trials are
``jobs/curve.py``, whose loss is ``2 / step``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_provider_tony.runtime.median_stop import Rule, curve_document
from airflow_provider_tony.runtime.spec import JobSpec
from tests.integration._runtime import job, run

pytestmark = pytest.mark.cluster

CURVE = str(Path(__file__).parent / "jobs" / "curve.py")
LOSS = Rule("loss", "min")


def _trial(python_exe: str, sweep: str, steps: int, pause: float) -> JobSpec:
    return job(
        python_exe,
        {"worker": {"instances": 1, "memory": "256 MiB", "script": CURVE, "args": [str(steps), str(pause)]}},
        early_stopping={"rule": "median", "metric": "loss", "mode": "min", "sweep": sweep, "grace_steps": 2},
    )


def test_a_losing_trial_stops_itself_early_as_a_success(tony_client, app_tag, python_exe) -> None:
    sweep = f"{tony_client.base_path}/pytest/{app_tag}/sweep"
    hdfs = tony_client.hdfs()
    # A finished trial far ahead: loss 0 at every step, so any step of this trial is worse.
    hdfs.write(f"{sweep}/application_0_0001.json", data=curve_document("application_0_0001", LOSS, {0: 0.0}))
    steps = 200  # 0.25 s a step: 50 s if it ran to its end
    result = run(tony_client, _trial(python_exe, sweep, steps, 0.25), app_tag)
    assert result.succeeded, result.diagnostics
    doc = result.am_state
    assert doc is not None and doc.early_stopped is not None, doc
    stop = doc.early_stopped
    assert stop.metric == "loss" and stop.median == 0.0 and stop.finished_trials == 1
    assert 2 <= stop.step < steps // 2, stop  # not before grace_steps, and well before the end
    assert stop.value == pytest.approx(2.0 / stop.step)
    assert "stopped early by the median rule" in result.diagnostics
    assert doc.tasks["worker:0"].state == "STOPPED"
    stored = tony_client.stored_history(result.app_id)
    assert stored is not None and stored.state is not None and stored.state.early_stopped == stop
    assert sorted(hdfs.list(sweep)) == ["application_0_0001.json"], "a stopped trial leaves no curve"


def test_a_trial_ahead_of_the_finished_ones_runs_to_its_end_and_leaves_its_curve(
    tony_client, app_tag, python_exe
) -> None:
    sweep = f"{tony_client.base_path}/pytest/{app_tag}/sweep"
    hdfs = tony_client.hdfs()
    hdfs.write(f"{sweep}/application_0_0001.json", data=curve_document("application_0_0001", LOSS, {0: 10.0}))
    steps = 6
    result = run(tony_client, _trial(python_exe, sweep, steps, 0.2), app_tag)
    assert result.succeeded, result.diagnostics
    assert result.am_state is not None and result.am_state.early_stopped is None
    with hdfs.read(f"{sweep}/{result.app_id}.json") as reader:
        body = json.loads(reader.read())
    assert body["metric"] == "loss" and body["mode"] == "min" and body["application_id"] == result.app_id
    assert body["points"] == [[s, pytest.approx(2.0 / s)] for s in range(1, steps + 1)]
    assert not [n for n in hdfs.list(sweep) if n.startswith(".")], "no temporary file left behind"
