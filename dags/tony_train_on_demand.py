"""Train on demand from the Airflow UI: fill the trigger form, get a model.

Every value is checked twice: by the form's JSON schema before the run is
created, and by the operator (JobSpec validation and the cluster's limits)
before anything reaches YARN. Values reach the training script as arguments
of an argument list, never through a shell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_provider_tony.operators.tony import TonyOperator

TRAINING = Path(__file__).resolve().parent / "training"


def on_demand_dag(dag_id: str, doc: str, **mode: Any) -> DAG:
    """The trigger-form DAG; ``mode`` goes to the operator (``deferrable=False`` polls from the worker)."""
    with DAG(
        dag_id=dag_id,
        schedule=None,
        catchup=False,
        tags=["tony", "training", "on-demand"],
        doc_md=doc,
        params={
            "workers": Param(
                2, type="integer", minimum=1, maximum=4, title="Workers", description="TensorFlow workers (1-4)"
            ),
            "epochs": Param(3, type="integer", minimum=1, maximum=20, title="Epochs"),
            "steps_per_epoch": Param(
                20,
                type="integer",
                minimum=5,
                maximum=1000,
                title="Steps per epoch",
                description="Batches per epoch (5-1000): how long the run trains",
            ),
            "learning_rate": Param(0.05, type="number", exclusiveMinimum=0, maximum=1, title="Learning rate"),
            "strategy": Param(
                "multi_worker_mirrored",
                enum=["multi_worker_mirrored", "parameter_server"],
                title="Distribution strategy",
            ),
            "dataset_date": Param(
                "2026-11-01",
                type="string",
                format="date",
                title="Dataset date",
                description="Which daily partition to train on (YYYY-MM-DD)",
            ),
            "tensorboard": Param(
                False,
                type="boolean",
                title="TensorBoard",
                description="Serve TensorBoard while training (the task page links to it)",
            ),
            "run_label": Param(
                "adhoc",
                type="string",
                minLength=1,
                maxLength=64,
                title="Run label",
                description="Free text shown in the job name and passed to the script",
            ),
        },
    ) as dag:

        @task
        def build_job(params: dict[str, Any] | None = None) -> dict[str, Any]:
            """The JobSpec for the chosen strategy; the operator validates it again."""
            assert params is not None
            common = ["--learning-rate", str(params["learning_rate"])]
            steps = int(params["steps_per_epoch"])
            if params["strategy"] == "parameter_server":
                script = str(TRAINING / "digits_ps.py")
                roles = {
                    "chief": {
                        "memory": "1 GiB",
                        "script": script,
                        "args": ["--steps", str(steps * int(params["epochs"])), *common],
                    },
                    "worker": {"instances": int(params["workers"]), "memory": "1 GiB", "script": script},
                    "ps": {"memory": "1 GiB", "script": script},
                }
            else:
                roles = {
                    "worker": {
                        "instances": int(params["workers"]),
                        "memory": "1 GiB",
                        "script": str(TRAINING / "digits_mwms.py"),
                        "args": [
                            "--epochs",
                            str(params["epochs"]),
                            "--steps-per-epoch",
                            str(steps),
                            "--partition",
                            f"{params['dataset_date']}/{params['run_label']}",
                            *common,
                        ],
                    }
                }
            if params.get("tensorboard"):  # linked from the task page ("TensorBoard") while it serves
                roles["tensorboard"] = {"memory": "1 GiB", "module": "airflow_provider_tony.runtime.tensorboard"}
            return {"name": "on-demand-digits", "roles": roles, "heartbeat_timeout": 60, "deadline": 3600}

        TonyOperator(task_id="train", job=build_job(), poll_interval=2.0, **mode)
    return dag


# The triggerer follows the job (Airflow's [operators] default_deferrable decides; the stack sets True) ...
train_on_demand = on_demand_dag("tony_train_on_demand", __doc__ or "")
# ... or the worker does, holding its slot: the same form, links and result.
train_on_demand_in_worker = on_demand_dag(
    "tony_train_on_demand_in_worker",
    (__doc__ or "") + "\n\nThis one follows the job from a worker slot (polling), with no triggerer.",
    deferrable=False,
)
