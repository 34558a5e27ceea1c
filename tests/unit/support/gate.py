"""Stands in for a finished training run as the quality gate sees it: an exported model on a fake HDFS.

``export`` plants a run's model and metrics, ``gated_operator`` is an operator whose
job declares a gate; shared by the gate, conclusion and lineage tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import gate
from airflow_provider_tony.runtime.messages import Progress
from airflow_provider_tony.runtime.spec import JobSpec
from tests.unit.support.hdfs import FakeHdfs
from tests.unit.support.operator import APP, OutletEvents, operator, succeeded

MODEL = "/user/airflow/models/digits"


OTHER_APP = "application_1700000000000_0041"


def spec(mode: str = "max", record: str | None = None, metric: str = "val_accuracy") -> JobSpec:
    return JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"model_dir": MODEL},
            "quality_gate": {"metric": metric, "mode": mode, "record": record},
        }
    )


def export(hdfs: FakeHdfs, tmp: Path, app_id: str, accuracy: float | None) -> None:
    """What the executor leaves for a gated job: the model in its candidate folder, with its metadata."""
    local = tmp / f"model-{app_id}"
    local.mkdir()
    (local / "saved_model.pb").write_bytes(app_id.encode())
    metrics = {} if accuracy is None else {"val_accuracy": accuracy}
    record = gate.model_record(app_id, Progress(step=60, metrics=metrics), MODEL)
    (local / gate.MODEL_METADATA).write_bytes(record.to_json())
    hdfs.makedirs("/user/airflow/models")
    hdfs.upload(gate.candidate_dir(MODEL, app_id), str(local))


def model_bytes(hdfs: FakeHdfs, path: str | None = None) -> bytes:
    """The model's bytes at ``path``; by default the published one's (what the pointer names)."""
    if path is None:
        published = gate.published_record(hdfs, spec())
        assert published is not None, "nothing is published"
        path = published.model_dir
    return (hdfs.root / path.lstrip("/") / "saved_model.pb").read_bytes()


def gated_operator(tmp_path: Path, **kwargs: Any) -> tuple[Any, Any, dict[str, Any], FakeHdfs]:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    op, hook, ctx = operator(succeeded(), **kwargs)
    op.job["quality_gate"] = {"metric": "val_accuracy"}
    hook.webhdfs_for = lambda spec: hdfs
    hook.history_dir = "/user/airflow/tony/history"
    ctx["outlet_events"] = OutletEvents()
    return op, hook, ctx, hdfs


class SubmitClient:
    """What ``tony submit`` uses of ``TonyClient``: submit, wait, webhdfs_for, history_dir."""

    def __init__(self, hdfs: FakeHdfs) -> None:
        self._hdfs = hdfs
        self.history_dir = "/user/airflow/tony/history"

    def submit(self, spec: JobSpec, *, extra_tags: list[str]) -> str:
        return APP

    def wait(self, app_id: str, **kwargs: Any) -> Any:
        return succeeded()

    def final_cost(self, app_id: str) -> None:
        return None

    def webhdfs_for(self, spec: JobSpec) -> FakeHdfs:
        return self._hdfs

    def __enter__(self) -> SubmitClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass
