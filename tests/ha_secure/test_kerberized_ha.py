"""The provider on the Kerberized HA profile: real KDC, SPNEGO, delegation tokens, real failovers.

- the job's HDFS token is filed for the nameservice (``ha-hdfs:tony``), as Hadoop's clients look
  it up: YARN localises the job's files from ``hdfs://tony`` with it, and the containers' WebHDFS
  uses it on whichever NameNode is active. The active NameNode is SIGKILLed mid-job under a
  real MultiWorkerMirroredStrategy job: checkpoint uploads go on over the other NameNode with
  the same token, the model is published, one application, no restart.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.spec import JobSpec
from tests._util import wait_until
from tests.ha_secure.conftest import ha
from tests.integration.dags.training_jobs import STRATEGY_EVERY, STRATEGY_STEPS, strategy_job

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.secure]


def mwms_job(ckpt: str, model_dir: str) -> JobSpec:
    job = strategy_job("mwms-loop", max_restarts=0, ckpt=ckpt, model_dir=model_dir, name="pytest-ha-secure-nn")
    worker = job["roles"]["worker"]
    worker.pop("placement", None)  # one NodeManager: both workers on it
    worker["instances"] = 2
    return JobSpec.from_dict(job)


def test_the_nameservice_token_carries_the_job_across_a_namenode_failover(krb: Any, tag: str, ckpt: str) -> None:
    """Submit, the active NameNode SIGKILLed, then checkpoint uploads and the model's publication
    over the other NameNode with the token filed for the nameservice."""
    assert "ha-hdfs:tony" in krb.submitter().tokens(), "the HDFS token is not filed for the nameservice"
    hdfs = krb.hdfs()
    model_dir = f"{ckpt}-model"
    app_id = krb.submit(mwms_job(ckpt, model_dir), extra_tags=[tag])
    first = wait_until(lambda: remote_checkpoints(hdfs, ckpt), 300, "the first checkpoint on HDFS")[-1]
    killed = ha("active", "nn")
    now_active = ha("failover", "nn")
    assert now_active != killed
    wait_until(
        lambda: remote_checkpoints(hdfs, ckpt)[-1] >= first + 2 * STRATEGY_EVERY or None,
        300,
        f"checkpoint uploads after the failover to {now_active}",
    )
    result = krb.wait(app_id, poll_interval=1.0, emit=lambda _: None)
    assert result.succeeded, result.diagnostics
    assert remote_checkpoints(hdfs, ckpt)[-1] == STRATEGY_STEPS
    assert hdfs.status(model_dir, strict=False) is not None, "the model was not published"
    assert [a.app_id for a in krb.find_by_tags([tag], active_only=False)] == [app_id], "a second application"
    assert result.am_state is not None and result.am_state.restarts == []
