"""``TonyClient.submit`` as four phases, check -> stage -> build -> submit, each doing its part once.

The cluster and HDFS are stubbed at the phase boundaries (``cluster_info``,
the HDFS upload, the REST submitter): what is under test is the order and
that the source tree is scanned once (it used to be scanned by the check and
again by the upload).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn import source as src
from airflow_provider_tony.yarn.checks import ClusterInfo
from airflow_provider_tony.yarn.client import TonyClient
from airflow_provider_tony.yarn.upload_cache import StagedSource

INFO = ClusterInfo(
    max_memory_mb=8192, max_vcores=8, resource_types=["memory-mb", "vcores"], queues=["default"],
    total_memory_mb=16384, total_vcores=16,
)  # fmt: skip


class Submitter:
    def __init__(self) -> None:
        self.specs: list[Any] = []

    def submit(self, app_spec: Any) -> str:
        self.specs.append(app_spec)
        return "application_1_0001"


def _job(tmp_path: Path, **role: Any) -> JobSpec:
    root = tmp_path / "project"
    root.mkdir()
    (root / "train.py").write_text("print('hi')\n")
    return JobSpec.from_dict(
        {
            "name": "pipeline",
            "src_dir": str(root),
            "python": {"interpreter": sys.executable},
            "roles": {"worker": {"script": str(root / "train.py"), **role}},
        }
    )


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> tuple[TonyClient, list[str], Submitter]:
    calls: list[str] = []
    tony = TonyClient(rm_url="http://rm:8088")
    submitter = Submitter()
    real_scan = src.scan

    def scan(root: Any) -> Any:
        calls.append("scan")
        return real_scan(root)

    def info() -> ClusterInfo:
        calls.append("cluster_info")
        return INFO

    def stage_source(src_dir: str, *, tree: Any = None) -> StagedSource:
        calls.append("upload" if tree is not None else "upload+scan")
        return StagedSource("hdfs://nn:8020/src/abc.tar.gz", "abc", 1, True, 0.0, 0.0, 0.0)

    monkeypatch.setattr(src, "scan", scan)
    monkeypatch.setattr(tony, "cluster_info", info)
    monkeypatch.setattr(tony, "stage_source", stage_source)
    monkeypatch.setattr(tony, "submitter", lambda namenodes=None: submitter)

    def stage_runtime() -> str:
        calls.append("runtime")
        return "hdfs://nn:8020/cache/tony_runtime-abc.zip"

    monkeypatch.setattr(tony, "stage_runtime", stage_runtime)
    return tony, calls, submitter


def test_submit_runs_the_phases_in_order_and_scans_the_source_once(client: Any, tmp_path: Path) -> None:
    tony, calls, submitter = client
    assert tony.submit(_job(tmp_path), extra_tags=["tony-run:r"]) == "application_1_0001"
    assert calls == ["scan", "cluster_info", "upload", "runtime"]
    (app_spec,) = submitter.specs
    assert "tony-run:r" in app_spec.tags
    worker = app_spec.services["worker"]
    assert worker.files["src"].source == "hdfs://nn:8020/src/abc.tar.gz"
    # The runtime comes from the upload cache, not shipped from local disk with every job.
    assert worker.files[C.RUNTIME_ZIP].source == "hdfs://nn:8020/cache/tony_runtime-abc.zip"


def test_a_failed_check_stages_nothing(client: Any, tmp_path: Path) -> None:
    tony, calls, submitter = client
    with pytest.raises(SpecError, match="memory"):
        tony.submit(_job(tmp_path, memory="64 GiB"))
    assert "upload" not in calls and submitter.specs == []
