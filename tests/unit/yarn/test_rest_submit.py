"""Submission over the RM's REST API and WebHDFS (yarn/submit.py), against fakes of both.

What is checked is what skein's ApplicationMaster and YARN read: the staged
``.skein.proto`` (every file with its HDFS URL, size and time; each service
run from ``.skein.sh`` into ``<service>.log``; the TLS files), the AM's
local resources and command, and, on a Kerberized cluster, the HDFS token
filed as YARN's localiser and the RM's renewer look for it.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
import skein
from skein import proto as skein_proto

from airflow_provider_tony import retention
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import ClusterError, ClusterForbidden, ClusterUnreachable, NotFound
from airflow_provider_tony.runtime.hadoop_tokens import HDFS_DELEGATION_TOKEN, Token
from airflow_provider_tony.yarn.http import HttpSettings
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls, cluster_error
from airflow_provider_tony.yarn.submit import (
    MAX_INLINE_SPEC,
    RestSubmitter,
    am_classpath,
    am_command,
    hdfs_token_service,
    kill_application,
)
from tests.unit.support.rest import APP, FS, FakeHdfs, FakeRm, app_spec, make


def staged_spec(rm: FakeRm) -> skein_proto.ApplicationSpec:
    """The spec the AM's command writes as ``.skein.proto``: from its environment."""
    env = {e["key"]: e["value"] for e in rm.submitted[0]["am-container-spec"]["environment"]["entry"]}
    msg = skein_proto.ApplicationSpec()
    msg.ParseFromString(base64.b64decode(env[C.ENV_SKEIN_SPEC]))
    return msg


def test_submit_stages_what_skeins_am_reads_and_posts_the_context(tmp_path: Path) -> None:
    sub, rm, fs = make(tmp_path)
    assert sub.submit(app_spec(tmp_path)) == APP
    app_dir = f"/user/alice/.skein/{APP}"
    assert fs.dirs[app_dir] == "700" and fs.modes[f"{app_dir}/.skein.pem"] == "600"
    spec = staged_spec(rm)
    worker = spec.services["worker"]
    assert worker.script == "bash .skein.sh ><LOG_DIR>/worker.log 2>&1"
    assert sorted(worker.files) == [".skein.crt", ".skein.pem", ".skein.sh", "environment", "tony_runtime.zip"]
    env_file = worker.files["environment"]
    assert (env_file.source.scheme, env_file.source.host, env_file.source.port, env_file.source.file) == (
        "hdfs",
        "localhost",
        9000,
        "/data/env.tar.gz",
    )
    assert (env_file.size, env_file.timestamp, env_file.type) == (77, 1000 + len("/data/env.tar.gz"), 1)
    script_path = worker.files[".skein.sh"].source.file
    assert fs.files[script_path] == b"python -m executor"
    runtime = worker.files["tony_runtime.zip"]
    assert fs.files[runtime.source.file] == b"zip" * 10 and runtime.size == 30
    assert spec.master.security.cert_file.source.file == f"{app_dir}/.skein.crt"
    assert spec.master.script == "python -m am"  # the AM writes and runs it itself

    (context,) = rm.submitted
    assert context["application-id"] == APP and context["application-type"] == "skein"
    assert (context["queue"], context["max-app-attempts"]) == ("research", 1)
    assert context["resource"] == {"memory": 512, "vCores": 2}
    assert context["application-tags"] == {"tag": ["dag:x", "run:y"]}
    am = context["am-container-spec"]
    resources = {e["key"]: e["value"] for e in am["local-resources"]["entry"]}
    assert sorted(resources) == [".skein.crt", ".skein.jar", ".skein.pem", "tony_runtime.zip"]
    assert f"{app_dir}/.skein.proto" not in fs.files, "the spec travels in the AM's environment"
    env = {e["key"]: e["value"] for e in am["environment"]["entry"]}
    assert env["SKEIN_APPLICATION_ID"] == APP and env["JOB"] == "spec" and env["HADOOP_USER_NAME"] == "alice"
    assert env["CLASSPATH"] == "{{CLASSPATH}}<CPS>./*<CPS>/etc/hadoop<CPS>/jars/*"
    assert am["commands"]["command"] == am_command(f"{FS}{app_dir}", inline_spec=True)
    acls = {e["key"]: e["value"] for e in am["application-acls"]["entry"]}
    assert acls == {"VIEW_APP": "bob ", "MODIFY_APP": "carol "}
    assert "credentials" not in am  # an open cluster: no token
    assert all(q.get("user.name") == "alice" for q in rm.queries)  # pseudo authentication's caller


