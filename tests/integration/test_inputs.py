"""Job inputs on the real cluster: the check before submit (the training runs are in test_runtime.py).

A missing partition must be found on the submitting side, over the cluster's
real WebHDFS, before YARN is asked for anything.
"""

from __future__ import annotations

import pytest

from airflow_provider_tony.runtime.errors import InputMissing, SpecError
from airflow_provider_tony.runtime.spec import JobSpec
from tests._util import rm_apps

pytestmark = pytest.mark.cluster


def _spec(python: str, inputs: dict) -> JobSpec:
    return JobSpec.from_dict(
        {
            "name": "pytest-inputs",
            "roles": {"worker": {"instances": 2, "memory": "256 MiB", "command": [python, "-c", "pass"]}},
            "inputs": inputs,
        }
    )


@pytest.mark.parametrize("retryable", [True, False])
def test_missing_partition_is_a_clear_error_before_submit(
    tony_client, app_tag, python_exe, digits_partition, retryable
) -> None:
    late = digits_partition.replace("dt=2026-12-01", "dt=2026-12-02")
    spec = _spec(
        python_exe,
        {
            "digits_train": {"path": f"{digits_partition}/train", "sharding": "shard"},
            "late": {"path": f"{late}/train", "retryable_if_missing": retryable},
        },
    )
    with pytest.raises(InputMissing) as err:
        tony_client.submit(spec, extra_tags=[app_tag])
    assert err.value.field == "inputs.late.path"
    assert f"{late}/train does not exist or holds no files on HDFS" in str(err.value)
    assert err.value.retryable is retryable
    assert rm_apps(tony_client.rm_url, tag=app_tag) == [], "nothing may reach YARN"


def test_a_shard_input_needs_a_file_per_task(tony_client, app_tag, python_exe, digits_partition) -> None:
    spec = _spec(python_exe, {"digits_eval": {"path": f"{digits_partition}/eval", "sharding": "shard"}})
    with pytest.raises(SpecError, match=r"inputs.digits_eval.sharding: .*/eval holds 1 file\(s\) but 2 tasks"):
        tony_client.submit(spec, extra_tags=[app_tag])
    assert rm_apps(tony_client.rm_url, tag=app_tag) == []
