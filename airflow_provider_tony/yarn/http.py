"""Following a job over plain HTTP: the ResourceManager's REST report and the AM's state.

Everything a follower needs is an HTTP GET: YARN's report of the application
(``/ws/v1/cluster/apps/<id>``) and the AM's state document, served by the AM
and reached through the RM's web proxy (``runtime/web.py``). So following
needs no JVM, and neither do submitting and killing (yarn/submit.py, the RM's REST
API too).

Both a blocking client (the operator's ``execute``, the CLI) and a native
asyncio one (the trigger: no thread around blocking calls) are built by
``http_client`` / ``async_http_client`` from one ``HttpSettings``; the
parsing of what comes back is shared and pure. A Kerberized cluster plugs its
SPNEGO ``httpx.Auth`` (and CA bundle) into ``HttpSettings``: that is the only
place authentication enters.

httpx is what Airflow itself depends on, so it adds nothing to an install.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import json
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from airflow_provider_tony.runtime.errors import (
    AmUnreachable,
    ApplicationUnknown,
    ClusterError,
    ClusterUnreachable,
    DocumentVersionError,
    SpecError,
    StateUnavailable,
)
from airflow_provider_tony.runtime.messages import (
    MAX_DOCUMENT_BYTES,
    MAX_HISTORY_BYTES,
    Cost,
    JobHistory,
    StateDocument,
)
from airflow_provider_tony.runtime.web import page_url
from airflow_provider_tony.yarn.am_node import AmNode, read_am_node_async
from airflow_provider_tony.yarn.failover import AsyncFailoverTransport, Endpoints, FailoverTransport
from airflow_provider_tony.yarn.follower import AppReport

__all__ = [
    "AsyncFollowTransport",
    "HttpSettings",
    "StateUnavailable",
    "async_http_client",
    "http_client",
    "job_page_url",
    "parse_app_report",
    "parse_history",
    "parse_state",
    "read_report",
    "rm_app_url",
    "state_url",
    "tracking_url",
]


@dataclass(frozen=True)
class HttpSettings:
    """How the submitting side speaks HTTP to the cluster.

    :param auth: an ``httpx.Auth`` (SPNEGO on a Kerberized cluster), None on an open one.
    :param verify: TLS verification: True, False, or a CA bundle path.
    :param timeout: seconds for connect and each read.
    :param endpoints: the candidate addresses of each HA service (ResourceManagers, a nameservice's
        NameNodes): a call addressed to a service's first address goes to its active one
        (``yarn/failover.py``). Empty, or one address each: no failover.
    """

    auth: Any = None
    verify: bool | str = True
    timeout: float = 15.0
    endpoints: tuple[Endpoints, ...] = ()


#: Seconds an idle connection to the RM is kept for the next poll. httpx's default (5 s) equals
#: the default poll interval, so every poll opened (and TLS-handshook, and SPNEGO-negotiated) a new
#: connection; this is longer than usual poll intervals and shorter than the idle timeout of
#: Hadoop's web server (``hadoop.http.idle_timeout.ms``, 60 s by default), so the server does not
#: close a connection just as a poll reuses it.
KEEPALIVE_S = 30.0


class PortScopedCookieJar(http.cookiejar.CookieJar):
    """Cookies sent back only to the port that set them.

    Browsers' cookie rules ignore the port, so a NameNode and a ResourceManager on one host (HA
    masters often share one) would read each other's ``hadoop.auth`` cookie. Hadoop refuses a
    cookie of another server's authentication type ("Invalid AuthenticationToken type", 401),
    and a standby RM's redirect to the active one carries the jar's cookie with no chance to
    negotiate again. Each cookie is given the port of the response that set it, which the
    standard library's policy then checks (``return_ok_port``) before sending it.
    """

    def make_cookies(self, response: Any, request: Any) -> list[http.cookiejar.Cookie]:
        cookies = list(super().make_cookies(response, request))
        # As the policy reads a request's port: the URL's, else "80" (the standard library's default).
        _, sep, port = urllib.parse.urlsplit(request.get_full_url()).netloc.rpartition(":")
        for cookie in cookies:
            cookie.port, cookie.port_specified = (port if sep and port.isdigit() else "80"), True
        return cookies


def _options(settings: HttpSettings) -> dict[str, Any]:
    # follow_redirects: the RM's proxy may redirect (a standby RM, a trailing slash).
    return {
        "cookies": PortScopedCookieJar(),
        "auth": settings.auth,
        "timeout": settings.timeout,
        "follow_redirects": True,
        "headers": {"Accept": "application/json"},
    }


def _transport_options(settings: HttpSettings) -> dict[str, Any]:
    # A client given a transport ignores its own verify and limits: they belong to the transport.
    return {"verify": settings.verify, "limits": httpx.Limits(keepalive_expiry=KEEPALIVE_S)}


def http_client(settings: HttpSettings | None = None) -> httpx.Client:
    """The blocking client the operator and the CLI follow with."""
    settings = settings or HttpSettings()
    if not settings.endpoints:
        return httpx.Client(**_transport_options(settings), **_options(settings))
    transport = FailoverTransport(settings.endpoints, httpx.HTTPTransport(**_transport_options(settings)))
    return httpx.Client(transport=transport, **_options(settings))


def async_http_client(settings: HttpSettings | None = None) -> httpx.AsyncClient:
    """The asyncio client the trigger follows with, on the triggerer's event loop."""
    settings = settings or HttpSettings()
    if not settings.endpoints:
        return httpx.AsyncClient(**_transport_options(settings), **_options(settings))
    transport = AsyncFailoverTransport(settings.endpoints, httpx.AsyncHTTPTransport(**_transport_options(settings)))
    return httpx.AsyncClient(transport=transport, **_options(settings))