def test_a_kerberized_submit_passes_the_hdfs_token_filed_for_yarn(tmp_path: Path) -> None:
    sub, rm, fs = make(tmp_path, principal="rm/localhost@TONY.LOCAL")
    sub.submit(app_spec(tmp_path))
    asked = next(q for q in rm.queries if q.get("op") == "GETDELEGATIONTOKEN")
    assert asked["renewer"] == "rm/localhost@TONY.LOCAL"
    am = rm.submitted[0]["am-container-spec"]
    tokens = {e["key"]: Token.from_url_string(e["value"]) for e in am["credentials"]["tokens"]["entry"]}
    assert sorted(tokens) == ["127.0.0.1:8032", "127.0.0.1:9000"]
    hdfs, rm_token = tokens["127.0.0.1:9000"], tokens["127.0.0.1:8032"]
    assert hdfs.service == "127.0.0.1:9000"
    assert (hdfs.kind, hdfs.identifier, hdfs.password) == (HDFS_DELEGATION_TOKEN, b"ident", b"secret")
    # skein's AM asks the RM for its report over RPC: an RM token filed under the RM's RPC address.
    assert (rm_token.kind, rm_token.service, rm_token.identifier) == (
        "RM_DELEGATION_TOKEN",
        "127.0.0.1:8032",
        b"rm-ident",
    )
    assert rm.rm_renewer == "rm/localhost@TONY.LOCAL"
    env = {e["key"]: e["value"] for e in am["environment"]["entry"]}
    assert "HADOOP_USER_NAME" not in env  # Kerberos says who it is
    assert all("user.name" not in q for q in rm.queries)


def test_a_refused_submission_removes_the_staged_folder_and_says_why(tmp_path: Path) -> None:
    sub, rm, fs = make(tmp_path)
    rm.refuse_submit = 403
    with pytest.raises(ClusterForbidden, match="submission of application_"):
        sub.submit(app_spec(tmp_path))
    assert fs.deleted == [f"/user/alice/.skein/{APP}"]


def test_kill_puts_the_killed_state(tmp_path: Path) -> None:
    sub, rm, _fs = make(tmp_path)
    kill_application(sub.http, sub.urls, APP)
    assert rm.submitted == [{"state": "KILLED"}]
    with pytest.raises(NotFound):
        kill_application(sub.http, sub.urls, "application_1_0001")


def test_pure_parts() -> None:
    assert am_classpath(None).startswith("{{CLASSPATH}}<CPS>./*<CPS>{{HADOOP_CONF_DIR}}<CPS>")
    assert hdfs_token_service("hdfs://nameservice1") == "ha-hdfs:nameservice1"
    assert hdfs_token_service("hdfs://localhost:8020") == "127.0.0.1:8020"
    assert am_command("hdfs://nn:9000/d", "DEBUG") == (
        "{{JAVA_HOME}}/bin/java -Xmx128M -Dskein.log.level=DEBUG -Dskein.log.directory=<LOG_DIR> "
        "com.anaconda.skein.ApplicationMaster hdfs://nn:9000/d ><LOG_DIR>/application.master.log 2>&1"
    )


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (httpx.ConnectError("refused"), ClusterUnreachable),
        (httpx.ReadTimeout("slow"), ClusterUnreachable),
        (OSError("no route"), ClusterUnreachable),
    ],
)
def test_the_classifier_tells_unreachable_apart(exc: Exception, kind: type) -> None:
    assert type(cluster_error("the RM", exc)) is kind


