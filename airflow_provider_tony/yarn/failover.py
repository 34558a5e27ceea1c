"""Failover between the addresses of an HA pair, inside the one HTTP client of the submitting side.

Production clusters run two (or more) ResourceManagers and two NameNodes per
nameservice: one active, the others standby, and any of them may be down.
Hadoop's Java clients fail over for free (``ConfiguredRMFailoverProxyProvider``,
``ConfiguredFailoverProxyProvider``); this provider speaks REST, so it does the
same here, once, at the level of the httpx transport: every call the client
makes (submit, report, kill, the proxy's state document, WebHDFS) is addressed
to a service's first address and sent to whichever candidate is active, with
no caller knowing there is more than one.

The rules (:func:`verdict`, pure, shared by the blocking and the asyncio driver):

- a candidate that refused the connection, or a standby's answer (a NameNode's
  ``StandbyException``/``RetriableException``, a standby RM's 503), did nothing:
  the call goes to the next candidate, whatever its method;
- a timeout or a 5xx after the request was sent may have done something: a GET
  goes to the next candidate, but a call that creates or changes something is
  **not** sent again: :class:`OutcomeUnknown` tells its caller to look first
  (did the application get submitted? is the file there?);
- a standby RM's redirect to the active one ("This is standby RM", 307) is a standby's answer
  too: the call goes to the next candidate at its configured address. Followed instead, it
  would reach the active RM under the host name the standby chose, where a Kerberized
  client's credentials (bound to the origin they were made for) do not go;
- the candidate that answered is remembered as the active one, and named on the response
  (``ANSWERED_BY``), so SPNEGO asks for the ticket of the host that really asked for one;
- when every candidate failed, a GET's 5xx from one that is up (not a standby)
  is handed back as the answer: behind the RM's proxy it is the proxy's word
  on the AM (gone at the end of the job, not up yet), which the caller reads as
  it does with one RM; otherwise one message lists each address and its answer.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import httpx

from airflow_provider_tony.runtime.errors import ClusterUnreachable, OutcomeUnknown

__all__ = [
    "ANSWERED_BY",
    "AsyncFailoverTransport",
    "Endpoints",
    "FailoverTransport",
    "OutcomeUnknown",
    "Verdict",
    "split_addresses",
    "verdict",
]

#: Methods that read only: sent again to the next candidate after any failure.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: A NameNode's answers for "not me, ask another": the hdfs package treats the same two so.
STANDBY_EXCEPTIONS = frozenset({"StandbyException", "RetriableException"})
#: The response extension naming the host of the candidate that answered (the request httpx keeps
#: on a response is the one addressed to the service's first address).
ANSWERED_BY = "tony_answered_by"
#: Transport errors raised before the request reached the server: nothing happened there.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


def split_addresses(text: str) -> tuple[str, ...]:
    """``"http://rm1:8088, http://rm2:8088"`` (commas or semicolons) -> each address, no trailing slash."""
    parts = (p.strip().rstrip("/") for p in text.replace(";", ",").split(","))
    return tuple(p for p in parts if p)


@dataclass
class Endpoints:
    """One service's candidate base URLs (``http://rm1:8088``, ...) and which one answered last.

    :param name: what the service is, for messages ("ResourceManager", "NameNode of ns1").
    :param bases: every candidate, in the configured order; the first is the canonical one that
        URLs are built against.
    """

    name: str
    bases: tuple[str, ...]
    _active: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.bases = tuple(b.rstrip("/") for b in self.bases)
        if not self.bases:
            raise ValueError(f"{self.name}: no address given")

    @property
    def canonical(self) -> str:
        return self.bases[0]

    @property
    def active(self) -> str:
        with self._lock:
            return self.bases[self._active]

    def base_of(self, url: str) -> str | None:
        """The candidate ``url`` is addressed to, if any."""
        for base in self.bases:
            if url == base or url.startswith(base + "/"):
                return base
        return None

    def order(self, addressed: str) -> list[str]:
        """Where to send a call addressed to ``addressed``: the canonical address means "the
        service" (the active first, then the rest in order); another candidate was named on
        purpose (a standby's redirect), so it goes first."""
        with self._lock:
            first = self.bases[self._active] if addressed == self.canonical else addressed
        return [first, *(b for b in self.bases if b != first)]

    def settle(self, base: str) -> None:
        """``base`` answered as the active one: calls go there first from now on."""
        with self._lock:
            if base in self.bases:
                self._active = self.bases.index(base)


class Verdict(Enum):
    DONE = "done"  # an answer to hand back (success or a refusal that is the service's word)
    NEXT = "next"  # nothing happened there: try the next candidate
    UNKNOWN = "unknown"  # sent, no answer, and not safe to send again


def _standby_answer(status: int, content_type: str, body: bytes) -> str | None:
    """The name of a standby's refusal in an answer, or None."""
    if status == 503 and b"standby" in body[:2000].lower():  # a standby RM that knows no active one
        return "standby (HTTP 503)"
    if status == 307 and b"this is standby rm" in body[:2000].lower():  # RMWebAppFilter's redirect
        return "standby (redirect)"
    if status not in (403, 503) or "json" not in content_type:
        return None
    try:
        exc = json.loads(body).get("RemoteException", {}).get("exception")
    except (ValueError, AttributeError):
        return None
    return str(exc) if exc in STANDBY_EXCEPTIONS else None


def verdict(
    method: str,
    status: int | None = None,
    content_type: str = "",
    body: bytes = b"",
    error: BaseException | None = None,
) -> tuple[Verdict, str]:
    """What one candidate's answer (or ``error``) means for the call, and a word on it for the message."""
    if error is not None:
        word = f"{type(error).__name__}: {error}"
        if isinstance(error, NOT_SENT) or method in SAFE_METHODS:
            return Verdict.NEXT, word
        return Verdict.UNKNOWN, word
    assert status is not None
    standby = _standby_answer(status, content_type, body)
    if standby is not None:
        return Verdict.NEXT, standby
    if status >= 500 and method in SAFE_METHODS:
        return Verdict.NEXT, f"HTTP {status}"
    return Verdict.DONE, f"HTTP {status}"


def _retarget(request: httpx.Request, addressed: str, base: str) -> httpx.Request:
    if base == addressed:
        return request
    url = httpx.URL(base + str(request.url)[len(addressed) :])
    headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"host"]
    return httpx.Request(request.method, url, headers=headers, content=request.content, extensions=request.extensions)


