"""Before submit: every NameNode a job touches, where its WebHDFS is, and the service its token is filed under.

A job may keep inputs on ``hdfs://warehouse``, its model on ``hdfs://ml`` and read another
cluster's ``hdfs://10.0.0.9:8020`` from its own code (``other_namenodes``). Each NameNode other
than the default filesystem's needs its WebHDFS address(es) (the checks before submit, the
containers' clients) and, on a Kerberized cluster, a delegation token of its own, filed under
the service Hadoop's clients look it up by. The address comes from the Hadoop conf dir when it
names the nameservice (HA or not), else from the connection's ``namenodes`` extra; a NameNode
found in neither is refused before anything is submitted, naming the field and both fixes.
Never from ``namenode_addresses``' last fallback: that is the default NameNode's web address.

:class:`NameNodeClients` is the submitting side's ``runtime.namenodes.Router``: one WebHDFS
client per NameNode over its own HTTP client (the same SPNEGO and failover as the default's).
"""

from __future__ import annotations

import dataclasses
import json
import socket
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from airflow_provider_tony.runtime.errors import ClusterError, SpecError
from airflow_provider_tony.runtime.namenodes import NameNode, Router, authority_of
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.failover import Endpoints, split_addresses
from airflow_provider_tony.yarn.hadoop_conf import namenode_addresses, read_site
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls, WebHdfs

__all__ = [
    "NameNodeClients",
    "Touched",
    "hdfs_token_service",
    "parse_extra",
    "resolve",
    "rpc_token_service",
    "touched",
]

#: Hadoop's NameNode RPC port, for an ``hdfs://host`` authority that names none.
DEFAULT_RPC_PORT = 8020


def rpc_token_service(address: str) -> str:
    """``<ip>:<port>`` of an RPC address (``host:port``), as Hadoop files a token for it; several
    comma-separated (an HA cluster's RMs) give each one's, comma-joined, as Hadoop's HA clients
    look an RM token up."""
    services = []
    for one in address.split(","):
        host, _, port = one.strip().rpartition(":")
        try:
            host = socket.gethostbyname(host)
        except OSError:
            pass
        services.append(f"{host}:{port}")
    return ",".join(services)


def hdfs_token_service(default_fs: str) -> str:
    """The service an HDFS delegation token is filed under, as Hadoop names it.

    ``<ip>:<port>`` of the NameNode's RPC address (Hadoop's default
    ``hadoop.security.token.service.use_ip``), or ``ha-hdfs:<nameservice>``
    for an HA name service (no port in ``fs.defaultFS``).
    """
    parsed = urllib.parse.urlsplit(default_fs)
    host = parsed.hostname or ""
    if parsed.port is None:
        return f"ha-hdfs:{host}"
    return rpc_token_service(f"{host}:{parsed.port}")


@dataclass(frozen=True)
class Touched:
    """One NameNode a job touches, and the first field (and location) that names it."""

    authority: str
    field: str
    location: str


def _locations(spec: JobSpec) -> Iterator[tuple[str, str | None]]:
    """Every HDFS location of the job, with its field: what the job reads, writes or has YARN localise."""
    for name, item in spec.inputs.items():
        yield f"inputs.{name}.path", item.path
    ckpt = spec.checkpoint
    yield "checkpoint.dir", ckpt.dir
    yield "checkpoint.warm_start_from", ckpt.warm_start_from
    yield "checkpoint.model_dir", ckpt.model_dir
    yield "quality_gate.record", spec.quality_gate.record
    yield "early_stopping.sweep", spec.early_stopping.sweep
    for name, source in spec.files.items():
        yield f"files.{name}", source
    yield "python.archive", spec.python.archive
    yield "src_dir", spec.src_dir
    for i, uri in enumerate(spec.other_namenodes):
        yield f"other_namenodes[{i}]", uri


def touched(spec: JobSpec) -> list[Touched]:
    """Each ``hdfs://<authority>`` the job names, once, in field order (plain paths are the default filesystem's)."""
    found: dict[str, Touched] = {}
    for field, location in _locations(spec):
        authority = authority_of(location or "")
        if authority is not None and authority not in found:
            found[authority] = Touched(authority, field, str(location))
    return list(found.values())


def parse_extra(value: object) -> dict[str, tuple[str, ...]]:
    """The connection's ``namenodes`` extra: ``{"hdfs://host:port": "http://h:p[,http://...]"}`` (or that as JSON text).

    Keys are normalised as locations' authorities are; every address must be http(s).
    """
    where = "the connection's namenodes extra"
    fix = 'give a JSON object like {"hdfs://nn2.example:8020": "http://nn2.example:9870"}'
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ClusterError(f"{where} is not JSON ({exc}); {fix}") from None
    if not isinstance(value, Mapping):
        raise ClusterError(f"{where} is not a mapping; {fix}")
    out: dict[str, tuple[str, ...]] = {}
    for key, urls in value.items():
        authority = authority_of(str(key))
        addresses = split_addresses(urls) if isinstance(urls, str) else ()
        if authority is None or authority != str(key).rstrip("/").lower():
            raise ClusterError(f"{where}: {str(key)[:80]!r} is not an hdfs://<authority> key; {fix}")
        if not addresses or not all(a.startswith(("http://", "https://")) for a in addresses):
            raise ClusterError(f"{where}: {authority}'s value {str(urls)[:120]!r} is not http(s) addresses; {fix}")
        out[authority] = addresses
    return out


