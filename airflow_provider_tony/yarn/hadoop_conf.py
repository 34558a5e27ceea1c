"""The web addresses a Hadoop conf dir names, as HA clusters write them.

A cluster with one ResourceManager names it by ``yarn.resourcemanager.webapp.address``
(or only ``.hostname``); an HA cluster has no plain address at all, but
``yarn.resourcemanager.ha.rm-ids`` and one address per id
(``yarn.resourcemanager.webapp.address.rm1``, or ``.hostname.rm1``). HDFS
likewise: ``fs.defaultFS`` names a nameservice, ``dfs.ha.namenodes.<ns>`` its
NameNodes, ``dfs.namenode.http-address.<ns>.<nn>`` each one's web address.
Under ``yarn.http.policy`` / ``dfs.http.policy`` ``HTTPS_ONLY`` the https
addresses are the ones served. Every candidate is returned, in the configured
order; choosing the active one is the failover layer's work (``yarn/failover.py``).

The files are the cluster's own configuration, trusted as much as ``HADOOP_CONF_DIR``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from airflow_provider_tony.runtime.errors import ClusterError

__all__ = ["namenode_addresses", "read_site", "rm_addresses", "rm_rpc_addresses"]

RM = "yarn.resourcemanager"
_VAR = re.compile(r"\$\{([^}]+)\}")


def read_site(conf_dir: str | None, name: str) -> dict[str, str]:
    """Every property of ``<conf_dir>/<name>`` (empty when there is none), ``${var}`` expanded from the same file."""
    if not conf_dir:
        return {}
    path = Path(conf_dir) / name
    if not path.exists():
        return {}
    props: dict[str, str] = {}
    for prop in ET.parse(path).getroot().iter("property"):  # noqa: S314
        key, value = prop.findtext("name"), prop.findtext("value")
        if key:
            props[key.strip()] = (value or "").strip()
    return {k: _VAR.sub(lambda m: props.get(m.group(1), m.group(0)), v) for k, v in props.items()}


def _url(address: str, https: bool) -> str:
    return address if "://" in address else f"{'https' if https else 'http'}://{address}"


def _rm_address(site: dict[str, str], suffix: str, https: bool) -> str | None:
    """One RM's web address: the explicit one, else its host name on the default port."""
    key = f"{RM}.webapp.https.address{suffix}" if https else f"{RM}.webapp.address{suffix}"
    address = site.get(key)
    host = site.get(f"{RM}.hostname{suffix}")
    if not address and host:
        address = f"{host}:{8090 if https else 8088}"
    if not address or "${" in address:
        return None
    return _url(address, https)


def _rm_ids(site: dict[str, str], conf_dir: str | None) -> list[str] | None:
    """An HA cluster's RM ids in the configured order; None without HA. HA with no id raises."""
    if site.get(f"{RM}.ha.enabled", "false").lower() != "true":
        return None
    ids = [i.strip() for i in site.get(f"{RM}.ha.rm-ids", "").split(",") if i.strip()]
    if not ids:
        raise ClusterError(
            f"{conf_dir}/yarn-site.xml: {RM}.ha.enabled is true but {RM}.ha.rm-ids is empty; list the RM ids"
        )
    return ids