def _needs_body(status: int) -> bool:
    return status in (307, 403, 503)


class _Failover:
    """What both drivers share: which service a request is for, and the end of the road."""

    def __init__(self, endpoints: Sequence[Endpoints]) -> None:
        self.endpoints = list(endpoints)

    def plan(self, request: httpx.Request) -> tuple[Endpoints, str, list[str]] | None:
        url = str(request.url)
        for group in self.endpoints:
            addressed = group.base_of(url)
            if addressed is not None and len(group.bases) > 1:
                return group, addressed, group.order(addressed)
        return None

    @staticmethod
    def after(group: Endpoints, response: httpx.Response) -> None:
        """Remember the active: the candidate that answered. (A standby's redirect answers too; the
        client follows it to the candidate it names, which then answers and is remembered.)"""
        group.settle(group.base_of(str(response.request.url)) or group.canonical)

    @staticmethod
    def kept(response: httpx.Response, word: str) -> bool:
        """An answer worth handing back if no other candidate does better: a 5xx (to a GET, as
        ``verdict`` sends nothing else on) from a server that is up and not a standby (``verdict``
        names a standby's answer, and words a plain 5xx as its status alone)."""
        return response.status_code >= 500 and word == f"HTTP {response.status_code}"

    def answered(self, group: Endpoints, attempt: httpx.Request, response: httpx.Response) -> httpx.Response:
        """``response`` as the call's answer: from the candidate it came from, remembered as the active."""
        response.request = attempt
        response.extensions[ANSWERED_BY] = attempt.url.host
        self.after(group, response)
        return response

    @staticmethod
    def exhausted(group: Endpoints, request: httpx.Request, tried: list[str]) -> ClusterUnreachable:
        return ClusterUnreachable(f"no {group.name} answered {request.method} {request.url.path}: " + "; ".join(tried))

    @staticmethod
    def unknown(group: Endpoints, request: httpx.Request, base: str, word: str) -> OutcomeUnknown:
        return OutcomeUnknown(
            f"{request.method} {request.url.path} at {group.name} {base} got no answer ({word}); "
            "it may have taken effect, so it is not sent again before its outcome is checked"
        )


class FailoverTransport(httpx.BaseTransport, _Failover):
    """The blocking driver: wraps httpx's own transport."""

    def __init__(self, endpoints: Sequence[Endpoints], inner: httpx.BaseTransport) -> None:
        _Failover.__init__(self, endpoints)
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        plan = self.plan(request)
        if plan is None:
            return self.inner.handle_request(request)
        group, addressed, order = plan
        tried: list[str] = []
        kept: tuple[httpx.Request, httpx.Response] | None = None
        for base in order:
            attempt = _retarget(request, addressed, base)
            try:
                response = self.inner.handle_request(attempt)
            except httpx.TransportError as exc:
                what, word = verdict(request.method, error=exc)
            else:
                body = response.read() if _needs_body(response.status_code) else b""
                what, word = verdict(
                    request.method, response.status_code, response.headers.get("content-type", ""), body
                )
                if what is Verdict.DONE:
                    if kept is not None:
                        kept[1].close()
                    return self.answered(group, attempt, response)
                if kept is None and self.kept(response, word):
                    kept = (attempt, response)
                else:
                    response.close()
            if what is Verdict.UNKNOWN:
                raise self.unknown(group, request, base, word)
            tried.append(f"{base}: {word}")
        if kept is not None:
            return self.answered(group, *kept)
        raise self.exhausted(group, request, tried)

    def close(self) -> None:
        self.inner.close()


class AsyncFailoverTransport(httpx.AsyncBaseTransport, _Failover):
    """The asyncio driver (the trigger's client): the same rules on the event loop."""

    def __init__(self, endpoints: Sequence[Endpoints], inner: httpx.AsyncBaseTransport) -> None:
        _Failover.__init__(self, endpoints)
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        plan = self.plan(request)
        if plan is None:
            return await self.inner.handle_async_request(request)
        group, addressed, order = plan
        tried: list[str] = []
        kept: tuple[httpx.Request, httpx.Response] | None = None
        for base in order:
            attempt = _retarget(request, addressed, base)
            try:
                response = await self.inner.handle_async_request(attempt)
            except httpx.TransportError as exc:
                what, word = verdict(request.method, error=exc)
            else:
                body = await response.aread() if _needs_body(response.status_code) else b""
                what, word = verdict(
                    request.method, response.status_code, response.headers.get("content-type", ""), body
                )
                if what is Verdict.DONE:
                    if kept is not None:
                        await kept[1].aclose()
                    return self.answered(group, attempt, response)
                if kept is None and self.kept(response, word):
                    kept = (attempt, response)
                else:
                    await response.aclose()
            if what is Verdict.UNKNOWN:
                raise self.unknown(group, request, base, word)
            tried.append(f"{base}: {word}")
        if kept is not None:
            return self.answered(group, *kept)
        raise self.exhausted(group, request, tried)

    async def aclose(self) -> None:
        await self.inner.aclose()
