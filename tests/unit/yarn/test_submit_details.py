"""The details of a REST submission (yarn/submit.py) that YARN, HDFS or the person reading the error sees.

Against fakes that behave as the real services do where it matters: the RM
over httpx's ``MockTransport`` (so a method's case is httpx's business, as in
production), and an HDFS whose ``status`` raises unless ``strict=False``,
whose ``delete`` refuses a non-empty folder unless ``recursive``, and whose
``write`` refuses to replace a file unless ``overwrite`` (as WebHDFS does).
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import skein
from skein import proto as skein_proto

from airflow_provider_tony import retention
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import (
    ClusterError,
    ClusterForbidden,
    ClusterUnreachable,
    NotFound,
    OutcomeUnknown,
)
from airflow_provider_tony.runtime.hadoop_tokens import Token
from airflow_provider_tony.yarn import submit as submit_mod
from airflow_provider_tony.yarn.http import HttpSettings
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls
from airflow_provider_tony.yarn.submit import (
    LocalResource,
    RestSubmitter,
    kill_application,
    skein_jar,
    submission_context,
)

APP = "application_1700000000000_0007"
FS = "hdfs://nn:9000"
APP_DIR = f"/user/alice/.skein/{APP}"
NEW_APP = "/ws/v1/cluster/apps/new-application"


class Hdfs:
    """WebHDFS as the submitter sees it, with the refusals of the real one."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {"/data/env.tar.gz": b"e" * 11, "/data/other.zip": b"o" * 5}
        self.modes: dict[str, str] = {}
        self.dirs: dict[str, str] = {}
        self.fail_delete: Exception | None = None

    def resolve(self, path: str) -> str:
        return path if path.startswith("/") else f"/user/alice/{path}"

    def makedirs(self, path: str, permission: str | None = None) -> None:
        self.dirs[path] = permission or "755"

    def write(self, path: str, data: bytes, overwrite: bool = False, permission: str | None = None) -> None:
        if path in self.files and overwrite is not True:
            raise ClusterError(f"{path} exists (FileAlreadyExistsException)")
        self.files[path], self.modes[path] = data, permission or "644"

    def upload(self, path: str, local: str, overwrite: bool = False, permission: str | None = None) -> None:
        self.write(path, Path(local).read_bytes(), overwrite, permission)

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        if path not in self.files:
            if strict:
                raise NotFound(f"WebHDFS GETFILESTATUS {path}: not found (HTTP 404)")
            return None
        return {"length": len(self.files[path]), "modificationTime": 5000 + len(path)}

    def delete(self, path: str, recursive: bool = False) -> None:
        if self.fail_delete is not None:
            raise self.fail_delete
        inside = [p for p in self.files if p.startswith(f"{path}/")]
        if inside and recursive is not True:
            raise ClusterError(f"{path} is non empty: Directory is not empty")
        for p in inside:
            del self.files[p]
        self.dirs = {d: m for d, m in self.dirs.items() if d != path and not d.startswith(f"{path}/")}