def rm_addresses(conf_dir: str | None) -> tuple[str, ...]:
    """Every ResourceManager's web address in ``yarn-site.xml`` (one, or each of an HA pair), or ().

    An HA id without an address raises, naming the key to set: a silently
    dropped RM is the one that is active when the other is down.
    """
    site = read_site(conf_dir, "yarn-site.xml")
    https = site.get("yarn.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY"
    ids = _rm_ids(site, conf_dir)
    if ids is None:
        one = _rm_address(site, "", https)
        return (one,) if one else ()
    found = []
    for rm_id in ids:
        address = _rm_address(site, f".{rm_id}", https)
        if address is None:
            kind = "webapp.https.address" if https else "webapp.address"
            raise ClusterError(
                f"{conf_dir}/yarn-site.xml: HA ResourceManager {rm_id!r} has no web address; "
                f"set {RM}.{kind}.{rm_id} (or {RM}.hostname.{rm_id})"
            )
        found.append(address)
    return tuple(found)


def rm_rpc_addresses(conf_dir: str | None) -> tuple[str, ...]:
    """Every ResourceManager's client RPC address (``host:port``), one or each HA id's, or ().

    What an RM delegation token is filed under: Hadoop's clients (skein's AM among them) look
    it up by the comma-joined addresses of every RM id on an HA cluster, by the one address
    otherwise. An id without an address or host name raises, naming the key.
    """
    site = read_site(conf_dir, "yarn-site.xml")
    ids = _rm_ids(site, conf_dir)
    suffixes = [""] if ids is None else [f".{rm_id}" for rm_id in ids]
    found = []
    for suffix in suffixes:
        address = site.get(f"{RM}.address{suffix}")
        host = site.get(f"{RM}.hostname{suffix}")
        if (not address or "${" in address) and host:
            address = f"{host}:8032"
        if not address or "${" in address:
            if not suffix:
                return ()
            raise ClusterError(
                f"{conf_dir}/yarn-site.xml: HA ResourceManager {suffix[1:]!r} has no RPC address; "
                f"set {RM}.address{suffix} (or {RM}.hostname{suffix})"
            )
        found.append(address)
    return tuple(found)


def namenode_addresses(conf_dir: str | None, nameservice: str | None = None) -> tuple[str, ...]:
    """Every NameNode web (WebHDFS) address of ``nameservice`` (default: ``fs.defaultFS``'s), or ().

    ``hdfs://ns1`` with ``dfs.nameservices`` naming ``ns1`` is an HA nameservice;
    ``hdfs://host:8020`` is one NameNode, whose web address is
    ``dfs.namenode.http(s)-address`` (or the host on the default web port).
    """
    core, hdfs = read_site(conf_dir, "core-site.xml"), read_site(conf_dir, "hdfs-site.xml")
    https = hdfs.get("dfs.http.policy", "HTTP_ONLY").upper() == "HTTPS_ONLY"
    kind = "https-address" if https else "http-address"
    if nameservice is None:
        default_fs = core.get("fs.defaultFS", "")
        if not default_fs.startswith("hdfs://"):
            return ()
        nameservice = default_fs[len("hdfs://") :].split("/", 1)[0]
    services = {s.strip() for s in hdfs.get("dfs.nameservices", "").split(",") if s.strip()}
    if nameservice in services:
        ids = [i.strip() for i in hdfs.get(f"dfs.ha.namenodes.{nameservice}", "").split(",") if i.strip()]
        if not ids:
            one = hdfs.get(f"dfs.namenode.{kind}.{nameservice}")
            if one:
                return (_url(one, https),)
            raise ClusterError(
                f"{conf_dir}/hdfs-site.xml: nameservice {nameservice!r} lists no NameNodes; "
                f"set dfs.ha.namenodes.{nameservice}"
            )
        found = []
        for nn in ids:
            address = hdfs.get(f"dfs.namenode.{kind}.{nameservice}.{nn}")
            if not address:
                raise ClusterError(
                    f"{conf_dir}/hdfs-site.xml: NameNode {nn!r} of {nameservice!r} has no web address; "
                    f"set dfs.namenode.{kind}.{nameservice}.{nn}"
                )
            found.append(_url(address, https))
        return tuple(found)
    address = hdfs.get(f"dfs.namenode.{kind}")
    if address and not address.startswith("0.0.0.0"):  # noqa: S104 - a bind-all address names no host to call
        return (_url(address, https),)
    host = nameservice.split(":", 1)[0]
    return (_url(f"{host}:{9871 if https else 9870}", https),)
