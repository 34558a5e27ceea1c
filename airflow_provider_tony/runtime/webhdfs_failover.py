"""WebHDFS failover between the NameNodes of an HA nameservice, inside the containers.

The AM and the executors write checkpoints, stage inputs, publish models and
write history and TensorBoard events over WebHDFS with the ``hdfs`` package.
On an HA cluster ``TONY_WEBHDFS_URL`` names every NameNode (comma-separated);
one is active, the other answers 403 ``StandbyException``, and during a
failover both may refuse or answer standby for a few seconds. The ``hdfs``
package's own failover tries each address once and gives up, and it resends
any call: neither is what a job that must outlive a NameNode failover needs.
This client (:class:`WebHdfsFailover`, mixed into the ``hdfs`` clients the
runtime uses) sends every NameNode call to the active one:

- a refused connection or a standby's answer (``StandbyException``,
  ``RetriableException``) did nothing: the call goes to the next NameNode, and
  when every one declined it waits (doubling pauses) up to ``patience``
  seconds for a NameNode to become active, then fails listing each address
  and its last answer;
- a call that was sent but got no answer (a timeout, a dropped connection)
  may have happened. A read goes on to the next NameNode; RENAME and MKDIRS
  are first checked on the new active one (is the source gone and the
  destination there? is the folder there?) and only resent when they did not
  happen. The NameNode step of CREATE and APPEND only chooses a DataNode (the
  file is written by the DataNode's step, which is not resent here), and
  DELETE of a missing path answers ``false``: both are safe to resend;
- calls to a DataNode (the second step of a write or a read) are not touched;
- the NameNode that answered is remembered: later calls go there first.

Pure standard library plus ``requests`` (what the ``hdfs`` package uses): the
runtime zip holds only ``runtime/``, so this cannot share code with the
submitting side's httpx transport (``yarn/failover.py``); the rules are the same.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import unquote

import requests
from hdfs import InsecureClient

from airflow_provider_tony.runtime.errors import TonyError

log = logging.getLogger("tony.hdfs")

__all__ = [
    "FailoverInsecureClient",
    "NameNodes",
    "NoActiveNameNode",
    "WebHdfsFailover",
    "is_standby",
    "not_sent",
    "split_urls",
]

#: A NameNode's answers for "not me, ask another" (the hdfs package and Hadoop's client agree).
STANDBY_EXCEPTIONS = frozenset({"StandbyException", "RetriableException"})
#: Operations checked on the new active NameNode before being resent after an unknown outcome.
CHECKED_OPS = frozenset({"RENAME", "MKDIRS"})
WEBHDFS_PREFIX = "/webhdfs/v1"


def split_urls(text: str) -> tuple[str, ...]:
    """``"http://nn1:9870,http://nn2:9870"`` (commas or semicolons) -> each address, no trailing slash."""
    parts = (p.strip().rstrip("/") for p in text.replace(";", ",").split(","))
    return tuple(p for p in parts if p)


def is_standby(response: Any) -> bool:
    """Whether a NameNode's answer means it is not the active one (or not ready to serve yet)."""
    if response.status_code < 400:
        return False
    try:
        exception = response.json()["RemoteException"]["exception"]
    except (ValueError, KeyError, TypeError):
        return False
    return exception in STANDBY_EXCEPTIONS