class Rm:
    """The ResourceManager's REST calls a submit makes; ``answers`` overrides one by (method, path)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.answers: dict[tuple[str, str], list[httpx.Response | Exception]] = {}
        self.stored: set[str] = set()

    def handle(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        body = json.loads(request.content) if request.content else None
        self.calls.append((method, path, body))
        queued = self.answers.get((method, path))
        if queued:
            answer = queued.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer
        if (method, path) == ("POST", NEW_APP):
            return httpx.Response(200, json={"application-id": APP})
        if (method, path) == ("POST", "/ws/v1/cluster/apps"):
            self.stored.add(body["application-id"])
            return httpx.Response(202)
        if method == "GET" and path.startswith("/ws/v1/cluster/apps/"):
            app = path.rsplit("/", 1)[1]
            return httpx.Response(200, json={"app": {"id": app}}) if app in self.stored else httpx.Response(404)
        if (method, path) == ("POST", "/ws/v1/cluster/delegation-token"):
            token = Token("", "RM_DELEGATION_TOKEN", "", b"rm-id", b"rm-pw")
            return httpx.Response(200, json={"token": token.url_string()})
        if path == "/webhdfs/v1/" and request.url.params.get("op") == "GETDELEGATIONTOKEN":
            token = Token("", "WEBHDFS delegation", "nn:9870", b"id", b"pw")
            return httpx.Response(200, json={"Token": {"urlString": token.url_string()}})
        return httpx.Response(404, text=f"unexpected {method} {path}")

    def posts(self, path: str) -> list[Any]:
        return [body for method, p, body in self.calls if (method, p) == ("POST", path)]


def make(*, default_fs: str = FS, principal: str | None = None) -> tuple[RestSubmitter, Rm, Hdfs]:
    rm, fs = Rm(), Hdfs()
    http = ClusterHttp(HttpSettings(), user=None if principal else "alice")
    http._client = httpx.Client(transport=httpx.MockTransport(rm.handle))
    sub = RestSubmitter(
        http=http,
        urls=ClusterUrls("http://rm:8088", "http://nn:9870"),
        hdfs=fs,
        default_fs=default_fs,
        user="alice",
        rm_principal=principal,
        rm_address="rm:8032" if principal else None,
        security=skein.Security.new_credentials(),  # fixed credentials: the same spec stages the same bytes
    )
    return sub, rm, fs


def spec(tmp_path: Path, **master_files: skein.File) -> skein.ApplicationSpec:
    local = tmp_path / "code.zip"
    local.write_bytes(b"z" * 9)
    return skein.ApplicationSpec(
        name="details",
        master=skein.Master(
            resources=skein.Resources(memory="512 MiB", vcores=1),
            files={"code.zip": skein.File(source=str(local), type="file"), **master_files},
            log_level="debug",
        ),
        services={
            "worker": skein.Service(
                resources=skein.Resources(memory="256 MiB", vcores=1),
                files={"code.zip": skein.File(source=str(local), type="file")},
                env={"JOB": "spec"},
                script="python -m executor",
            )
        },
    )


def context_of(rm: Rm) -> dict[str, Any]:
    (context,) = rm.posts("/ws/v1/cluster/apps")
    return dict(context)


def env_of(context: dict[str, Any]) -> dict[str, str]:
    return {e["key"]: e["value"] for e in context["am-container-spec"]["environment"]["entry"]}


def resources_of(context: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["key"]: e["value"] for e in context["am-container-spec"]["local-resources"]["entry"]}


def staged(context: dict[str, Any]) -> skein_proto.ApplicationSpec:
    msg = skein_proto.ApplicationSpec()
    msg.ParseFromString(base64.b64decode(env_of(context)[C.ENV_SKEIN_SPEC]))
    return msg


# ---------------------------------------------------------------- the files of the spec


@pytest.mark.parametrize("source", ["http://web/code.zip", "s3://bucket/code.zip", "gs://bucket/code.zip"])
def test_a_source_yarn_cannot_localise_is_refused_before_anything_is_submitted(tmp_path: Path, source: str) -> None:
    """YARN localises from HDFS only: an http:// or s3:// file would fail in the container, so the
    submit says which file and what is supported, and leaves nothing behind."""
    sub, rm, fs = make()
    with pytest.raises(ClusterError, match=f"cannot stage {source}: only local files and hdfs:// sources"):
        sub.submit(spec(tmp_path, extra=skein.File(source=source)))
    assert rm.posts("/ws/v1/cluster/apps") == []
    assert not [p for p in fs.files if p.startswith(APP_DIR)] and APP_DIR not in fs.dirs


def test_hdfs_sources_keep_their_namenode_and_a_bare_path_takes_the_default_fs(tmp_path: Path) -> None:
    """``hdfs://other:8020/...`` is localised from that NameNode; ``hdfs:///...`` from fs.defaultFS
    (a trailing slash in fs.defaultFS makes no double slash); viewfs:// is HDFS too."""
    sub, rm, fs = make(default_fs=f"{FS}/")
    files = {
        "env": skein.File(source="hdfs:///data/env.tar.gz", type="archive"),
        "other": skein.File(source="hdfs://other:8020/data/other.zip", type="file"),
        "view": skein.File(source="viewfs://cluster/data/env.tar.gz", type="file"),
    }
    sub.submit(spec(tmp_path, **files))
    context = context_of(rm)
    resources = resources_of(context)
    assert resources["env"] == {
        "resource": f"{FS}/data/env.tar.gz",
        "type": "ARCHIVE",
        "visibility": "APPLICATION",
        "size": 11,
        "timestamp": 5000 + len("/data/env.tar.gz"),
    }
    assert resources["other"]["resource"] == "hdfs://other:8020/data/other.zip"
    assert resources["other"]["type"] == "FILE"
    assert resources["view"]["resource"] == "viewfs://cluster/data/env.tar.gz"
    assert resources[".skein.crt"]["resource"] == f"{FS}{APP_DIR}/.skein.crt"
    assert context["am-container-spec"]["commands"]["command"].count(f"{FS}{APP_DIR} ") == 1


