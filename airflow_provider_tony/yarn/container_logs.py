"""Where a job's containers ran and what they logged, from the NodeManagers' REST API.

``tony logs`` and the operator's failure report read container logs while the
NodeManagers keep them (no timeline server, no log aggregation needed): the
containers of an application are found on the nodes the ResourceManager lists,
and their files read over the same cluster-access client as every other call
(SPNEGO on a Kerberized cluster, the application's view ACL checked by the NodeManager).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.yarn.rest import ClusterHttp, ClusterUrls

log = logging.getLogger(__name__)


class ContainerLogs:
    """The NodeManagers of one cluster: ``rm_get`` reads the ResourceManager's REST API (``nodes``, attempts)."""

    def __init__(self, cluster: ClusterHttp, urls: ClusterUrls, rm_get: Callable[[str], Any]) -> None:
        self.cluster = cluster
        self.urls = urls
        self.rm_get = rm_get

    def containers(self, app_id: str) -> list[tuple[str, str]]:
        """``(container_id, host)`` of every container of ``app_id`` whose logs a NodeManager keeps.

        While the application runs, each NodeManager lists its containers
        (REST ``/ws/v1/node/apps/<app>``). Once it ended, neither the
        ResourceManager nor the NodeManagers list them (that needs the timeline
        server), but the RM still names each attempt's AM container, and YARN
        numbers an attempt's containers in sequence after it: ids are tried in
        order on every node until three in a row are found on none.
        """
        nodes = {
            n["nodeHTTPAddress"]: n["nodeHostName"] for n in (self.rm_get("nodes").get("nodes") or {}).get("node") or []
        }
        found: set[tuple[str, str]] = set()
        for address, host in nodes.items():
            app = self.nm_get(address, f"apps/{urllib.parse.quote(app_id)}") or {}
            found.update((cid, host) for cid in (app.get("app") or {}).get("containerids") or [])
        if found:
            return sorted(found)
        attempts = self.rm_get(f"apps/{urllib.parse.quote(app_id)}/appattempts").get("appAttempts") or {}
        for attempt in attempts.get("appAttempt") or []:
            prefix, _, first = str(attempt.get("containerId") or "").rpartition("_")
            if not prefix or not first.isdigit():
                continue
            misses, number = 0, int(first)
            while misses < 3:
                cid = f"{prefix}_{number:0{len(first)}d}"
                # A NodeManager answers for any id; one that ran the container lists its log files.
                hosts = [
                    host
                    for address, host in nodes.items()
                    if ((self.nm_get(address, f"containers/{cid}/logs") or {}).get("containerLogsInfo") or {}).get(
                        "containerLogInfo"
                    )
                ]
                found.update((cid, host) for host in hosts)
                misses = 0 if hosts else misses + 1
                number += 1
        return sorted(found)

    def nm_get(self, address: str, path: str) -> Any:
        """A NodeManager REST document, or None when it has nothing there (or is unreachable)."""
        try:
            return self.cluster.get_json(self.urls.nm(address, path), what=f"NodeManager at {address}")
        except ClusterError as exc:
            log.debug("%s", exc)
            return None

    def read(self, container_id: str, host: str) -> dict[str, str]:
        """A container's log files as its NodeManager serves them (REST), by file name.

        Works while the NodeManager keeps them (``yarn.nodemanager.log.retain-seconds``
        when log aggregation is off); an empty dict when it no longer does. On a
        Kerberized cluster the calls carry SPNEGO (the NodeManager checks the
        application's view ACL), like every call of ``self.cluster``.
        """
        nodes = (self.rm_get("nodes").get("nodes") or {}).get("node") or []
        address = next((n["nodeHTTPAddress"] for n in nodes if n.get("nodeHostName") == host), None)
        if address is None:
            return {}
        listing = self.nm_get(address, f"containers/{container_id}/logs") or {}
        infos = (listing.get("containerLogsInfo") or {}).get("containerLogInfo") or []
        if isinstance(infos, dict):
            infos = [infos]
        out = {}
        # skein writes each service's stdout+stderr to <service>.log.
        for name in [i["fileName"] for i in infos if i["fileName"].endswith((".log", ".err", ".out"))]:
            url = self.urls.nm(address, f"containerlogs/{container_id}/{urllib.parse.quote(name)}")
            try:
                out[name] = self.cluster.get_text(url, what=f"NodeManager at {address}")
            except ClusterError as exc:  # a missing file must not hide the others
                log.warning("could not read %s of %s: %s", name, container_id, str(exc)[:300])
        return out