@pytest.mark.parametrize(
    ("status", "kind"),
    [(404, NotFound), (401, ClusterForbidden), (403, ClusterForbidden), (503, ClusterUnreachable), (400, ClusterError)],
)
def test_the_classifier_reads_the_status(status: int, kind: type) -> None:
    request = httpx.Request("GET", "http://rm/x")
    exc = httpx.HTTPStatusError("x", request=request, response=httpx.Response(status, text="body", request=request))
    err = cluster_error("the RM", exc)
    assert type(err) is kind and str(err).startswith("the RM: ")


def test_webhdfs_writes_in_two_steps() -> None:
    from airflow_provider_tony.yarn.rest import WebHdfs

    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == "nn" and request.url.params["op"] == "CREATE":
            location = "http://dn:9864/webhdfs/v1/user/alice/f?op=CREATE&namenoderpcaddress=nn:8020"
            return httpx.Response(200, json={"Location": location})
        if request.url.host == "dn":
            return httpx.Response(201)
        if request.url.params["op"] == "GETFILESTATUS":
            return httpx.Response(404, json={"RemoteException": {"message": "File does not exist"}})
        return httpx.Response(400)

    http = ClusterHttp(HttpSettings(), user="alice")
    http._client = httpx.Client(transport=httpx.MockTransport(handle))
    fs = WebHdfs(http, ClusterUrls("http://rm:8088", "http://nn:9870"))
    fs.write("/user/alice/f", b"data", overwrite=True, permission="600")
    create, put = seen
    assert dict(create.url.params) == {
        "op": "CREATE",
        "overwrite": "true",
        "noredirect": "true",
        "permission": "600",
        "user.name": "alice",
    }
    assert put.method == "PUT" and put.content == b"data"
    assert put.url.host == "dn" and put.url.params.get_list("user.name") == ["alice"]
    assert (put.url.params["op"], put.url.params["namenoderpcaddress"]) == ("CREATE", "nn:8020")  # its URL kept
    assert fs.status("/nope", strict=False) is None
    with pytest.raises(NotFound):
        fs.status("/nope")


def test_with_the_connections_credentials_a_submit_writes_only_its_spec(tmp_path: Path) -> None:
    """The launch scripts and the kept TLS files come from the upload cache; the key as private data."""
    sub, rm, fs = make(tmp_path)
    asked: list[tuple[bytes, str, str, bool]] = []

    def cache_data(data: bytes, name: str, suffix: str, private: bool) -> str:
        asked.append((data, name, suffix, private))
        path = f"/user/alice/tony/cache/{name}-{len(asked)}{suffix}"
        fs.files[path] = data
        return path

    def cache(local: str, name: str) -> str:
        fs.files[f"/user/alice/tony/cache/{name}.jar"] = b"jar"
        return f"/user/alice/tony/cache/{name}.jar"

    sub.security = skein.Security.new_credentials()
    sub.cache, sub.cache_data = cache, cache_data
    sub.submit(app_spec(tmp_path))
    app_dir = f"/user/alice/.skein/{APP}"
    written = sorted(p for p in fs.files if p.startswith(app_dir))
    local = f"{app_dir}/{_hashed('runtime.zip', tmp_path)}/runtime.zip"
    references = f"{app_dir}/{retention.REFERENCES_NAME}"
    assert written == [local, references], "nothing but the local file and what the job localises"
    named = json.loads(fs.files[references])["paths"]
    spec = staged_spec(rm)
    sources = {f.source.file for svc in [spec.master, *spec.services.values()] for f in svc.files.values()}
    assert set(named) == sources, "every file YARN localises, no other"
    assert "/user/alice/tony/cache/skein.jar" in named
    kinds = {(name, suffix, private) for _, name, suffix, private in asked}
    assert kinds == {("skein-cert", ".crt", False), ("skein-key", ".pem", True), ("launch", ".sh", False)}
    assert (sub.security._get_bytes("key"), "skein-key", ".pem", True) in asked
    spec = staged_spec(rm)
    worker = spec.services["worker"]
    assert fs.files[worker.files[".skein.sh"].source.file] == b"python -m executor"
    assert worker.files[".skein.pem"].source.file.startswith("/user/alice/tony/cache/skein-key-")
    assert spec.master.security.key_file.source.file == worker.files[".skein.pem"].source.file