def test_a_missing_hdfs_file_is_named(tmp_path: Path) -> None:
    sub, rm, fs = make()
    with pytest.raises(ClusterError, match="/data/gone.zip is not on HDFS: a file of the job cannot be staged"):
        sub.submit(spec(tmp_path, gone=skein.File(source=f"{FS}/data/gone.zip")))
    assert rm.posts("/ws/v1/cluster/apps") == []


def test_staged_files_are_private_to_the_submitter(tmp_path: Path) -> None:
    """The job's folder, its uploads and the key are 0700/0600 (other users of HDFS must not read a
    job's code or its TLS key); every write replaces what a failed earlier try left."""
    sub, rm, fs = make()
    local = tmp_path / "code.zip"
    folder = f"{APP_DIR}/{_hashed(str(local))}"
    fs.files[f"{folder}/code.zip"] = b"left by an earlier try"
    fs.files[f"{APP_DIR}/.skein.pem"] = b"old"
    fs.files[f"{APP_DIR}/{retention.REFERENCES_NAME}"] = b"old"
    sub.submit(spec(tmp_path))
    assert fs.dirs[APP_DIR] == "700" and fs.dirs[folder] == "700"
    assert fs.files[f"{folder}/code.zip"] == b"z" * 9
    for name in ("code.zip", ".skein.pem", ".skein.crt", "worker.sh", retention.REFERENCES_NAME):
        path = f"{folder}/code.zip" if name == "code.zip" else f"{APP_DIR}/{name}"
        assert fs.modes[path] == "600", path
    assert fs.files[f"{APP_DIR}/.skein.pem"] == sub.security._get_bytes("key")
    named = json.loads(fs.files[f"{APP_DIR}/{retention.REFERENCES_NAME}"])["paths"]
    assert f"{folder}/code.zip" in named


def test_skeins_jar_is_taken_from_the_cache_by_its_local_path(tmp_path: Path) -> None:
    sub, rm, fs = make()
    asked: list[tuple[str, str]] = []

    def cache(local: str, name: str) -> str:
        asked.append((local, name))
        fs.files["/cache/skein.jar"] = b"jar"
        return "/cache/skein.jar"

    sub.cache = cache
    sub.submit(spec(tmp_path))
    assert asked == [(str(skein_jar()), "skein")]
    assert resources_of(context_of(rm))[".skein.jar"]["resource"] == f"{FS}/cache/skein.jar"


def test_the_callers_spec_is_left_as_it_was(tmp_path: Path) -> None:
    """The operator keeps its spec (a retry submits it again): staging fills in a copy."""
    sub, rm, fs = make()
    app_spec = spec(tmp_path)
    before = app_spec.to_dict()
    sub.submit(app_spec)
    assert app_spec.to_dict() == before
    assert staged(context_of(rm)).services["worker"].script.startswith("bash .skein.sh")


