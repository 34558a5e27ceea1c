"""Jobs the runtime suites submit and wait for (``job``, ``run``), and what a sharded input must look like.

Shared by test_runtime.py, test_torch*.py, test_airflow.py and the chaos suite's multi-node tests.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_tony.runtime.spec import JobSpec


def job(python: str, roles: dict[str, Any], **extra: Any) -> JobSpec:
    doc = {
        "name": "pytest-runtime",
        "roles": roles,
        "python": {"interpreter": python},
        "heartbeat_interval": 0.5,
        "heartbeat_timeout": 10,
        "registration_timeout": 120,
        **extra,
    }
    return JobSpec.from_dict(doc)


def run(client, spec: JobSpec, tag: str, **wait: Any):
    app_id = client.submit(spec, extra_tags=[tag])
    result = client.wait(app_id, poll_interval=0.5, emit=lambda line: print(line, flush=True), **wait)
    return result


def shards_from_reports(hdfs: Any, folder: str, reports: list[dict[str, Any]]) -> list[set[str]]:
    """Each task's files as the task itself reported them, checked against the folder's listing on HDFS
    (``hdfs``: a WebHDFS client, Kerberized or not): disjoint, and together every file of the folder."""
    listed = {n for n in hdfs.list(folder) if not n.startswith(("_", "."))}
    shards = [set(r["input_files"].split(",")) for r in reports]
    assert all(shards), f"a task reported no files: {reports}"
    for i, a in enumerate(shards):
        for b in shards[i + 1 :]:
            assert not a & b, f"two tasks read the same files: {shards}"
    assert set().union(*shards) == listed, f"the shards {shards} do not cover {sorted(listed)}"
    return shards