def recording_cache(sub: RestSubmitter, fs: FakeHdfs) -> list[str]:
    """A ``cache_data`` for ``sub`` that keeps each file in ``fs``; the names it was asked for."""
    asked: list[str] = []

    def cache_data(data: bytes, name: str, suffix: str, private: bool) -> str:
        asked.append(name)
        fs.files[f"/cache/{name}-{len(asked)}{suffix}"] = data
        return f"/cache/{name}-{len(asked)}{suffix}"

    sub.cache_data = cache_data
    return asked


def test_credentials_made_for_one_job_are_not_cached(tmp_path: Path) -> None:
    sub, rm, fs = make(tmp_path)
    asked = recording_cache(sub, fs)  # no security: new credentials for this job
    sub.submit(app_spec(tmp_path))
    app_dir = f"/user/alice/.skein/{APP}"
    assert asked == ["launch"]
    assert fs.modes[f"{app_dir}/.skein.pem"] == "600" and f"{app_dir}/.skein.crt" in fs.files


def _hashed(name: str, tmp_path: Path) -> str:
    import hashlib

    return hashlib.md5(str(tmp_path / name).encode()).hexdigest()[:8].upper()  # noqa: S324 - as the submitter names it


def test_a_spec_too_large_for_the_environment_is_written_to_hdfs(tmp_path: Path) -> None:
    sub, rm, fs = make(tmp_path)
    spec = app_spec(tmp_path)
    spec.services["worker"].env["BIG"] = "x" * MAX_INLINE_SPEC
    sub.submit(spec)
    app_dir = f"/user/alice/.skein/{APP}"
    am = rm.submitted[0]["am-container-spec"]
    resources = {e["key"]: e["value"] for e in am["local-resources"]["entry"]}
    assert resources[".skein.proto"]["size"] == len(fs.files[f"{app_dir}/.skein.proto"])
    assert C.ENV_SKEIN_SPEC not in {e["key"] for e in am["environment"]["entry"]}
    assert am["commands"]["command"] == am_command(f"{FS}{app_dir}")
    msg = skein_proto.ApplicationSpec()
    msg.ParseFromString(fs.files[f"{app_dir}/.skein.proto"])
    assert msg.services["worker"].env["BIG"] == "x" * MAX_INLINE_SPEC


def test_the_am_command_writes_the_spec_as_yarns_launch_script_runs_it(tmp_path: Path) -> None:
    """YARN's launch script: ``export K="v"`` lines, then ``exec /bin/bash -c "<command>"`` unescaped.

    The inner shell is a stand-in that records its arguments (what ``ps`` shows
    every user of the host) before running bash; a stand-in ``java`` keeps the
    ``.skein.proto`` it finds. The spec arrives whole and was on no command line.
    """
    spec = base64.b64encode(bytes(range(256)) * 40).decode()
    (tmp_path / "jdk" / "bin").mkdir(parents=True)
    java = tmp_path / "jdk" / "bin" / "java"
    java.write_text('#!/bin/bash\ncp .skein.proto got.proto\necho "$@" >java-args.txt\n')
    shell = tmp_path / "recording-bash"
    shell.write_text('#!/bin/bash\nprintf "%s\\n" "$@" >shell-args.txt\nexec /bin/bash "$@"\n')
    for exe in (java, shell):
        exe.chmod(0o755)
    command = am_command("hdfs://nn:9000/d", inline_spec=True)
    command = command.replace("{{JAVA_HOME}}", str(tmp_path / "jdk")).replace("<LOG_DIR>", str(tmp_path))
    launch = tmp_path / "launch_container.sh"
    launch.write_text(f'#!/bin/bash\nexport {C.ENV_SKEIN_SPEC}="{spec}"\nexec {shell} -c "{command}"\n')
    env = {"PATH": os.environ["PATH"]}
    out = subprocess.run(["bash", str(launch)], cwd=tmp_path, capture_output=True, text=True, timeout=30, env=env)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "got.proto").read_bytes() == base64.b64decode(spec)
    assert "com.anaconda.skein.ApplicationMaster hdfs://nn:9000/d" in (tmp_path / "java-args.txt").read_text()
    assert spec[:64] not in (tmp_path / "shell-args.txt").read_text()


