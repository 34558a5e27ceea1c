"""Submit and kill through the ResourceManager's REST API: no JVM, no Hadoop client.

What skein's Java driver did, done over HTTP (``rest.ClusterHttp``) and WebHDFS:

1. ``POST /ws/v1/cluster/apps/new-application`` gives the application id;
2. the application folder ``~/.skein/<id>`` (mode 0700) on HDFS receives what
   skein's ApplicationMaster expects beside it: skein's jar (``.skein.jar``),
   the TLS certificate and key the AM serves its key-value store with
   (``.skein.crt``/``.skein.pem``, skein's own from ``~/.skein`` or the
   connection's folder, as its driver used), each service's script (``.skein.sh``),
   every local file of the spec; what is the same job after job comes from the
   upload cache (``<base_path>/cache``) instead;
3. the finished spec (``.skein.proto``, the protobuf the AM reads, with every
   file's HDFS URL, size and modification time filled in, as YARN localises
   them) travels in the AM's environment and the AM's command writes it
   before starting Java; only a spec too large for an environment variable
   is written to HDFS. An HDFS write's close may wait for the DataNode's block
   report (the client backs off 400 ms): with it, that one write was most of
   a submit's time;
4. ``POST /ws/v1/cluster/apps`` with the submission context: the AM container
   (its local resources, environment, the ``java ... ApplicationMaster``
   command), resources, queue, tags, attempts, ACLs and, on a Kerberized
   cluster, the HDFS delegation token obtained over WebHDFS with the
   ResourceManager as renewer (so YARN localises the files and renews the
   token while the application runs).

skein's Java AM still runs in the AM container and skein's Python
``ApplicationClient`` in the containers: only the submitting side changed.
The pieces are pure where they can be (``am_command``, ``am_classpath``,
``submission_context``, ``finished_service``), tested without a cluster.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import functools
import hashlib
import logging
import os
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import skein

from airflow_provider_tony.retention import REFERENCES_NAME, references_json
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import ClusterError, NotFound, OutcomeUnknown
from airflow_provider_tony.runtime.hadoop_tokens import HDFS_DELEGATION_TOKEN, Token
from airflow_provider_tony.runtime.namenodes import pick
from airflow_provider_tony.yarn.namenodes import NameNodeClients, hdfs_token_service, rpc_token_service
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls

log = logging.getLogger(__name__)

__all__ = [
    "LocalResource",
    "RestSubmitter",
    "am_classpath",
    "am_command",
    "hdfs_token_service",
    "kill_application",
    "skein_jar",
    "submission_context",
]

#: Hadoop's ``DEFAULT_YARN_CROSS_PLATFORM_APPLICATION_CLASSPATH``: used when yarn-site.xml names none.
DEFAULT_APPLICATION_CLASSPATH = (
    "{{HADOOP_CONF_DIR}}",
    "{{HADOOP_COMMON_HOME}}/share/hadoop/common/*",
    "{{HADOOP_COMMON_HOME}}/share/hadoop/common/lib/*",
    "{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/*",
    "{{HADOOP_HDFS_HOME}}/share/hadoop/hdfs/lib/*",
    "{{HADOOP_YARN_HOME}}/share/hadoop/yarn/*",
    "{{HADOOP_YARN_HOME}}/share/hadoop/yarn/lib/*",
)
#: What the NodeManager replaces with the container's log folder / the class path separator.
LOG_DIR = "<LOG_DIR>"
CPS = "<CPS>"
AM_CLASS = "com.anaconda.skein.ApplicationMaster"


def skein_jar() -> Path:
    """skein's jar as its Python package ships it (the AM's classes; no JVM runs here)."""
    return Path(skein.__file__).resolve().parent / "java" / "skein.jar"


@dataclass(frozen=True)
class LocalResource:
    """One file YARN localises into a container: where it is on HDFS and what it was when staged."""

    url: str
    size: int
    timestamp: int
    type: str = "FILE"  # or ARCHIVE
    visibility: str = "APPLICATION"

    def to_skein(self) -> skein.File:
        return skein.File(
            source=self.url,
            type=self.type.lower(),
            visibility=self.visibility.lower(),
            size=self.size,
            timestamp=self.timestamp,
        )

    def to_rest(self) -> dict[str, Any]:
        return {
            "resource": self.url,
            "type": self.type,
            "visibility": self.visibility,
            "size": self.size,
            "timestamp": self.timestamp,
        }


def am_classpath(application_classpath: str | None) -> str:
    """The AM's ``CLASSPATH``: the container's, its working folder (``.skein.jar``), then the cluster's jars."""
    entries = (
        [c.strip() for c in application_classpath.split(",") if c.strip()]
        if application_classpath
        else list(DEFAULT_APPLICATION_CLASSPATH)
    )
    return CPS.join(["{{CLASSPATH}}", "./*", *entries])