def rm_app_url(rm_url: str, app_id: str) -> str:
    return f"{rm_url.rstrip('/')}/ws/v1/cluster/apps/{urllib.parse.quote(app_id)}"


def proxy_url(rm_url: str, app_id: str) -> str:
    """The application's tracking URL through the RM's web proxy (known before it runs)."""
    return f"{rm_url.rstrip('/')}/proxy/{urllib.parse.quote(app_id)}/"


def job_page_url(rm_url: str, app_id: str) -> str:
    """The job's page, served by its AM through the RM's proxy."""
    return page_url(proxy_url(rm_url, app_id))


def state_url(rm_url: str, app_id: str, what: str = "state") -> str:
    return job_page_url(rm_url, app_id) + what


def parse_app_report(data: Any, app_id: str, tracking_url: str) -> AppReport:
    """An ``AppReport`` from the RM's ``/ws/v1/cluster/apps/<id>`` answer."""
    app = data.get("app") if isinstance(data, dict) else None
    if not isinstance(app, dict) or "state" not in app:
        raise ClusterError(f"the ResourceManager's report of {app_id} has no 'app.state': {str(data)[:200]!r}")
    return AppReport(
        app_id=app_id,
        state=str(app["state"]),
        final_status=str(app.get("finalStatus") or "UNDEFINED"),
        diagnostics=app.get("diagnostics") or "",
        tracking_url=tracking_url,
        progress=float(app.get("progress") or 0.0) / 100.0,
        tags=sorted(t for t in (app.get("applicationTags") or "").split(",") if t),
        name=app.get("name") or "",
        cost=parse_cost(app),
    )


#: YARN's resource names in ``resourceSecondsMap`` (memory is in MiB).
_VCORES, _MEMORY, _GPU = "vcores", "memory-mb", "yarn.io/gpu"


def _resource_seconds(raw: Any) -> dict[str, int]:
    """``resourceSecondsMap`` as JAXB's JSON writes it: ``{"entry": {...}}`` for one resource, ``{"entry": [...]}``
    for several, ``{}`` for none; anything else counts as nothing."""
    entries = raw.get("entry") if isinstance(raw, dict) else None
    out: dict[str, int] = {}
    for entry in [entries] if isinstance(entries, dict) else entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("key"), str):
            try:
                out[entry["key"]] = max(0, int(entry.get("value") or 0))
            except (TypeError, ValueError):
                continue
    return out


def parse_cost(app: dict[str, Any]) -> Cost:
    """The application's resource-seconds from the RM's report (the map, else the older scalar fields)."""
    used, preempted = (
        _resource_seconds(app.get("resourceSecondsMap")),
        _resource_seconds(app.get("preemptedResourceSecondsMap")),
    )
    return Cost.from_dict(
        {
            "vcore_seconds": used.get(_VCORES, app.get("vcoreSeconds")),
            "memory_mb_seconds": used.get(_MEMORY, app.get("memorySeconds")),
            "gpu_seconds": used.get(_GPU, 0),
            "preempted_vcore_seconds": preempted.get(_VCORES, app.get("preemptedVcoreSeconds")),
            "preempted_memory_mb_seconds": preempted.get(_MEMORY, app.get("preemptedMemorySeconds")),
            "preempted_gpu_seconds": preempted.get(_GPU, 0),
            # YARN reports FINISHED as soon as the AM unregisters, while its container still runs and
            # counts: the figures are final once no container runs (runningContainers -1 or 0).
            "final": str(app.get("state")) in ("FINISHED", "FAILED", "KILLED")
            and int(app.get("runningContainers") or 0) <= 0,
        },
        "cost",
    )


#: What the RM's proxy answers when it cannot reach (or get an answer from) the AM behind it.
PROXY_UNREACHABLE_STATUSES = frozenset({500, 502, 503, 504})


def fetch_state(response: httpx.Response) -> StateDocument | None:
    """``parse_state``, except that the proxy's failure to reach the AM raises ``AmUnreachable``.

    The follower tells an AM that cannot be reached (its node lost, its port
    closed) from one that answers with nothing new: only the first makes it
    look at the AM's node (``yarn/am_node.py``).
    """
    if response.status_code in PROXY_UNREACHABLE_STATUSES:
        raise AmUnreachable(f"HTTP {response.status_code} from the proxy")
    try:
        return parse_state(response)
    except StateUnavailable:
        return None