def test_webhdfs_streams_an_upload_lists_and_reads(tmp_path: Path) -> None:
    """An upload is streamed with its length said first (not chunked: a DataNode need not take that);
    LISTSTATUS and OPEN read back as the ``hdfs`` package's calls did."""
    from airflow_provider_tony.yarn.rest import WebHdfs

    stored: dict[str, bytes] = {}
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        op = request.url.params.get("op")
        if request.url.host == "nn" and op == "CREATE":
            return httpx.Response(200, json={"Location": f"http://dn:9864{request.url.path}?op=CREATE"})
        if request.url.host == "dn":
            stored[request.url.path] = request.read()
            return httpx.Response(201)
        if op == "LISTSTATUS" and request.url.path.endswith("/d"):
            return httpx.Response(200, json={"FileStatuses": {"FileStatus": []}})
        if op == "LISTSTATUS":
            files = [{"pathSuffix": "a", "type": "FILE", "length": 3}, {"pathSuffix": "d", "type": "DIRECTORY"}]
            return httpx.Response(200, json={"FileStatuses": {"FileStatus": files}})
        if op == "OPEN":
            start = int(request.url.params["offset"])
            return httpx.Response(
                200, content=stored["/webhdfs/v1/big"][start : start + int(request.url.params["length"])]
            )
        return httpx.Response(400)

    http = ClusterHttp(HttpSettings(), user="alice")
    http._client = httpx.Client(transport=httpx.MockTransport(handle))
    fs = WebHdfs(http, ClusterUrls("http://rm:8088", "http://nn:9870"))
    local = tmp_path / "env.tar.gz"
    local.write_bytes(os.urandom(3 * (1 << 20) + 5))
    fs.upload("/big", str(local), overwrite=True)
    put = seen[-1]
    assert put.headers["content-length"] == str(local.stat().st_size) and "transfer-encoding" not in put.headers
    assert stored["/webhdfs/v1/big"] == local.read_bytes()
    assert fs.list("/") == ["a", "d"] and fs.list("/", status=True)[1] == (
        "d",
        {"pathSuffix": "d", "type": "DIRECTORY"},
    )
    with fs.read("/big") as reader:
        assert reader.read(10) == local.read_bytes()[:10]
        assert reader.read(5) == local.read_bytes()[10:15], "the next read goes on from there"
    walked = list(fs.walk("/"))
    assert walked[0] == ("/", ["d"], ["a"])
    with pytest.raises(ClusterError, match="a folder"):
        fs.upload("/dir", str(tmp_path))


def test_services_with_the_same_script_share_one_cached_copy(tmp_path: Path) -> None:
    """Put at once from two threads, the second copy would replace the first under its feet
    (YARN: "changed on src filesystem")."""
    sub, rm, fs = make(tmp_path)
    asked = recording_cache(sub, fs)
    spec = app_spec(tmp_path)
    spec.services["tensorboard"] = skein.Service(
        resources=skein.Resources(memory="256 MiB", vcores=1), script="python -m executor"
    )
    sub.submit(spec)
    assert asked.count("launch") == 1
    staged = staged_spec(rm)
    assert staged.services["tensorboard"].files[".skein.sh"] == staged.services["worker"].files[".skein.sh"]
