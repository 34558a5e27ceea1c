"""The integration tests run on the local cluster: its environment first, before skein is imported."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests._cluster import export_cluster_env

export_cluster_env()

TRAINING = Path(__file__).resolve().parents[2] / "dags" / "training"


def write_digits_partition(cluster: Any, base: str, day: str, train_files: int = 4) -> str:
    """The example's day of TFRecords under ``base`` on the cluster's HDFS (as ``tony_digits_partition`` writes it)."""
    from hdfs import InsecureClient

    if str(TRAINING) not in sys.path:
        sys.path.insert(0, str(TRAINING))
    from digits_data import partition_path, write_partition

    remote = partition_path(base, day)
    write_partition(InsecureClient(cluster.webhdfs_url, user=cluster.user), remote, day, train_files=train_files)
    return remote


@pytest.fixture(scope="module")
def digits_partition(cluster: Any) -> Iterator[str]:
    """One day's partition of the digits on HDFS (4 train files, 1 held-out file), removed afterwards."""
    from hdfs import InsecureClient

    base = f"/user/{cluster.user}/pytest-{uuid.uuid4().hex[:10]}"
    yield write_digits_partition(cluster, base, "2026-12-01")
    InsecureClient(cluster.webhdfs_url, user=cluster.user).delete(base, recursive=True)
