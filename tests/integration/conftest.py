"""The integration tests run on the local cluster: its environment first, before skein is imported."""

from __future__ import annotations

from tests._cluster import export_cluster_env

export_cluster_env()
