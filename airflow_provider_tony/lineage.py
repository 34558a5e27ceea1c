"""OpenLineage facets for a TonY job: what it read, what it wrote, and how the run went.

Airflow's OpenLineage provider (``apache-airflow-providers-openlineage``, the
``openlineage`` extra) calls the operator's ``get_openlineage_facets_on_complete``
/ ``..._on_failure`` after the task; they come here. Inputs are the HDFS
paths the job read (its declared inputs, a warm-start checkpoint folder,
``hdfs://`` files and archives); outputs are the checkpoint folder and, when
the model was published, the model folder (a model the quality gate rejected
is not an output). The run facets carry the YARN application id (the standard
``externalQuery`` facet, source ``yarn``) and a ``tonyJob`` facet with the
deciding task's metrics, the step, the in-application restarts and the gate's
verdict. Only the provider imports this module (through the operator's
methods), so the provider stays optional.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Any

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.generated.base import RunFacet
from openlineage.client.generated.external_query_run import ExternalQueryRunFacet

from airflow_provider_tony import __version__
from airflow_provider_tony.runtime.hdfs_io import hdfs_path
from airflow_provider_tony.runtime.spec import JobSpec

__all__ = ["PRODUCER", "SCHEMA_FILE", "TonyJobRunFacet", "job_datasets", "operator_lineage", "tony_run_facet"]

#: Who produced the facets (OpenLineage asks for a URI naming the integration and its version).
PRODUCER = f"urn:airflow-provider-tony:{__version__}"
#: The ``tonyJob`` facet's JSON Schema, shipped in the package (the project has no public home to serve it from).
SCHEMA_FILE = Path(__file__).parent / "facets" / "TonyJobRunFacet.json"
SCHEMA_URL = f"urn:airflow-provider-tony:{__version__}:facets/TonyJobRunFacet.json#/$defs/TonyJobRunFacet"


def _name(location: str) -> str:
    return hdfs_path(location).rstrip("/") or "/"


def _authority(location: str) -> str:
    """``hdfs://warehouse/x`` -> ``warehouse``; a plain path (or ``hdfs:///x``) -> ``""``."""
    return urllib.parse.urlsplit(location).netloc if location.startswith("hdfs://") else ""


def _locations(spec: JobSpec) -> tuple[list[str], list[str]]:
    """The HDFS locations a job reads and writes, as written in its JobSpec."""
    inputs: list[str] = []
    # ``inputs`` (name -> InputSpec with a ``path``) is read by attribute, so this works with and without it.
    for declared in (getattr(spec, "inputs", None) or {}).values():
        path = getattr(declared, "path", None)
        if isinstance(path, str) and path:
            inputs.append(path)
    if spec.checkpoint.warm_start_from:
        inputs.append(spec.checkpoint.warm_start_from)
    inputs += [src for src in spec.files.values() if src.startswith("hdfs://")]
    if spec.src_dir and spec.src_dir.startswith("hdfs://"):
        inputs.append(spec.src_dir)
    archive = getattr(spec.python, "archive", None)
    if isinstance(archive, str) and archive.startswith("hdfs://"):
        inputs.append(archive)
    outputs = [d for d in (spec.checkpoint.dir, spec.checkpoint.model_dir) if d]
    return inputs, outputs


def job_datasets(spec: JobSpec) -> tuple[list[str], list[str]]:
    """The HDFS paths a job reads and writes, as declared in its JobSpec (pure: no cluster).

    Inputs: declared ``inputs`` (their paths or globs, as rendered), the warm
    start folder, ``hdfs://`` files, source and environment archives. Outputs:
    the checkpoint folder and the model folder.
    """
    inputs, outputs = _locations(spec)
    return list(dict.fromkeys(map(_name, inputs))), list(dict.fromkeys(map(_name, outputs)))


def _datasets(locations: list[str], namespace: str) -> list[tuple[str, str]]:
    """``(namespace, name)`` of each location: a location on another NameNode (``hdfs://warehouse/x``)
    is a dataset of that NameNode's namespace, as OpenLineage names HDFS datasets; the rest the
    default filesystem's (``namespace``)."""
    default = _authority(namespace)
    found = [
        (f"hdfs://{auth}" if (auth := _authority(loc)) and auth != default else namespace, _name(loc))
        for loc in locations
    ]
    return list(dict.fromkeys(found))


@attr.define
class TonyJobRunFacet(RunFacet):
    """How a TonY job went: the deciding task's last metrics and step, restarts, the quality gate, the cost.

    Its JSON Schema ships with the package (``facets/TonyJobRunFacet.json``),
    the way Airflow's OpenLineage provider ships its own facets' schemas.
    """

    applicationId: str = attr.field(default="")  # noqa: N815 - OpenLineage's camelCase
    finalState: str = attr.field(default="")  # noqa: N815
    step: int | None = attr.field(default=None)
    metrics: dict[str, Any] = attr.field(factory=dict)
    restarts: list[dict[str, Any]] = attr.field(factory=list)
    qualityGate: dict[str, Any] | None = attr.field(default=None)  # noqa: N815
    cost: dict[str, int] | None = attr.field(default=None)

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL


def tony_run_facet(result: dict[str, Any] | None, gate: dict[str, Any] | None) -> TonyJobRunFacet:
    """The ``tonyJob`` run facet from the task's XCom result and the gate's verdict."""
    value = result or {}
    return TonyJobRunFacet(
        applicationId=str(value.get("application_id") or ""),
        finalState=str(value.get("final_state") or ""),
        step=value.get("step"),
        metrics=dict(value.get("metrics") or {}),
        restarts=list(value.get("restarts") or []),
        qualityGate=gate,
        cost=value.get("cost"),
        producer=PRODUCER,
    )


def operator_lineage(
    spec: JobSpec | None,
    namespace: str,
    result: dict[str, Any] | None,
    gate: dict[str, Any] | None,
    *,
    model_published: bool,
) -> Any:
    """The provider's ``OperatorLineage`` for one task run (inputs, outputs, run facets)."""
    if spec is None:
        return OperatorLineage()
    read, written = _locations(spec)
    inputs, outputs = _datasets(read, namespace), _datasets(written, namespace)
    model = _datasets([spec.checkpoint.model_dir], namespace)[0] if spec.checkpoint.model_dir else None
    if model is not None and not model_published:
        outputs = [o for o in outputs if o != model]
    run_facets: dict[str, Any] = {"tonyJob": tony_run_facet(result, gate)}
    app_id = (result or {}).get("application_id")
    if app_id:
        run_facets["externalQuery"] = ExternalQueryRunFacet(externalQueryId=str(app_id), source="yarn")
    return OperatorLineage(
        inputs=[InputDataset(namespace=ns, name=path) for ns, path in inputs],
        outputs=[OutputDataset(namespace=ns, name=path) for ns, path in outputs],
        run_facets=run_facets,
    )
