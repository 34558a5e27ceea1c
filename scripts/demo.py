#!/usr/bin/env python3
"""`make demo`: run the tony_nightly_retrain DAG end to end on the local cluster.

Uses a throw-away Airflow home under the cluster's state directory (SQLite).
First lands yesterday's partition of the digits on HDFS (the
tony_digits_partition DAG, whose data asset schedules the retrain), then runs
tony_nightly_retrain for the same day with `airflow dags test`, shows the
operator's own log lines, and ends by saying where the model landed on HDFS.
The retrain's quality gate compares the model with the one an earlier demo
published: a refusal is the example doing its job, said as such, not a failed
demo. The demo runs unattended, so it sets the DAG's ``tolerance`` param to 0
(``UNATTENDED``): a model a little worse than the published one is refused, never
held for a person's approval, which ``airflow dags test`` would wait on for the
approval's 12 hours.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pendulum

REPO = Path(__file__).resolve().parent.parent
# The retrain's run conf: no model waits on a person (the DAG's approval), since no one answers a demo.
UNATTENDED: dict[str, str] = {"tolerance": "0"}


def retrain_command(airflow: str, day: str) -> list[str]:
    """The ``airflow dags test`` line that trains on ``day``'s partition, unattended (``UNATTENDED``)."""
    return [airflow, "dags", "test", "tony_nightly_retrain", day, "--conf", json.dumps(UNATTENDED)]


def main() -> int:
    home = Path(os.environ["TONY_DEVCLUSTER_HOME"]) / "airflow"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
    yesterday = pendulum.now("Europe/Amsterdam").subtract(days=1).start_of("day").add(hours=2, minutes=30)
    print(f"writing the digits partition for {yesterday.to_date_string()} to HDFS ...", flush=True)
    wrote = subprocess.run(
        [airflow, "dags", "test", "tony_digits_partition", yesterday.isoformat()],
        env=env,
        capture_output=True,
        text=True,
    )
    written = re.findall(r"wrote \d+ records in \d+ files to \S+", wrote.stdout + wrote.stderr)
    if wrote.returncode != 0 or not written:
        print((wrote.stdout + wrote.stderr)[-4000:])
        print("the partition could not be written")
        return 1
    print(f"  {written[-1]}", flush=True)
    print(f"running tony_nightly_retrain for {yesterday.to_date_string()} on the local YARN cluster ...", flush=True)
    proc = subprocess.Popen(
        retrain_command(airflow, yesterday.isoformat()),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    result = None
    state = None
    refused = None
    published = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if "operators.tony.TonyOperator" in line or "hooks.yarn" in line:
            message = re.sub(r"^\S+\s+\[\w+\s*\]\s+", "", line).split(" [airflow.task")[0]
            print("  " + message.rstrip(), flush=True)
            if message.startswith("result: "):
                result = json.loads(message[len("result: ") :])
            elif message.startswith("quality gate FAILED"):
                refused = message.strip()
            elif found := re.match(r"model (\S+) published: asset", message):
                published = found.group(1)  # the gate's version folder (the result line is logged before the gate)
        elif "DagRun Finished" in line:
            state = re.search(r"state=(\w+)", line).group(1)
    proc.wait()
    print(f"DAG run {state}")
    if refused is not None and result is not None:
        # An earlier demo published a better model (another day's data): the gate kept it.
        print(
            "the quality gate kept the model an earlier demo published, as it should: this run's "
            f"model is at {result['model_dir']}.rejected-{result['application_id']}. To publish afresh, "
            "remove published.json beside the day folders on HDFS (or start over with make clean)."
        )
        return 0
    if state != "success" or result is None:
        return 1
    model_dir = published or result["model_dir"]
    print(f"model on HDFS: {os.environ['TONY_WEBHDFS_URL']}/explorer.html#{model_dir}  (path {model_dir})")
    print(f"YARN application: {result['tracking_url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