def test_the_spec_goes_inline_up_to_its_limit_exactly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec of exactly ``MAX_INLINE_SPEC`` base64 characters still travels in the environment."""
    sub, rm, fs = make()
    app_spec = spec(tmp_path)
    _resources, inline = sub.stage(APP, APP_DIR, app_spec)
    assert inline is not None
    monkeypatch.setattr(submit_mod, "MAX_INLINE_SPEC", len(inline))
    assert sub.stage(APP, APP_DIR, app_spec)[1] == inline
    monkeypatch.setattr(submit_mod, "MAX_INLINE_SPEC", len(inline) - 1)
    resources, none = sub.stage(APP, APP_DIR, app_spec)
    assert none is None and resources[".skein.proto"].size == len(base64.b64decode(inline))


def test_a_nameservice_ending_in_x_keeps_its_name(tmp_path: Path) -> None:
    """Only the trailing slash of fs.defaultFS is dropped from staged URLs, no other character."""
    sub, rm, fs = make(default_fs="hdfs://clusterX")
    sub.submit(spec(tmp_path))
    assert resources_of(context_of(rm))[".skein.crt"]["resource"] == f"hdfs://clusterX{APP_DIR}/.skein.crt"


def test_staging_says_how_many_files_went_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The info line an operator reads to find a job's staged files: the count, the id and the folder
    (skein's certificate, key, jar, the launch script and the local code.zip; then the spec)."""
    sub, rm, fs = make()
    app_spec = spec(tmp_path)
    records: list[str] = []
    monkeypatch.setattr(submit_mod.log, "info", lambda msg, *args: records.append(msg % args))
    sub.submit(app_spec)
    monkeypatch.setattr(submit_mod, "MAX_INLINE_SPEC", 0)
    sub.stage(APP, APP_DIR, app_spec)
    assert records == [
        f"staged 5 files of {APP} in {APP_DIR} (the spec in the AM's environment)",
        f"staged 6 files of {APP} in {APP_DIR}",
    ]


# ---------------------------------------------------------------- the AM's environment and command


def test_the_submitters_language_reaches_the_am_and_every_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """skein's AM and the executors decode text with LANG: they get the submitter's."""
    monkeypatch.setenv("LANG", "C.UTF-8")
    sub, rm, fs = make()
    sub.submit(spec(tmp_path))
    context = context_of(rm)
    assert env_of(context)["LANG"] == "C.UTF-8"
    assert dict(staged(context).services["worker"].env) == {"JOB": "spec", "LANG": "C.UTF-8"}


def test_without_a_language_none_is_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LANG", raising=False)
    sub, rm, fs = make()
    sub.submit(spec(tmp_path))
    context = context_of(rm)
    assert "LANG" not in env_of(context)
    assert dict(staged(context).services["worker"].env) == {"JOB": "spec"}


def test_the_ams_log_level_is_the_masters(tmp_path: Path) -> None:
    sub, rm, fs = make()
    sub.submit(spec(tmp_path))
    assert "-Dskein.log.level=DEBUG " in context_of(rm)["am-container-spec"]["commands"]["command"]
    assert submit_mod._level("warn") == "WARN"


def test_submission_context_is_what_the_rm_reads() -> None:
    """Every field by the name the RM's ``ApplicationSubmissionContextInfo`` reads: a misspelt key is
    silently ignored by the RM (a managed AM, no ACL groups, the wrong node label)."""
    app_spec = skein.ApplicationSpec(
        name="ctx",
        queue="q",
        tags=["b", "a"],
        max_attempts=2,
        node_label="gpu",
        acls=skein.ACLs(
            enable=True,
            view_users=["u1", "u2"],
            view_groups=["g1", "g2"],
            modify_users=["m1", "m2"],
            modify_groups=["h1", "h2"],
        ),
        master=skein.Master(resources=skein.Resources(memory="1 GiB", vcores=3), script="x"),
    )
    res = LocalResource("hdfs://nn/a", 7, 9, type="ARCHIVE", visibility="PRIVATE")
    context = submission_context(
        app_id=APP,
        app_spec=app_spec,
        local_resources={"a": res},
        environment={"K": "v"},
        command="run",
        tokens={"svc": "tok"},
    )
    resource = {"resource": "hdfs://nn/a", "type": "ARCHIVE", "visibility": "PRIVATE", "size": 7, "timestamp": 9}
    assert context == {
        "application-id": APP,
        "application-name": "ctx",
        "application-type": "skein",
        "queue": "q",
        "priority": 0,
        "max-app-attempts": 2,
        "unmanaged-AM": False,
        "keep-containers-across-application-attempts": False,
        "resource": {"memory": 1024, "vCores": 3},
        "application-tags": {"tag": ["a", "b"]},
        "am-container-spec": {
            "local-resources": {"entry": [{"key": "a", "value": resource}]},
            "environment": {"entry": [{"key": "K", "value": "v"}]},
            "commands": {"command": "run"},
            "application-acls": {
                "entry": [
                    {"key": "VIEW_APP", "value": "u1,u2 g1,g2"},
                    {"key": "MODIFY_APP", "value": "m1,m2 h1,h2"},
                ]
            },
            "credentials": {"tokens": {"entry": [{"key": "svc", "value": "tok"}]}, "secrets": {"entry": []}},
        },
        "am-container-node-label-expression": "gpu",
    }


