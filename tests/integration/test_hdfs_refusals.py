"""HDFS quota refusals on a real NameNode: refused before submit where it can be, else not retried.

The quotas are set with the NameNode's own REST API (WebHDFS ``SETQUOTA``; the
open cluster runs without HDFS permissions, so its user may). A space quota
binds a whole block times the replication per block allocated, so a quota of
1 MiB refuses any write under it; the pre-submit check (``yarn/hdfs_room.py``)
asks for that headroom. A quota that runs out while the job runs is met by the
checkpoint uploader: the task exits 77 and the job fails ``hdfs_refused``, not
retryable, naming the folder. (Write permission is checked the same way, with
CHECKACCESS; both local profiles, the Kerberized one too, run with
``dfs.permissions.enabled=false``, where the NameNode grants every access and
lets every user write anywhere, so that refusal is unit-tested against the
NameNode's answer instead: ``tests/unit/yarn/test_hdfs_room.py``.)
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec
from tests._util import rm_apps, wait_until
from tests.integration.dags.training_jobs import COUNT_STEPS

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

MIB = 1024 * 1024


@pytest.fixture
def hdfs(cluster: Any) -> Any:
    from hdfs import InsecureClient

    return InsecureClient(cluster.webhdfs_url, user=cluster.user)


@pytest.fixture
def folder(hdfs: Any) -> Iterator[str]:
    path = f"/tmp/pytest-quota-{uuid.uuid4().hex[:8]}"
    hdfs.makedirs(path)
    yield path
    hdfs.delete(path, recursive=True)  # its quota goes with it


def webhdfs(cluster: Any, method: str, path: str, **params: str) -> dict[str, Any]:
    answer = httpx.request(
        method,
        f"{cluster.webhdfs_url}/webhdfs/v1{path}",
        params={**params, "user.name": cluster.user},
        timeout=60,
    )
    answer.raise_for_status()
    return dict(answer.json()) if answer.content else {}


def set_space_quota(cluster: Any, path: str, space: int) -> None:
    webhdfs(cluster, "PUT", path, op="SETQUOTA", namespacequota="100000", storagespacequota=str(space))


def job(ckpt: str, steps: int, sleep: float = 0.05) -> JobSpec:
    return JobSpec.from_dict(
        {
            "name": "pytest-hdfs-refusals",
            "roles": {
                "worker": {
                    "memory": "1 GiB",
                    "script": COUNT_STEPS,
                    "args": ["--steps", str(steps), "--every", "10", "--sleep", str(sleep), "--plain"],
                }
            },
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 1.0,
            "heartbeat_timeout": 60,
            "checkpoint": {"dir": ckpt, "poll_interval": 0.5},
        }
    )


@pytest.mark.parametrize("below", ["", "/run-1/checkpoints"], ids=["the-folder", "a-folder-below-it"])
def test_a_checkpoint_folder_over_its_space_quota_is_refused_before_submit(
    tony_client: Any, cluster: Any, folder: str, app_tag: str, below: str
) -> None:
    set_space_quota(cluster, folder, MIB)
    with pytest.raises(SpecError, match=r"^checkpoint\.dir: no room to write") as refused:
        tony_client.submit(job(folder + below, steps=20), extra_tags=[app_tag])
    message = str(refused.value)
    assert f"the space quota of {folder} has {MIB} bytes left" in message and "spaceQuota" in message, message
    assert rm_apps(cluster.rm_url, tag=app_tag) == [], "nothing may be submitted"


def test_a_quota_with_room_for_a_block_is_no_refusal(tony_client: Any, cluster: Any, folder: str) -> None:
    set_space_quota(cluster, folder, 1024 * MIB)
    tony_client.check_room(job(folder, steps=20))  # raises nothing


def test_a_quota_that_runs_out_during_the_job_fails_it_not_retryable_naming_the_folder(
    tony_client: Any, cluster: Any, hdfs: Any, folder: str, app_tag: str
) -> None:
    app_id = tony_client.submit(job(folder, steps=2000, sleep=0.1), extra_tags=[app_tag])
    wait_until(lambda: remote_checkpoints(hdfs, folder), 300, "the first checkpoint upload")
    used = webhdfs(cluster, "GET", folder, op="GETQUOTAUSAGE")["QuotaUsage"]["spaceConsumed"]
    set_space_quota(cluster, folder, int(used) + MIB)  # less than the next block: the next upload is refused
    result = tony_client.wait(app_id, poll_interval=2.0)
    assert not result.succeeded
    failure = result.failure
    assert failure is not None and failure.kind == "hdfs_refused", (failure, result.diagnostics)
    assert not failure.retryable and not result.retryable
    assert f"HDFS refused {folder}" in failure.message and "DSQuotaExceededException" in failure.message, failure
    assert failure.exit_code == 77 and failure.task_id == "worker:0", failure
    assert "[retryable]" not in result.diagnostics
