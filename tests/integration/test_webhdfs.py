"""WebHDFS on the local cluster: the `hdfs` package writes, reads, lists, deletes."""

from __future__ import annotations

import os
import uuid

import pytest
from hdfs import InsecureClient

pytestmark = pytest.mark.cluster


def test_write_read_list_delete(cluster) -> None:
    client = InsecureClient(cluster.webhdfs_url, user=cluster.user)
    base = f"/tmp/pytest-webhdfs-{uuid.uuid4().hex[:8]}"
    payload = os.urandom(3 * 1024 * 1024 + 17)  # more than one packet, odd size
    try:
        client.write(f"{base}/blob.bin", data=payload)
        with client.read(f"{base}/blob.bin") as reader:
            assert reader.read() == payload
        assert client.list(base) == ["blob.bin"]
        assert client.status(f"{base}/blob.bin")["length"] == len(payload)
        assert client.delete(base, recursive=True)
        assert client.status(base, strict=False) is None
    finally:
        client.delete(base, recursive=True)