def test_a_local_resource_keeps_its_type_and_visibility_in_skeins_spec() -> None:
    """A ``.zip`` staged as a FILE stays a file (skein would guess an archive from the name)."""
    got = LocalResource("hdfs://nn/x.zip", 3, 4, type="FILE", visibility="PUBLIC").to_skein()
    assert (str(got.type), str(got.visibility), got.size, got.timestamp) == ("FILE", "PUBLIC", 3, 4)


# ---------------------------------------------------------------- the RM's answers


@pytest.mark.parametrize("reply", [{}, {"application-id": ""}, [], None])
def test_a_new_application_reply_without_an_id_is_refused(reply: Any) -> None:
    """Without an id nothing can be staged or submitted: the reply is shown, not guessed around."""
    sub, rm, fs = make()
    rm.answers[("POST", NEW_APP)] = [httpx.Response(200, content=json.dumps(reply).encode())]
    with pytest.raises(ClusterError, match="new-application answered without an id") as err:
        sub.new_application()
    assert str(err.value).endswith(repr(str(reply)))


def test_a_long_reply_is_cut_to_200_characters() -> None:
    sub, rm, fs = make()
    reply = {"unexpected": "x" * 400}
    rm.answers[("POST", NEW_APP)] = [httpx.Response(200, json=reply)]
    with pytest.raises(ClusterError) as err:
        sub.new_application()
    assert str(err.value).endswith(repr(str(reply)[:200]))


def test_new_application_is_asked_again_after_an_unanswered_ask() -> None:
    sub, rm, fs = make()
    rm.answers[("POST", NEW_APP)] = [OutcomeUnknown("the first RM died")]
    assert sub.new_application() == APP
    assert [(m, p) for m, p, _ in rm.calls] == [("POST", NEW_APP), ("POST", NEW_APP)]


@pytest.mark.parametrize("first", [[], [OutcomeUnknown("no answer")]])
def test_a_failed_new_application_names_the_call(first: list[Exception]) -> None:
    sub, rm, fs = make()
    rm.answers[("POST", NEW_APP)] = [*first, httpx.Response(503, text="busy")]
    with pytest.raises(ClusterUnreachable, match="^the ResourceManager's new-application: the server failed"):
        sub.new_application()


def test_an_unanswered_submission_is_sent_again_only_when_the_rm_lacks_it(caplog: pytest.LogCaptureFixture) -> None:
    sub, rm, fs = make()
    context = {"application-id": APP, "queue": "q"}
    rm.answers[("POST", "/ws/v1/cluster/apps")] = [OutcomeUnknown("timed out")]
    with caplog.at_level(logging.WARNING, logger=submit_mod.__name__):
        sub.send_submission(APP, context)
    assert rm.posts("/ws/v1/cluster/apps") == [context, context]
    assert ("GET", f"/ws/v1/cluster/apps/{APP}", None) in rm.calls
    (record,) = caplog.records
    assert record.getMessage() == f"timed out; asking the ResourceManager whether it has {APP}"


def test_an_unanswered_submission_the_rm_has_is_not_sent_again() -> None:
    sub, rm, fs = make()
    rm.stored.add(APP)
    rm.answers[("POST", "/ws/v1/cluster/apps")] = [OutcomeUnknown("timed out")]
    sub.send_submission(APP, {"application-id": APP})
    assert len(rm.posts("/ws/v1/cluster/apps")) == 1


