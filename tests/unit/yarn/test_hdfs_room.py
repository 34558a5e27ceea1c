"""The pre-submit HDFS check (``yarn/hdfs_room.py``) against a NameNode's answers over a MockTransport.

The answers are WebHDFS's own shapes (GETFILESTATUS, CHECKACCESS's 403
``AccessControlException``, GETQUOTAUSAGE, GETCONTENTSUMMARY, GETSERVERDEFAULTS),
so the permission refusal the open cluster cannot show (it runs without HDFS
permissions) is exercised here, and every headroom boundary is exact.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.hdfs_room import Folder, QuotaUse, check_room, headroom_problem
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls, WebHdfs

BLOCK = 128 * 1024 * 1024
DENIED = {
    "RemoteException": {
        "exception": "AccessControlException",
        "javaClassName": "org.apache.hadoop.security.AccessControlException",
        "message": 'Permission denied: user=alice, access=-w-, inode="/data/shared":bob:bob:drwxr-xr-x',
    }
}


class NameNode:
    """Folders that exist, who may write where, and the quotas set on folders."""

    def __init__(
        self,
        existing: set[str],
        *,
        read_only: set[str] = frozenset(),  # type: ignore[assignment]
        quotas: dict[str, dict[str, int]] | None = None,
        quota_usage_op: bool = True,
        replication: int = 3,
    ) -> None:
        self.existing, self.read_only, self.quotas = existing | {"/"}, read_only, quotas or {}
        self.quota_usage_op, self.replication = quota_usage_op, replication
        self.asked: list[tuple[str, str]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        op = request.url.params["op"]
        path = request.url.path.removeprefix("/webhdfs/v1") or "/"
        path = path.rstrip("/") or "/"
        self.asked.append((op, path))
        if op == "GETSERVERDEFAULTS":
            return httpx.Response(200, json={"FsServerDefaults": {"blockSize": BLOCK, "replication": self.replication}})
        if path not in self.existing:
            return httpx.Response(404, json={"RemoteException": {"exception": "FileNotFoundException"}})
        if op == "GETFILESTATUS":
            return httpx.Response(200, json={"FileStatus": {"type": "DIRECTORY"}})
        if op == "CHECKACCESS":
            assert request.url.params["fsaction"] == "-w-"
            return httpx.Response(403, json=DENIED) if path in self.read_only else httpx.Response(200)
        quota = {
            "quota": -1,
            "spaceQuota": -1,
            "spaceConsumed": 0,
            "fileAndDirectoryCount": 1,
            **self.quotas.get(path, {}),
        }
        if op == "GETQUOTAUSAGE":
            if not self.quota_usage_op:
                return httpx.Response(400, json={"RemoteException": {"exception": "IllegalArgumentException"}})
            return httpx.Response(200, json={"QuotaUsage": quota})
        if op == "GETCONTENTSUMMARY":
            names = quota.pop("fileAndDirectoryCount")
            return httpx.Response(200, json={"ContentSummary": {**quota, "fileCount": names - 1, "directoryCount": 1}})
        return httpx.Response(400, text=f"unexpected {op}")


def fs_of(namenode: NameNode) -> WebHdfs:
    http = ClusterHttp(web.HttpSettings(), user="alice")
    http._client = httpx.Client(transport=httpx.MockTransport(namenode.handle))
    return WebHdfs(http, ClusterUrls("http://rm:8088", "http://nn:9870"))


CKPT = Folder("checkpoint.dir", "/data/shared/ckpts/run-1")


def test_a_folder_the_user_may_not_write_is_refused_at_its_nearest_existing_ancestor() -> None:
    namenode = NameNode({"/data", "/data/shared"}, read_only={"/data/shared"})
    with pytest.raises(SpecError) as refused:
        check_room(fs_of(namenode), [CKPT])
    assert refused.value.field == "checkpoint.dir"
    message = str(refused.value)
    assert "/data/shared/ckpts/run-1 (its nearest existing ancestor /data/shared) is not writable" in message
    assert "Permission denied: user=alice" in message
    assert ("CHECKACCESS", "/data/shared") in namenode.asked


def test_a_writable_folder_without_quotas_passes_and_reads_no_server_defaults() -> None:
    namenode = NameNode({"/data", "/data/shared", "/data/shared/ckpts"})
    check_room(fs_of(namenode), [CKPT])
    assert all(op != "GETSERVERDEFAULTS" for op, _ in namenode.asked), namenode.asked


@pytest.mark.parametrize(("left", "refused"), [(3 * BLOCK - 1, True), (3 * BLOCK, False)])
def test_an_ancestors_space_quota_needs_a_block_times_the_replication(left: int, refused: bool) -> None:
    quotas = {"/data": {"spaceQuota": 10 * BLOCK, "spaceConsumed": 10 * BLOCK - left}}
    namenode = NameNode({"/data", "/data/shared"}, quotas=quotas)
    if not refused:
        check_room(fs_of(namenode), [CKPT])
        return
    with pytest.raises(SpecError, match=r"the space quota of /data has \d+ bytes left") as info:
        check_room(fs_of(namenode), [CKPT])
    assert f"HDFS needs {3 * BLOCK}" in str(info.value) and info.value.field == "checkpoint.dir"


def test_a_name_quota_used_up_is_refused_and_read_from_a_content_summary_on_an_older_namenode() -> None:
    quotas = {"/data/shared": {"quota": 5, "fileAndDirectoryCount": 5}}
    namenode = NameNode({"/data", "/data/shared"}, quotas=quotas, quota_usage_op=False)
    with pytest.raises(SpecError, match="the name quota of /data/shared is used up"):
        check_room(fs_of(namenode), [CKPT])
    assert ("GETCONTENTSUMMARY", "/data/shared") in namenode.asked


@pytest.mark.parametrize(
    ("use", "problem"),
    [
        (QuotaUse("/q"), None),
        (QuotaUse("/q", space_quota=99, space_consumed=0), "space quota"),
        (QuotaUse("/q", space_quota=100, space_consumed=0), None),
        (QuotaUse("/q", space_quota=1000, space_consumed=900), None),
        (QuotaUse("/q", name_quota=3, names_used=2), None),
        (QuotaUse("/q", name_quota=3, names_used=3), "name quota"),
    ],
)
def test_headroom_boundaries(use: QuotaUse, problem: str | None) -> None:
    found: Any = headroom_problem(use, needed_bytes=100)
    assert (found is None) if problem is None else (problem in found)
