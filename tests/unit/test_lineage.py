"""OpenLineage facets from ``TonyOperator`` through Airflow's OpenLineage provider, no cluster.

The provider's own ``DefaultExtractor`` calls the operator's
``get_openlineage_facets_on_complete``/``_on_failure`` (as its listener does after
a task); the result is put into an OpenLineage ``RunEvent`` of the client's own
classes (their validators run) and serialised with the client's ``Serde``, and
the ``tonyJob`` facet is validated against the JSON Schema shipped in the package.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest

pytest.importorskip("airflow.providers.openlineage")

from airflow.providers.openlineage.extractors.base import DefaultExtractor  # noqa: E402
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState  # noqa: E402
from openlineage.client.serde import Serde  # noqa: E402

from airflow_provider_tony import lineage  # noqa: E402
from airflow_provider_tony.operators.tony import QualityGateFailed  # noqa: E402
from airflow_provider_tony.runtime.messages import Cost  # noqa: E402
from airflow_provider_tony.runtime.spec import JobSpec  # noqa: E402
from tests.unit.support.gate import MODEL, OTHER_APP, export, gated_operator  # noqa: E402
from tests.unit.support.operator import APP, operator, succeeded  # noqa: E402

NAMESPACE = "hdfs://namenode:8020"


def event(lineage_: Any, state: RunState) -> dict[str, Any]:
    """The OpenLineage event the provider would emit around these facets, as JSON."""
    run_event = RunEvent(
        eventType=state,
        eventTime="2026-12-01T18:00:00+00:00",
        run=Run(runId=str(uuid.uuid4()), facets=lineage_.run_facets),
        job=Job(namespace="airflow", name="nightly.train", facets=lineage_.job_facets),
        inputs=lineage_.inputs,
        outputs=lineage_.outputs,
        producer=lineage.PRODUCER,
    )
    return json.loads(Serde.to_json(run_event))


def validate_tony_facet(facets: dict[str, Any]) -> None:
    schema = json.loads(lineage.SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(facets)
    assert facets["tonyJob"]["_schemaURL"].endswith("#/$defs/TonyJobRunFacet")


def test_complete_names_inputs_outputs_application_metrics_and_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    op, hook, ctx = operator(succeeded(), deferrable=False)
    hook.cost = Cost(vcore_seconds=30, memory_mb_seconds=61440, gpu_seconds=4, preempted_vcore_seconds=2, final=True)
    op.job["checkpoint"]["warm_start_from"] = "/user/airflow/tony/checkpoints/nightly/train/yesterday"
    op.job["files"] = {"vocab.txt": f"{NAMESPACE}/data/vocab.txt"}
    monkeypatch.setattr(op, "_lineage_namespace", lambda: NAMESPACE)
    op.execute(ctx)
    found = DefaultExtractor(op).extract_on_complete(ctx["ti"])
    assert found is not None, "the provider's extractor got facets from the operator"
    doc = event(found, RunState.COMPLETE)
    assert {(d["namespace"], d["name"]) for d in doc["inputs"]} == {
        (NAMESPACE, "/user/airflow/tony/checkpoints/nightly/train/yesterday"),
        (NAMESPACE, "/data/vocab.txt"),
    }
    assert {d["name"] for d in doc["outputs"]} == {"/user/airflow/tony/checkpoints/nightly/train/manual__1", MODEL}
    facets = doc["run"]["facets"]
    assert facets["externalQuery"]["externalQueryId"] == APP and facets["externalQuery"]["source"] == "yarn"
    tony = facets["tonyJob"]
    assert tony["applicationId"] == APP and tony["finalState"] == "SUCCEEDED" and tony["step"] == 60
    assert tony["metrics"] == {"val_accuracy": 0.91} and tony["restarts"][0]["failed_task"] == "worker:1"
    assert tony["_producer"] == lineage.PRODUCER
    assert tony["cost"]["memory_mb_seconds"] == 61440 and tony["cost"]["preempted_vcore_seconds"] == 2
    validate_tony_facet(facets)


def test_a_failed_gate_is_in_the_facets_and_its_model_is_not_an_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_tony.runtime import gate

    op, _hook, ctx, hdfs = gated_operator(tmp_path, deferrable=False)
    monkeypatch.setattr(op, "_lineage_namespace", lambda: NAMESPACE)
    spec = JobSpec.from_dict({**op.job, "quality_gate": {"metric": "val_accuracy"}})
    export(hdfs, tmp_path, OTHER_APP, 0.95)
    assert gate.apply(hdfs, spec, OTHER_APP).passed
    export(hdfs, tmp_path, APP, 0.91)
    with pytest.raises(QualityGateFailed):
        op.execute(ctx)
    found = DefaultExtractor(op).extract_on_failure(ctx["ti"])
    assert found is not None
    doc = event(found, RunState.FAIL)
    assert MODEL not in {d["name"] for d in doc["outputs"]}, "a rejected model is not an output"
    verdict = doc["run"]["facets"]["tonyJob"]["qualityGate"]
    assert verdict["passed"] is False and (verdict["value"], verdict["previous"]) == (0.91, 0.95)
    validate_tony_facet(doc["run"]["facets"])


def test_the_schema_refuses_a_facet_without_its_fields() -> None:
    broken = {"tonyJob": {"_producer": lineage.PRODUCER, "_schemaURL": lineage.SCHEMA_URL, "metrics": {}}}
    with pytest.raises(jsonschema.ValidationError, match="applicationId"):
        validate_tony_facet(broken)


def test_declared_inputs_are_read_by_attribute() -> None:
    class Declared:
        path = "/data/clicks/dt=2026-12-01"

    spec = JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "checkpoint": {"dir": "/ckpt/"}})
    object.__setattr__(spec, "inputs", {"clicks": Declared()})
    inputs, outputs = lineage.job_datasets(spec)
    assert inputs == ["/data/clicks/dt=2026-12-01"] and outputs == ["/ckpt"]


def test_hdfs_sources_and_environment_archives_are_inputs_and_paths_keep_their_names() -> None:
    """Code and a packed environment read from HDFS are inputs of the run; a trailing slash is
    dropped (only slashes: a folder named BOX stays BOX)."""
    spec = JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"dir": "/ckpt/BOX/"},
            "src_dir": f"{NAMESPACE}/code/app.tar.gz",
            "python": {"archive": f"{NAMESPACE}/envs/py.tar.gz"},
        }
    )
    assert lineage.job_datasets(spec) == (["/code/app.tar.gz", "/envs/py.tar.gz"], ["/ckpt/BOX"])


def test_declared_inputs_without_a_usable_path_are_skipped_and_the_root_is_slash() -> None:
    class NoPath:
        pass

    class Empty:
        path = ""

    class Root:
        path = f"{NAMESPACE}/"

    spec = JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "checkpoint": {"dir": "/ckpt"}})
    object.__setattr__(spec, "inputs", {"a": NoPath(), "b": Empty()})
    assert lineage.job_datasets(spec) == ([], ["/ckpt"])
    object.__setattr__(spec, "inputs", {"c": Root()})
    assert lineage.job_datasets(spec) == (["/"], ["/ckpt"])


def test_a_spec_without_inputs_still_gives_its_datasets() -> None:
    """``inputs`` is read by attribute: a JobSpec-like object without the field works."""
    from types import SimpleNamespace

    spec = SimpleNamespace(
        checkpoint=SimpleNamespace(warm_start_from=None, dir="/ckpt", model_dir=None),
        files={},
        src_dir=None,
        python=SimpleNamespace(),
    )
    assert lineage.job_datasets(spec) == ([], ["/ckpt"])  # type: ignore[arg-type]


def test_a_job_without_a_model_folder_or_application_has_plain_facets() -> None:
    """No model_dir: the checkpoint folder is the only output, in the namespace given; no application
    id yet (the submit failed): the facet says so with empty strings and no externalQuery facet."""
    spec = JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}, "checkpoint": {"dir": "/ckpt"}})
    found = lineage.operator_lineage(spec, NAMESPACE, None, None, model_published=False)
    assert [(d.namespace, d.name) for d in found.outputs] == [(NAMESPACE, "/ckpt")]
    assert set(found.run_facets) == {"tonyJob"}
    tony = found.run_facets["tonyJob"]
    assert (tony.applicationId, tony.finalState, tony.step, tony.metrics, tony.restarts) == ("", "", None, {}, [])


def test_a_location_on_another_namenode_is_a_dataset_of_that_namenodes_namespace() -> None:
    """OpenLineage names an HDFS dataset by its NameNode: hdfs://warehouse/clicks is not /clicks of the default."""
    spec = JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "inputs": {"clicks": {"path": "hdfs://warehouse/clicks/dt=2026-12-01"}},
            "checkpoint": {"dir": f"{NAMESPACE}/ckpt", "model_dir": "hdfs://ml/models/clicks"},
        }
    )
    published = lineage.operator_lineage(spec, NAMESPACE, None, None, model_published=True)
    assert [(d.namespace, d.name) for d in published.inputs] == [("hdfs://warehouse", "/clicks/dt=2026-12-01")]
    assert [(d.namespace, d.name) for d in published.outputs] == [(NAMESPACE, "/ckpt"), ("hdfs://ml", "/models/clicks")]
    held = lineage.operator_lineage(spec, NAMESPACE, None, None, model_published=False)
    assert [(d.namespace, d.name) for d in held.outputs] == [(NAMESPACE, "/ckpt")]