def not_sent(exc: BaseException) -> bool:
    """Whether a transport error happened before the request reached the NameNode (refused, no route)."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if not isinstance(exc, requests.ConnectionError):
        return False
    reason = getattr(exc.args[0], "reason", exc.args[0]) if exc.args else None
    name = type(reason).__name__
    return name in ("NewConnectionError", "ConnectTimeoutError") or "refused" in str(reason).lower()


class NoActiveNameNode(requests.ConnectionError, TonyError):
    """Every NameNode refused or answered standby for ``patience`` seconds; the message lists each one."""


def _answer(what: object) -> str:
    if isinstance(what, BaseException):
        return f"{type(what).__name__}: {str(what)[:200]}"
    try:
        remote = what.json()["RemoteException"]  # type: ignore[attr-defined]
        return f"HTTP {what.status_code} {remote.get('exception')}"  # type: ignore[attr-defined]
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"HTTP {getattr(what, 'status_code', '?')}"


class NameNodes:
    """The candidate NameNodes of one nameservice and the one that answered last (thread-safe).

    :param patience: how long a call waits, in all, for some NameNode to be active.
    :param sleep: how to wait between rounds (tests pass a fake clock's).
    """

    def __init__(
        self,
        urls: Sequence[str],
        patience: float = 120.0,
        pause: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.urls = tuple(u.rstrip("/") for u in urls)
        if not self.urls:
            raise ValueError("no NameNode address given")
        self.patience, self.pause = patience, pause
        self._sleep, self._clock = sleep, clock
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> str:
        with self._lock:
            return self.urls[self._active]

    def base_of(self, url: str) -> str | None:
        for base in self.urls:
            if url == base or url.startswith(base + "/"):
                return base
        return None

    def order(self) -> list[str]:
        with self._lock:
            first = self.urls[self._active]
        return [first, *(u for u in self.urls if u != first)]

    def settle(self, base: str) -> None:
        with self._lock:
            self._active = self.urls.index(base)

    def send(
        self,
        send_one: Callable[[str], Any],
        op: str,
        already_done: Callable[[], Any | None] | None = None,
    ) -> Any:
        """``send_one(base)`` on the active NameNode, failing over as the module says.

        ``already_done`` (for :data:`CHECKED_OPS`) is asked after a sent call got no answer: a
        response standing for success when the call did happen, else None (it is resent).
        """
        deadline = self._clock() + self.patience
        delay = self.pause
        while True:
            answers: list[tuple[str, object]] = []
            for base in self.order():
                try:
                    response = send_one(base)
                except requests.RequestException as exc:
                    answers.append((base, exc))
                    if not_sent(exc):
                        continue
                    if op in CHECKED_OPS and already_done is not None:
                        done = self._checked(already_done)
                        if done is not None:
                            log.warning("WebHDFS %s at %s got no answer (%s) but had happened", op, base, exc)
                            return done
                    log.warning("WebHDFS %s at %s got no answer (%s); trying the next NameNode", op, base, exc)
                    continue
                if is_standby(response):
                    answers.append((base, response))
                    continue
                if base != self.active:
                    log.warning("WebHDFS: NameNode %s is the active one now", base)
                    self.settle(base)
                return response
            if self._clock() >= deadline:
                listed = "; ".join(f"{base}: {_answer(what)}" for base, what in answers)
                raise NoActiveNameNode(f"no active NameNode answered WebHDFS {op} for {self.patience:.0f}s ({listed})")
            self._sleep(delay)
            delay = min(delay * 2, 5.0)

    def _checked(self, already_done: Callable[[], Any | None]) -> Any | None:
        try:
            return already_done()
        except requests.RequestException:
            return None


def _success(body: dict[str, object]) -> requests.Response:
    """A 200 answer standing for a checked call that had happened."""
    response = requests.Response()
    response.status_code = 200
    response._content = json.dumps(body).encode()
    response.headers["Content-Type"] = "application/json"
    return response


class WebHdfsFailover:
    """Mixed in before an ``hdfs`` client class: its NameNode calls fail over (see the module).

    Constructed with every NameNode (``url`` comma- or semicolon-separated); the ``hdfs`` client
    underneath is given only the first (its own one-pass failover stays out of the way). With one
    address it is the plain client.
    """

    _namenodes: NameNodes | None

    def __init__(self, url: str, *args: Any, patience: float = 120.0, **kwargs: Any) -> None:
        urls = split_urls(url)
        if not urls:
            raise ValueError(f"no WebHDFS address in {url!r}")
        super().__init__(urls[0], *args, **kwargs)  # type: ignore[call-arg]
        self._namenodes = NameNodes(urls, patience=patience) if len(urls) > 1 else None

    @property
    def namenodes(self) -> tuple[str, ...]:
        return self._namenodes.urls if self._namenodes is not None else (self.url,)  # type: ignore[attr-defined]

    def _request(self, method: str, url: str, **kwargs: Any) -> Any:
        plain = super()._request  # type: ignore[misc]
        namenodes = self._namenodes
        base = namenodes.base_of(url) if namenodes is not None else None
        if namenodes is None or base is None:  # one NameNode, or a DataNode's step
            return plain(method, url, **kwargs)
        rest = url[len(base) :]
        op = str((kwargs.get("params") or {}).get("op", "")).upper()
        check = self._check_for(op, rest, kwargs.get("params") or {})
        return namenodes.send(lambda b: plain(method, b + rest, **kwargs), op, check)

    def _check_for(self, op: str, rest: str, params: dict[str, Any]) -> Callable[[], Any | None] | None:
        if op not in CHECKED_OPS or not rest.startswith(WEBHDFS_PREFIX):
            return None
        path = unquote(rest[len(WEBHDFS_PREFIX) :].split("?", 1)[0]) or "/"
        status = self.status  # type: ignore[attr-defined]
        if op == "MKDIRS":

            def mkdirs_done() -> Any | None:
                found = status(path, strict=False)
                return _success({"boolean": True}) if found and found.get("type") == "DIRECTORY" else None

            return mkdirs_done
        destination = str(params.get("destination") or "")

        def rename_done() -> Any | None:
            if not destination or status(path, strict=False) is not None:
                return None
            return _success({"boolean": True}) if status(destination, strict=False) is not None else None

        return rename_done


class FailoverInsecureClient(WebHdfsFailover, InsecureClient):  # type: ignore[misc] # hdfs ships no type hints
    """``hdfs.InsecureClient`` (``user.name``) whose NameNode calls fail over between the addresses in ``url``."""
