"""The integration tests run on the local cluster: its environment first, before skein is imported."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests._airflow import ACTIVE, apps_of_runs, own_runs
from tests._cluster import export_cluster_env

export_cluster_env()

# After the environment: the helper imports the package's runtime.
from tests.integration._nightly import write_digits_partition  # noqa: E402


@pytest.fixture(scope="module")
def digits_partition(cluster: Any) -> Iterator[str]:
    """One day's partition of the digits on HDFS (4 train files, 1 held-out file), removed afterwards."""
    from hdfs import InsecureClient

    base = f"/user/{cluster.user}/pytest-{uuid.uuid4().hex[:10]}"
    yield write_digits_partition(cluster, base, "2026-12-01")
    InsecureClient(cluster.webhdfs_url, user=cluster.user).delete(base, recursive=True)


@pytest.fixture
def kill_dag_apps(cluster, airflow_env) -> Iterator[list[str]]:
    """DAG ids whose applications, submitted by this test, must not outlive it.

    Only applications of the DAG runs this test created (in its own metadata
    database) are killed: a ``make demo`` or another checkout running the same
    DAG at the same time carries other run ids and is left alone.
    """
    dags: list[str] = []
    before = own_runs(airflow_env)
    yield dags
    from airflow_provider_tony.yarn.client import TonyClient

    mine = {(dag, run) for dag, run in own_runs(airflow_env) - before if dag in dags}
    left = apps_of_runs(cluster.rm_url, mine, states=ACTIVE)
    if left:
        with TonyClient.from_env() as client:
            for app in left:
                client.kill(app["id"])


@pytest.fixture(scope="module")
def krb(cluster) -> Iterator[Any]:
    """The submitting principal (keytab from ``make -s cluster-env``)."""
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient.from_env() as client:
        assert client.kerberos
        yield client


@pytest.fixture(scope="module")
def other(cluster) -> Iterator[Any]:
    """The second principal, which no job lists unless a test says so."""
    from airflow_provider_tony.yarn.client import TonyClient

    with TonyClient(
        rm_url=cluster.rm_url,
        webhdfs_url=cluster.webhdfs_url,
        principal=os.environ["TONY_KERBEROS_OTHER_PRINCIPAL"],
        keytab=os.environ["TONY_KERBEROS_OTHER_KEYTAB"],
    ) as client:
        yield client


@pytest.fixture
def tag(krb) -> Iterator[str]:
    """Like ``app_tag``, but cleanup speaks SPNEGO (the shared one uses plain HTTP)."""
    value = f"pytest-{uuid.uuid4().hex[:12]}"
    yield value
    for app in krb.find_by_tags([value]):
        krb.kill(app.app_id)