#: Its largest size: Linux refuses an environment string over 128 KiB (MAX_ARG_STRLEN).
MAX_INLINE_SPEC = 96 * 1024


def am_command(app_dir_url: str, log_level: str = "INFO", *, inline_spec: bool = False) -> str:
    """The AM container's one command: skein's ApplicationMaster, logging into the container's log folder.

    ``app_dir_url`` is ours (``hdfs://.../.skein/<id>``): no user input goes in this line.
    With ``inline_spec`` it first writes ``.skein.proto`` from ``$TONY_SKEIN_SPEC``
    with ``printenv``: YARN runs the line as ``exec /bin/bash -c "<line>"``
    without escaping it, and a ``$`` would be expanded by the outer shell,
    putting the spec on a command line (where ``ps`` shows it to every user of
    the host).
    """
    java = (
        "{{JAVA_HOME}}/bin/java -Xmx128M "
        f"-Dskein.log.level={log_level} -Dskein.log.directory={LOG_DIR} "
        f"{AM_CLASS} {app_dir_url} >{LOG_DIR}/application.master.log 2>&1"
    )
    if not inline_spec:
        return java
    return f"printenv {C.ENV_SKEIN_SPEC} | base64 -d >.skein.proto && exec {java}"


def _entries(mapping: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {"entry": [{"key": k, "value": v} for k, v in mapping.items()]}


def submission_context(
    *,
    app_id: str,
    app_spec: skein.ApplicationSpec,
    local_resources: Mapping[str, LocalResource],
    environment: Mapping[str, str],
    command: str,
    tokens: Mapping[str, str] | None = None,
    application_type: str = "skein",
) -> dict[str, Any]:
    """The body of ``POST /ws/v1/cluster/apps`` (the RM's ``ApplicationSubmissionContextInfo``)."""
    master = app_spec.master
    container: dict[str, Any] = {
        "local-resources": _entries({k: r.to_rest() for k, r in sorted(local_resources.items())}),
        "environment": _entries(dict(sorted(environment.items()))),
        "commands": {"command": command},
    }
    acls = app_spec.acls
    if acls.enable:
        container["application-acls"] = _entries(
            {
                "VIEW_APP": f"{','.join(acls.view_users)} {','.join(acls.view_groups)}",
                "MODIFY_APP": f"{','.join(acls.modify_users)} {','.join(acls.modify_groups)}",
            }
        )
    if tokens:
        container["credentials"] = {"tokens": _entries(tokens), "secrets": _entries({})}
    context: dict[str, Any] = {
        "application-id": app_id,
        "application-name": app_spec.name,
        "application-type": application_type,
        "queue": app_spec.queue,
        "priority": 0,
        "max-app-attempts": app_spec.max_attempts,
        "unmanaged-AM": False,
        "keep-containers-across-application-attempts": False,
        "resource": {"memory": int(master.resources.memory), "vCores": int(master.resources.vcores)},
        "application-tags": {"tag": sorted(app_spec.tags)},
        "am-container-spec": container,
    }
    if app_spec.node_label:
        context["am-container-node-label-expression"] = app_spec.node_label
    return context


RM_DELEGATION_TOKEN = "RM_DELEGATION_TOKEN"  # noqa: S105 - a token kind's name, not a secret


def finished_service(name: str, service: skein.Service, resources: Mapping[str, LocalResource]) -> skein.Service:
    """``service`` as the AM launches it: staged files, skein's own files, and the script run from ``.skein.sh``.

    ``resources`` maps every file name to its staged ``LocalResource`` (its own
    files and ``.skein.sh``/``.skein.crt``/``.skein.pem``). The script's output
    goes to ``<service>.log`` in the container's log folder, as skein's driver
    sets it (``tony logs`` reads those names).
    """
    out = copy.deepcopy(service)
    out.files = {k: r.to_skein() for k, r in resources.items()}
    out.script = f"bash .skein.sh >{LOG_DIR}/{name}.log 2>&1"
    lang = os.environ.get("LANG")
    if lang:
        out.env = {**out.env, "LANG": lang}
    return out


@dataclass
class RestSubmitter:
    """Stage and submit one ``skein.ApplicationSpec``; kill by id. One per ``TonyClient``.

    :param http: the cluster-access client (SPNEGO on a Kerberized cluster).
    :param urls: where the RM and WebHDFS are.
    :param hdfs: an ``hdfs`` client over WebHDFS as the submitting user.
    :param default_fs: ``fs.defaultFS`` (``hdfs://host:port``), the scheme and authority of staged URLs.
    :param user: the submitting user (``HADOOP_USER_NAME`` of the AM on an open cluster).
    :param application_classpath: yarn-site.xml's ``yarn.application.classpath``, None for Hadoop's default.
    :param rm_principal: the RM's Kerberos principal (``_HOST`` resolved): the HDFS token's renewer;
        None on an open cluster (no token is fetched).
    :param namenodes: the NameNodes the job touches besides the default one (``yarn/namenodes.py``):
        each gets a token of its own, and a file YARN localises from one is looked up there.
    """

    http: ClusterHttp
    urls: ClusterUrls
    hdfs: Any
    default_fs: str
    user: str
    application_classpath: str | None = None
    rm_principal: str | None = None
    rm_address: str | None = None  # the RM's client RPC address (host:port), on a Kerberized cluster
    security: Any = None
    #: Uploads ``(local file, name)`` once per content hash to a trusted cache; returns its HDFS path.
    cache: Callable[[str, str], str] | None = None
    #: Writes ``(data, name, suffix, private)`` once per content hash to the same cache; its HDFS path.
    cache_data: Callable[[bytes, str, str, bool], str] | None = None
    namenodes: NameNodeClients | None = None

    # ------------------------------------------------------------ phases

    def new_application(self) -> str:
        """An id from the RM. Asked again after an unanswered ask (a failover): an id given but never
        used is forgotten by YARN, so a second ask creates nothing that stays."""
        url, what = self.urls.rm("apps/new-application"), "the ResourceManager's new-application"
        try:
            data = self.http.request("POST", url, what=what).json()
        except OutcomeUnknown:
            data = self.http.request("POST", url, what=what).json()
        app_id = data.get("application-id") if isinstance(data, dict) else None
        if not app_id:
            raise ClusterError(f"the ResourceManager's new-application answered without an id: {str(data)[:200]!r}")
        return str(app_id)

    def app_dir(self, app_id: str) -> str:
        """``/user/<user>/.skein/<id>``: where skein's driver staged too (the AM removes it at the end)."""
        return str(self.hdfs.resolve(f".skein/{app_id}"))

    def submit(self, app_spec: skein.ApplicationSpec) -> str:
        """new-application -> stage -> submission context -> submit; returns the application id.

        A failure after the id was given removes the staged folder; YARN forgets
        an id that was never submitted.
        """
        app_spec._validate()  # skein's own checks, as its driver made them before anything is asked
        app_id = self.new_application()
        app_dir = self.app_dir(app_id)
        try:
            resources, inline = self.stage(app_id, app_dir, app_spec)
            tokens = self.tokens()
            env = {
                **app_spec.master.env,
                "CLASSPATH": am_classpath(self.application_classpath),
                "SKEIN_APPLICATION_ID": app_id,
                **({C.ENV_SKEIN_SPEC: inline} if inline else {}),
            }
            if os.environ.get("LANG"):
                env["LANG"] = os.environ["LANG"]
            if self.rm_principal is None:  # simple authentication: the AM (and skein) act as this user
                env["HADOOP_USER_NAME"] = self.user
            context = submission_context(
                app_id=app_id,
                app_spec=app_spec,
                local_resources=resources,
                environment=env,
                command=am_command(self._url(app_dir), _level(app_spec.master.log_level), inline_spec=bool(inline)),
                tokens=tokens,
            )
            self.send_submission(app_id, context)
        except BaseException:
            try:
                self.hdfs.delete(app_dir, recursive=True)
            except Exception as exc:  # noqa: BLE001 - the submission's own error is the one to raise
                log.warning("could not remove %s after a failed submission: %s", app_dir, exc)
            raise
        return app_id

    def send_submission(self, app_id: str, context: dict[str, Any]) -> None:
        """POST the submission once; after an unanswered one (a failover mid-call), look first.

        The RM keeps an accepted submission in its state store, so the next active RM knows it:
        sent again only when it does not (and an RM that has it after all answers a submission of
        a known id as done: ``ClientRMService`` returns at once for "an earlier submitted application").
        """
        what = f"the ResourceManager's submission of {app_id}"
        try:
            self.http.request("POST", self.urls.rm("apps"), what=what, json=context)
            return
        except OutcomeUnknown as exc:
            log.warning("%s; asking the ResourceManager whether it has %s", exc, app_id)
        if self.known(app_id):
            return
        self.http.request("POST", self.urls.rm("apps"), what=what, json=context)

    def known(self, app_id: str) -> bool:
        """Whether the ResourceManager has ``app_id`` (a 404 says it has not)."""
        try:
            self.http.request("GET", self.urls.app(app_id), what=f"the ResourceManager's report of {app_id}")
        except NotFound:
            return False
        return True

    def stage(
        self, app_id: str, app_dir: str, app_spec: skein.ApplicationSpec
    ) -> tuple[dict[str, LocalResource], str | None]:
        """Upload skein's files and the spec's local files; the AM's resources and the finished spec.

        The spec comes back base64-encoded for the AM's environment, or, when
        too large for it, written to HDFS among the resources (then None).

        Every file but the spec is independent of the others: they are looked
        up or written at once from a few threads, then the spec, which names
        them all. What is the same job after job (skein's jar, the launch
        scripts, the connection's TLS credentials) comes from the upload cache,
        so a submit writes one small file, the list of what the application
        localises (``tony-references.json``, which ``tony gc`` reads to keep
        those files while it runs), and the spec only when too large for the
        AM's environment: each WebHDFS write is a NameNode and a DataNode round
        trip, and its close may wait for the block report.
        """
        self.hdfs.makedirs(app_dir, permission="700")
        # Credentials made for this job alone are written with it: caching them would keep one key per job.
        kept, security = self.security is not None, self.security or skein.Security.new_credentials()
        services = app_spec.services
        files = [f for svc in [app_spec.master, *services.values()] for f in svc.files.values()]
        cert, key = security._get_bytes("cert"), security._get_bytes("key")
        work: dict[str, Callable[[], LocalResource]] = {
            ".skein.crt": lambda: self._small(f"{app_dir}/.skein.crt", cert, ("skein-cert", ".crt", False), kept),
            ".skein.pem": lambda: self._small(f"{app_dir}/.skein.pem", key, ("skein-key", ".pem", True), kept),
            ".skein.jar": lambda: self._cached(app_dir, str(skein_jar()), "skein"),
        }
        # Services with the same script share one work item: two threads putting the same cached file
        # at once would replace each other's copy under the first one's feet.
        script_key = {
            name: f"script {hashlib.sha256(svc.script.encode()).hexdigest()}" for name, svc in services.items()
        }
        for name, service in services.items():
            work.setdefault(
                script_key[name],
                functools.partial(
                    self._small, f"{app_dir}/{name}.sh", service.script.encode(), ("launch", ".sh", False), True
                ),
            )
        for source in sorted({f.source for f in files}):
            work[f"file {source}"] = functools.partial(self._resource, app_dir, source)
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="tony-stage") as pool:
            futures = {key: pool.submit(fn) for key, fn in work.items()}
            done = {key: future.result() for key, future in futures.items()}

        def staged(file: skein.File) -> LocalResource:
            res = done[f"file {file.source}"]
            kind = "ARCHIVE" if str(file.type).lower().endswith("archive") else "FILE"
            return dataclasses.replace(res, type=kind)

        # What this application localises, for `tony gc`: a staged file it names stays while it runs.
        references = [urllib.parse.urlsplit(r.url).path for r in done.values()]
        refs = references_json(references)
        self.hdfs.write(f"{app_dir}/{REFERENCES_NAME}", data=refs, overwrite=True, permission="600")
        skein_files = {k: done[k] for k in (".skein.crt", ".skein.pem")}
        finished = copy.deepcopy(app_spec)
        for name, service in services.items():
            own = {k: staged(f) for k, f in service.files.items()}
            resources = {**own, ".skein.sh": done[script_key[name]], **skein_files}
            finished.services[name] = finished_service(name, service, resources)
        master = {k: staged(f) for k, f in app_spec.master.files.items()}
        master[".skein.jar"] = done[".skein.jar"]
        master.update(skein_files)
        finished.master.files = {k: r.to_skein() for k, r in master.items()}
        crt, pem = skein_files[".skein.crt"], skein_files[".skein.pem"]
        finished.master.security = skein.Security(cert_file=crt.to_skein(), key_file=pem.to_skein())
        proto = finished.to_protobuf().SerializeToString()
        inline = base64.b64encode(proto).decode("ascii")
        if len(inline) <= MAX_INLINE_SPEC:
            log.info("staged %d files of %s in %s (the spec in the AM's environment)", len(work), app_id, app_dir)
            return master, inline
        master[".skein.proto"] = self._write(f"{app_dir}/.skein.proto", proto)
        log.info("staged %d files of %s in %s", len(work) + 1, app_id, app_dir)
        return master, None

    def tokens(self) -> dict[str, str]:
        """On a Kerberized cluster, the tokens the AM and the containers need, renewed by the RM.

        As skein's driver collects them: an HDFS delegation token (YARN localises
        the job's files with it; containers use it for WebHDFS) and an RM
        delegation token (skein's AM asks the RM for its application's report).
        Both are fetched with SPNEGO, the RM's principal as renewer, and filed
        under the service names Hadoop's clients look them up by.
        """
        if self.rm_principal is None:
            return {}
        hdfs_service = hdfs_token_service(self.default_fs)
        tokens = {hdfs_service: self._hdfs_token(self.http, self.urls, hdfs_service, "WebHDFS")}
        # One per other NameNode the job touches, each filed under its own service: a token is good on
        # its own NameNode only, and YARN's localiser and the containers choose theirs by service.
        for namenode, fs in self.namenodes.items() if self.namenodes is not None else ():
            what = f"WebHDFS of {namenode.authority}"
            tokens[namenode.token_service] = self._hdfs_token(fs.http, fs.urls, namenode.token_service, what)
        answer = self.http.request(
            "POST",
            self.urls.rm("delegation-token"),
            what="the ResourceManager's delegation-token",
            json={"renewer": self.rm_principal},
        ).json()
        if not isinstance(answer, dict) or not answer.get("token"):
            raise ClusterError("the ResourceManager's delegation-token answered without a token")
        rm_got = Token.from_url_string(str(answer["token"]))
        rm_service = rpc_token_service(self.rm_address or "")
        rm = Token(rm_service, RM_DELEGATION_TOKEN, rm_service, rm_got.identifier, rm_got.password)
        return {**tokens, rm_service: rm.url_string()}

    def _hdfs_token(self, http: ClusterHttp, urls: ClusterUrls, service: str, what: str) -> str:
        """A NameNode's delegation token over WebHDFS (SPNEGO, the RM as renewer), as an HDFS token of ``service``."""
        data = http.get_json(
            urls.webhdfs("/"),
            what=f"{what} GETDELEGATIONTOKEN",
            params={"op": "GETDELEGATIONTOKEN", "renewer": str(self.rm_principal)},
        )
        url_string = ((data or {}).get("Token") or {}).get("urlString")
        if not url_string:
            raise ClusterError(f"{what} GETDELEGATIONTOKEN answered without a token")
        got = Token.from_url_string(str(url_string))
        # WebHDFS files it as a WEBHDFS token of its HTTP address; YARN's localiser and the RM's
        # renewer look for the same identifier as an HDFS token of the NameNode's RPC address.
        return Token(service, HDFS_DELEGATION_TOKEN, service, got.identifier, got.password).url_string()

    # ------------------------------------------------------------ files

    def _url(self, path: str) -> str:
        return f"{self.default_fs.rstrip('/')}{path}"

    def _status(self, path: str, location: str = "") -> dict[str, Any]:
        """``path``'s status on ``location``'s NameNode (the default one for a plain path)."""
        status = pick(self.namenodes or self.hdfs, location).status(path, strict=False)
        if status is None:
            raise ClusterError(f"{path} is not on HDFS: a file of the job cannot be staged from it")
        return dict(status)

    def _write(self, path: str, data: bytes) -> LocalResource:
        self.hdfs.write(path, data=data, overwrite=True, permission="600")
        return self._at(path)

    def _upload(self, app_dir: str, local: str) -> LocalResource:
        """A local file uploaded with the job (``<app_dir>/<hash of its path>/<name>``, as skein's driver names it)."""
        folder = f"{app_dir}/{hashlib.md5(local.encode()).hexdigest()[:8].upper()}"  # noqa: S324 - a name, not security
        self.hdfs.makedirs(folder, permission="700")
        remote = f"{folder}/{Path(local).name}"
        self.hdfs.upload(remote, local, overwrite=True, permission="600")
        return self._at(remote)

    def _small(self, path: str, data: bytes, cache_as: tuple[str, str, bool], cacheable: bool) -> LocalResource:
        """``data`` from the cache (``cache_as``: name, suffix, private) when it may be, else written at ``path``."""
        if not cacheable or self.cache_data is None:
            return self._write(path, data)
        return self._at(self.cache_data(data, *cache_as))

    def _at(self, path: str) -> LocalResource:
        """The staged file at ``path`` as YARN localises it (size and modification time checked)."""
        status = self._status(path)
        return LocalResource(self._url(path), int(status["length"]), int(status["modificationTime"]))

    def _cached(self, app_dir: str, local: str, name: str) -> LocalResource:
        """A file every job ships unchanged (skein's jar: 8 MB) from the cache, else uploaded with the job."""
        if self.cache is None:
            return self._upload(app_dir, local)
        return self._at(self.cache(local, name))

    def _resource(self, app_dir: str, source: str) -> LocalResource:
        """A file of the spec on HDFS: a local one uploaded with the job, an ``hdfs://`` one as it is."""
        parsed = urllib.parse.urlsplit(source)
        if parsed.scheme == "file":
            return self._upload(app_dir, parsed.path)
        if parsed.scheme not in ("hdfs", "viewfs"):
            raise ClusterError(f"cannot stage {source}: only local files and hdfs:// sources are supported")
        status = self._status(parsed.path, source)
        url = source if parsed.netloc else self._url(parsed.path)
        return LocalResource(url, int(status["length"]), int(status["modificationTime"]))


def _level(level: Any) -> str:
    """skein's ``LogLevel`` (or its text) as the AM's ``-Dskein.log.level``: skein's enum has no
    ``value``, its text is its name (``LogLevel.DEBUG`` -> ``DEBUG``)."""
    return str(level).upper()


def kill_application(http: ClusterHttp, urls: ClusterUrls, app_id: str) -> None:
    """``PUT .../apps/<id>/state {"state": "KILLED"}``: YARN answers at once (202) and kills in the background."""
    http.request(
        "PUT", urls.app(app_id, "/state"), what=f"the ResourceManager's kill of {app_id}", json={"state": "KILLED"}
    )