def test_the_second_submission_and_the_lookup_name_their_call() -> None:
    sub, rm, fs = make()
    rm.answers[("POST", "/ws/v1/cluster/apps")] = [OutcomeUnknown("timed out"), httpx.Response(403)]
    with pytest.raises(ClusterForbidden, match=f"^the ResourceManager's submission of {APP}: refused"):
        sub.send_submission(APP, {"application-id": APP})
    rm.answers[("POST", "/ws/v1/cluster/apps")] = [OutcomeUnknown("timed out")]
    rm.answers[("GET", f"/ws/v1/cluster/apps/{APP}")] = [httpx.Response(503)]
    with pytest.raises(ClusterUnreachable, match=f"^the ResourceManager's report of {APP}: the server failed"):
        sub.send_submission(APP, {"application-id": APP})


def test_a_failed_submission_removes_the_whole_folder(tmp_path: Path) -> None:
    sub, rm, fs = make()
    rm.answers[("POST", "/ws/v1/cluster/apps")] = [httpx.Response(400, text="bad queue")]
    with pytest.raises(ClusterError, match="bad queue"):
        sub.submit(spec(tmp_path))
    assert not [p for p in fs.files if p.startswith(f"{APP_DIR}/")] and APP_DIR not in fs.dirs


def test_a_folder_that_cannot_be_removed_is_logged_and_the_submissions_error_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sub, rm, fs = make()
    rm.answers[("POST", "/ws/v1/cluster/apps")] = [httpx.Response(400, text="bad queue")]
    fs.fail_delete = ClusterError("namenode in safe mode")
    with caplog.at_level(logging.WARNING, logger=submit_mod.__name__), pytest.raises(ClusterError, match="bad queue"):
        sub.submit(spec(tmp_path))
    (record,) = caplog.records
    assert record.getMessage() == f"could not remove {APP_DIR} after a failed submission: namenode in safe mode"


def test_kill_names_the_application_when_it_fails() -> None:
    sub, rm, fs = make()
    with pytest.raises(NotFound, match="^the ResourceManager's kill of application_1_0001: not found"):
        kill_application(sub.http, sub.urls, "application_1_0001")


# ---------------------------------------------------------------- tokens on a Kerberized cluster


def test_webhdfs_without_a_token_is_refused(tmp_path: Path) -> None:
    sub, rm, fs = make(principal="rm/rm@R")
    rm.answers[("GET", "/webhdfs/v1/")] = [httpx.Response(200, json={"Token": None})]
    with pytest.raises(ClusterError, match="^WebHDFS GETDELEGATIONTOKEN answered without a token$"):
        sub.tokens()


def test_a_refused_webhdfs_token_names_the_call() -> None:
    sub, rm, fs = make(principal="rm/rm@R")
    rm.answers[("GET", "/webhdfs/v1/")] = [httpx.Response(403)]
    with pytest.raises(ClusterForbidden, match="^WebHDFS GETDELEGATIONTOKEN: refused"):
        sub.tokens()


@pytest.mark.parametrize("answer", [{}, {"token": ""}, ["token"]])
def test_the_rm_without_a_token_is_refused(answer: Any) -> None:
    sub, rm, fs = make(principal="rm/rm@R")
    rm.answers[("POST", "/ws/v1/cluster/delegation-token")] = [httpx.Response(200, json=answer)]
    with pytest.raises(ClusterError, match="^the ResourceManager's delegation-token answered without a token$"):
        sub.tokens()


def test_a_refused_rm_token_names_the_call() -> None:
    sub, rm, fs = make(principal="rm/rm@R")
    rm.answers[("POST", "/ws/v1/cluster/delegation-token")] = [httpx.Response(403)]
    with pytest.raises(ClusterForbidden, match="^the ResourceManager's delegation-token: refused"):
        sub.tokens()


def _hashed(local: str) -> str:
    import hashlib

    return hashlib.md5(local.encode()).hexdigest()[:8].upper()  # noqa: S324 - as the submitter names it
