"""The provider on the Kerberized HA profile: real KDC, SPNEGO, delegation tokens, real failovers.

- the job's HDFS token is filed for the nameservice (``ha-hdfs:tony``), as Hadoop's clients look
  it up: YARN localises the job's files from ``hdfs://tony`` with it, and the containers' WebHDFS
  uses it on whichever NameNode is active. The active NameNode is SIGKILLed mid-job under a
  real MultiWorkerMirroredStrategy job: checkpoint uploads go on over the other NameNode with
  the same token, the model is published, one application, no restart.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.spec import JobSpec
from tests._ha import the_active_namenode_killed_mid_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.secure]


def test_the_nameservice_token_carries_the_job_across_a_namenode_failover(krb: Any, tag: str, ckpt: str) -> None:
    """Submit, the active NameNode SIGKILLed, then checkpoint uploads and the model's publication
    over the other NameNode with the token filed for the nameservice."""
    assert "ha-hdfs:tony" in krb.submitter().tokens(), "the HDFS token is not filed for the nameservice"
    the_active_namenode_killed_mid_job(krb, krb.hdfs(), ckpt, "pytest-ha-secure-nn", tag)


REPO = Path(__file__).resolve().parents[2]


def test_a_job_reads_its_inputs_and_publishes_its_model_on_a_second_namenode(krb: Any, tag: str, ckpt: str) -> None:
    """Inputs and the model on ``hdfs://warehouse`` (another HDFS), checkpoints on the cluster's own,
    each with its own NameNode's token."""
    sys.path.insert(0, str(REPO / "dags" / "training"))
    from digits_data import write_partition

    warehouse = krb._krb.webhdfs(os.environ["TONY_WAREHOUSE_WEBHDFS_URL"])  # the test's own SPNEGO client
    root = f"/tmp/pytest-warehouse-{uuid.uuid4().hex[:8]}"
    partition, model_dir = f"{root}/dt=2026-12-01", f"{root}/model"
    write_partition(warehouse, partition, "2026-12-01")
    try:
        spec = JobSpec.from_dict(
            {
                "name": "pytest-ha-secure-warehouse",
                "roles": {
                    "worker": {
                        "memory": "1 GiB",
                        "script": str(REPO / "dags/training/digits_mwms.py"),
                        "args": ["--epochs", "1", "--steps-per-epoch", "5"]
                        + ["--input", "digits_train", "--eval-input", "digits_eval"],
                    }
                },
                "python": {"interpreter": sys.executable},
                "heartbeat_timeout": 60,
                "checkpoint": {"dir": ckpt, "model_dir": f"hdfs://warehouse{model_dir}", "poll_interval": 1},
                "inputs": {
                    "digits_train": {"path": f"hdfs://warehouse{partition}/train"},
                    "digits_eval": {"path": f"hdfs://warehouse{partition}/eval"},
                },
            }
        )
        (other,) = krb.namenodes(spec).values()
        assert other.token_service.startswith("127.0.0.1:"), other  # a NameNode of its own: filed by its address
        services = krb.submitter(krb.namenodes(spec)).tokens()
        assert {"ha-hdfs:tony", other.token_service} <= set(services), sorted(services)
        app_id = krb.submit(spec, extra_tags=[tag])
        result = krb.wait(app_id, poll_interval=1.0, emit=lambda _: None)
        assert result.succeeded, result.diagnostics
        metrics = result.am_state.tasks["worker:0"].progress.metrics
        assert (metrics["input_records"], metrics["eval_records"]) == (1437, 360), metrics  # every file, read whole
        assert warehouse.status(f"{model_dir}/model.keras", strict=False) is not None, "no model on the second HDFS"
        own = krb.hdfs()
        assert own.status(root, strict=False) is None, "the second HDFS's paths were used on the cluster's own"
        assert own.status(ckpt, strict=False) is not None, "the checkpoints did not go to the cluster's own HDFS"
    finally:
        warehouse.delete(root, recursive=True)