def _from_conf(conf_dir: str | None, authority: str) -> NameNode | None:
    """The NameNode a conf dir's ``hdfs-site.xml`` names as nameservice ``authority``'s host part, or None."""
    name = authority[len("hdfs://") :]
    site = read_site(conf_dir, "hdfs-site.xml")
    services = {s.strip().lower() for s in site.get("dfs.nameservices", "").split(",") if s.strip()}
    if name not in services:
        return None
    addresses = namenode_addresses(conf_dir, name)
    if site.get(f"dfs.ha.namenodes.{name}", "").strip():
        return NameNode(authority, addresses, f"ha-hdfs:{name}")
    rpc = site.get(f"dfs.namenode.rpc-address.{name}")
    if not rpc:
        raise ClusterError(
            f"{conf_dir}/hdfs-site.xml: nameservice {name!r} has neither dfs.ha.namenodes.{name} nor "
            f"dfs.namenode.rpc-address.{name}; set one, as the cluster's own clients need it too"
        )
    return NameNode(authority, addresses, rpc_token_service(rpc))


def _from_extra(extra: Mapping[str, tuple[str, ...]], authority: str) -> NameNode | None:
    addresses = extra.get(authority)
    if not addresses:
        return None
    host_port = authority[len("hdfs://") :]
    if ":" not in host_port.rsplit("]", 1)[-1]:
        host_port = f"{host_port}:{DEFAULT_RPC_PORT}"
    return NameNode(authority, addresses, rpc_token_service(host_port))


def resolve(
    job: list[Touched], default_fs: str, conf_dir: str | None, extra: Mapping[str, tuple[str, ...]]
) -> dict[str, NameNode]:
    """The NameNodes of ``job`` other than ``default_fs``'s, each with its WebHDFS addresses and token service.

    Raises ``SpecError`` naming the first field that names a NameNode whose address is not known.
    """
    default = authority_of(default_fs)
    out: dict[str, NameNode] = {}
    for item in job:
        if item.authority == default:
            continue
        found = _from_conf(conf_dir, item.authority) or _from_extra(extra, item.authority)
        if found is None:
            raise SpecError(
                item.field,
                f"{item.location} is on NameNode {item.authority}, which is not the default filesystem "
                f"({default_fs}) and whose WebHDFS address is not known; name it in the Hadoop conf dir's "
                f"hdfs-site.xml (dfs.nameservices with its dfs.namenode.http-address.*), or add "
                f'{{"{item.authority}": "http://<namenode>:9870"}} to the connection\'s namenodes extra',
            )
        out[item.authority] = found
    return out


class NameNodeClients(Router):
    """The submitting side's WebHDFS clients, one per NameNode: the default one and each of ``others``.

    Each other NameNode gets its own ``ClusterHttp`` (same authentication and TLS as ``http``,
    failover over its own addresses), so a call to one never fails over to another's address.
    """

    def __init__(self, default: WebHdfs, http: ClusterHttp, default_fs: str, others: Mapping[str, NameNode]) -> None:
        self.default = default
        self.default_authority = authority_of(default_fs)
        self.others = dict(others)
        self._made: dict[str, WebHdfs] = {}
        self._http = http

    def for_location(self, location: str) -> WebHdfs:
        authority = authority_of(location)
        if authority is None or authority == self.default_authority:
            return self.default
        return self.client(authority)

    def client(self, authority: str) -> WebHdfs:
        """WebHDFS of NameNode ``authority`` (one the job was resolved with)."""
        if authority not in self._made:
            namenode = self.others.get(authority)
            if namenode is None:
                raise ClusterError(f"NameNode {authority} is not among the job's ({', '.join(self.others) or 'none'})")
            bases = namenode.webhdfs
            endpoints = (Endpoints(f"NameNode {authority}", bases),) if len(bases) > 1 else ()
            settings = dataclasses.replace(self._http.settings, endpoints=endpoints)
            http = ClusterHttp(settings, user=self._http.user)
            self._made[authority] = WebHdfs(http, ClusterUrls(self.default.urls.rm_url, bases[0]))
        return self._made[authority]

    def close(self) -> None:
        for fs in self._made.values():
            fs.http.close()

    def items(self) -> Iterator[tuple[NameNode, WebHdfs]]:
        """Each other NameNode with its client, in a stable order."""
        for authority in sorted(self.others):
            yield self.others[authority], self.client(authority)
