"""Stands in for the ResourceManager's REST API and HDFS as the REST submitter calls them.

``make`` builds a ``RestSubmitter`` on ``FakeRm`` and a dict-backed ``FakeHdfs``;
``app_spec`` is the skein spec it submits. Shared by the submit and outcome tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import skein

from airflow_provider_tony.runtime.hadoop_tokens import Token
from airflow_provider_tony.yarn.http import HttpSettings
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls
from airflow_provider_tony.yarn.submit import RestSubmitter

APP = "application_1700000000000_0042"


FS = "hdfs://localhost:9000"


class FakeHdfs:
    """The few ``hdfs.Client`` calls the submitter makes, over a dict (path -> bytes)."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {"/data/env.tar.gz": b"x" * 77}
        self.dirs: dict[str, str] = {}
        self.modes: dict[str, str] = {}
        self.deleted: list[str] = []

    def resolve(self, path: str) -> str:
        return path if path.startswith("/") else f"/user/alice/{path}"

    def makedirs(self, path: str, permission: str | None = None) -> None:
        self.dirs[path] = permission or ""

    def write(self, path: str, data: bytes, overwrite: bool = False, permission: str | None = None) -> None:
        self.files[path], self.modes[path] = data, permission or ""

    def upload(self, path: str, local: str, overwrite: bool = False, permission: str | None = None) -> None:
        self.write(path, Path(local).read_bytes(), overwrite, permission)

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        if path not in self.files:
            return None
        return {"length": len(self.files[path]), "modificationTime": 1000 + len(path)}

    def delete(self, path: str, recursive: bool = False) -> None:
        self.deleted.append(path)


class FakeRm:
    def __init__(self) -> None:
        self.submitted: list[dict[str, Any]] = []
        self.queries: list[dict[str, str]] = []
        self.token = Token("", "WEBHDFS delegation", "127.0.0.1:9870", b"ident", b"secret")
        self.rm_token = Token("", "RM_DELEGATION_TOKEN", "", b"rm-ident", b"rm-secret")
        self.rm_renewer = ""
        self.refuse_submit = 0

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.queries.append(dict(request.url.params))
        path, method = request.url.path, request.method
        if (method, path) == ("POST", "/ws/v1/cluster/apps/new-application"):
            return httpx.Response(200, json={"application-id": APP, "maximum-resource-capability": {}})
        if (method, path) == ("POST", "/ws/v1/cluster/apps"):
            if self.refuse_submit:
                return httpx.Response(self.refuse_submit, text="no")
            self.submitted.append(json.loads(request.content))
            return httpx.Response(202)
        if (method, path) == ("POST", "/ws/v1/cluster/delegation-token"):
            self.rm_renewer = json.loads(request.content)["renewer"]
            return httpx.Response(200, json={"token": self.rm_token.url_string(), "renewer": self.rm_renewer})
        if path == "/webhdfs/v1/" and request.url.params.get("op") == "GETDELEGATIONTOKEN":
            return httpx.Response(200, json={"Token": {"urlString": self.token.url_string()}})
        if (method, path) == ("PUT", f"/ws/v1/cluster/apps/{APP}/state"):
            self.submitted.append(json.loads(request.content))
            return httpx.Response(202, json={"state": "RUNNING"})
        return httpx.Response(404, text=f"unexpected {method} {path}")


def make(tmp_path: Path, *, principal: str | None = None) -> tuple[RestSubmitter, FakeRm, FakeHdfs]:
    rm, fs = FakeRm(), FakeHdfs()
    http = ClusterHttp(HttpSettings(), user=None if principal else "alice")
    http._client = httpx.Client(transport=httpx.MockTransport(rm.handle))
    urls = ClusterUrls("http://rm:8088", "http://nn:9870")
    sub = RestSubmitter(
        http=http,
        urls=urls,
        hdfs=fs,
        default_fs=FS,
        user="alice",
        application_classpath="/etc/hadoop,/jars/*",
        rm_principal=principal,
        rm_address="localhost:8032" if principal else None,
    )
    return sub, rm, fs


def app_spec(tmp_path: Path) -> skein.ApplicationSpec:
    local = tmp_path / "runtime.zip"
    local.write_bytes(b"zip" * 10)
    files = {"tony_runtime.zip": skein.File(source=str(local), type="file")}
    return skein.ApplicationSpec(
        name="job",
        queue="research",
        tags=["dag:x", "run:y"],
        max_attempts=1,
        acls=skein.ACLs(enable=True, view_users=["bob"], modify_users=["carol"]),
        master=skein.Master(
            resources=skein.Resources(memory="512 MiB", vcores=2),
            files=dict(files),
            env={"JOB": "spec"},
            script="python -m am",
        ),
        services={
            "worker": skein.Service(
                instances=2,
                resources=skein.Resources(memory="256 MiB", vcores=1),
                files={**files, "environment": skein.File(source=f"{FS}/data/env.tar.gz", type="archive")},
                env={"JOB": "spec"},
                script="python -m executor",
            )
        },
    )