def parse_state(response: httpx.Response) -> StateDocument | None:
    """The state document from the AM's ``state`` route, None while it publishes none.

    Anything but a JSON object from the AM (the proxy's own error page, the
    RM's "application not running" page, ``{}`` before the first publication)
    means "no document now", which the follower's stale-AM rule then judges.
    A document in a newer layout than this provider reads raises
    ``DocumentVersionError``: following cannot go on right, and the message says why.
    """
    if response.status_code != 200 or "json" not in response.headers.get("content-type", ""):
        raise StateUnavailable(f"HTTP {response.status_code} from {response.url}")
    if len(response.content) > MAX_DOCUMENT_BYTES:  # the AM is not trusted to keep it small
        raise StateUnavailable(f"a {len(response.content)}-byte document from {response.url}: too large, ignored")
    try:
        data = json.loads(response.content)
    except ValueError as exc:
        raise StateUnavailable(f"not JSON from {response.url}: {exc}") from None
    if not isinstance(data, dict) or not data:
        return None
    try:
        return StateDocument.from_dict(data, "state")
    except DocumentVersionError:  # a newer AM: reading on would misread it; say so instead
        raise
    except SpecError as exc:  # mistyped or over the caps: no document (the stale-AM rule judges it)
        raise StateUnavailable(f"a malformed state document from {response.url}: {exc}") from None


def parse_history(response: httpx.Response) -> JobHistory | None:
    if response.status_code != 200 or "json" not in response.headers.get("content-type", ""):
        return None
    if len(response.content) > MAX_HISTORY_BYTES:
        return None
    try:
        data = json.loads(response.content)
        return JobHistory.from_dict(data, "history") if isinstance(data, dict) and data else None
    except (ValueError, SpecError):  # SpecError is a ValueError: malformed counts as none
        return None


def rm_error(rm_url: str, app_id: str, exc: Exception) -> ClusterError:
    """The one wording of "the RM could not be asked", for both clients.

    A 404 is an answer (the RM forgot the application); no connection, a
    timeout or a 5xx is ``ClusterUnreachable``, which a follower waits out
    (an RM restart or failover) rather than fail the task.
    """
    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code == 404:
        return ApplicationUnknown(
            f"the ResourceManager at {rm_url} does not know {app_id} (HTTP 404): "
            "it has forgotten the application, or the id is wrong"
        )
    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code < 500:
        return ClusterError(
            f"the ResourceManager at {rm_url} refused the report of {app_id} "
            f"(HTTP {exc.response.status_code}): {exc.response.text[:200]}"
        )
    return ClusterUnreachable(
        f"no report for {app_id}: ResourceManager at {rm_url} unreachable ({type(exc).__name__}: {exc})"
    )


def read_report(response: httpx.Response, rm_url: str, app_id: str) -> AppReport:
    """YARN's report from the RM's answer; a refusal or a page that is not JSON becomes ``rm_error``'s."""
    try:
        response.raise_for_status()
        data = response.json()
    except Exception as exc:
        raise rm_error(rm_url, app_id, exc) from exc
    return parse_app_report(data, app_id, tracking_url(rm_url, app_id))


# ---------------------------------------------------------------- asyncio (the trigger)


class AsyncFollowTransport:
    """The trigger's answers to a look's requests (``follower.AsyncTransport``), on the event loop.

    :param http: the asyncio client (``async_http_client``).
    :param rm_url: the ResourceManager's address.
    :param kill: kills an application, blocking (the RM's REST API, a blocking call): run in a thread of its
        own and shielded, so a trigger cancelled meanwhile does not leave the kill half done.
    """

    def __init__(self, http: httpx.AsyncClient, rm_url: str, kill: Callable[[str], None]) -> None:
        self.http, self.rm_url, self._kill = http, rm_url, kill

    async def report(self, app_id: str) -> AppReport:
        try:
            response = await self.http.get(rm_app_url(self.rm_url, app_id))
        except Exception as exc:
            raise rm_error(self.rm_url, app_id, exc) from exc
        return read_report(response, self.rm_url, app_id)

    async def am_fetch(self, app_id: str) -> StateDocument | None:
        try:
            response = await self.http.get(state_url(self.rm_url, app_id))
        except httpx.HTTPError:  # the RM itself did not answer: its report will say so
            return None
        return fetch_state(response)

    async def am_node(self, app_id: str) -> AmNode:
        return await read_am_node_async(self.http, self.rm_url, app_id)

    async def ack_final(self, app_id: str) -> None:
        with contextlib.suppress(httpx.HTTPError):  # the AM stops on its own after a linger
            await self.http.get(state_url(self.rm_url, app_id, "ack"))  # GET: the RM's proxy refuses POST

    async def kill(self, app_id: str) -> None:
        await asyncio.shield(asyncio.to_thread(self._kill, app_id))


def tracking_url(rm_url: str, app_id: str) -> str:
    """The ResourceManager's page of the application (it outlives the AM's own page)."""
    return f"{rm_url.rstrip('/')}/cluster/app/{app_id}"
