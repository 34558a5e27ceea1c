"""``TonyApplication``: one YARN application, as ``TonyClient.application(app_id)`` hands it out.

skein's line: a cluster-wide client (yarn/client.py: submit, find, gc) and a handle per
application for everything about that one: YARN's report and the final cost, the AM's
state, the stored history, its pages (tracking, job page, TensorBoard), its containers,
kill, and following it to its end. The handle holds no connection of its own: it asks
through its client's (the one HTTP client, the provider's WebHDFS).
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Concatenate, ParamSpec, Protocol, TypeVar

import httpx

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import ClusterError, SpecError, TonyError, cluster_errors
from airflow_provider_tony.runtime.messages import MAX_HISTORY_BYTES, Cost, JobHistory, StateDocument
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn import staging
from airflow_provider_tony.yarn.am_node import AmNode, read_am_node
from airflow_provider_tony.yarn.follower import AM_UNREACHABLE_TIMEOUT_S, AmUnreachable, AppReport, Follower, JobResult
from airflow_provider_tony.yarn.submit import kill_application

if TYPE_CHECKING:
    from airflow_provider_tony.yarn.client import TonyClient

log = logging.getLogger(__name__)
#: How long an ended application's cost is waited for: its AM container exits right after it unregistered.
FINAL_COST_WAIT_S = 30.0


class TonyApplication:
    """The application ``app_id`` on ``client``'s cluster."""

    def __init__(self, client: TonyClient, app_id: str) -> None:
        self.client = client
        self.app_id = app_id

    @property
    def _rm_url(self) -> str:
        return self.client.rm_url

    # ------------------------------------------------------------ YARN's view

    def report(self) -> AppReport:
        """YARN's report of the application from the RM's REST API (no skein driver)."""
        try:
            response = self.client.http.get(web.rm_app_url(self._rm_url, self.app_id))
        except Exception as exc:
            raise web.rm_error(self._rm_url, self.app_id, exc) from exc
        return web.read_report(response, self._rm_url, self.app_id)

    def final_cost(self, within: float = FINAL_COST_WAIT_S) -> Cost | None:
        """The ended application's resource-seconds once YARN's count is final (its last container gone).

        YARN reports FINISHED when the AM unregisters, before its container
        exits, so the first ended report undercounts; this asks again for up to
        ``within`` seconds and then returns the last count (``final`` False).
        None when YARN cannot be asked (an RM that forgot the application).
        """
        deadline = time.monotonic() + within
        cost: Cost | None = None
        while True:
            try:
                cost = self.report().cost
            except TonyError as exc:
                log.warning("no cost for %s: %s", self.app_id, exc)
                return cost
            if cost is None or cost.final or time.monotonic() >= deadline:
                return cost
            time.sleep(0.5)

    def containers(self) -> list[tuple[str, str]]:
        """``(container_id, host)`` of every container of the application whose logs a NodeManager keeps."""
        return self.client.logs.containers(self.app_id)

    # ------------------------------------------------------------ its pages

    def tracking_url(self) -> str:
        return web.tracking_url(self._rm_url, self.app_id)

    def job_page_url(self) -> str:
        """The job's own page (served by its AM through the RM's proxy while it runs)."""
        return web.job_page_url(self._rm_url, self.app_id)

    def tensorboard_url(self, am_state: StateDocument | None) -> str:
        """The job's TensorBoard through the ResourceManager's web proxy, or "" while it does not serve.

        The AM registers the ``tensorboard`` role's port as a page of skein's
        web UI before its state shows the port; the RM proxies the AM's UI, so
        a browser that reaches the RM reaches TensorBoard, where a container's
        host and port usually are not reachable. The link is built from
        ``app_id``, the application this handle is of, never from the
        document's own ``application_id`` (the AM's container writes that).
        """
        task = am_state.task(f"{C.TENSORBOARD_ROLE}:0") if am_state is not None else None
        if am_state is None or task is None or not (task.host and task.port and task.state == "RUNNING"):
            return ""
        return self.tensorboard_page_url()

    def tensorboard_page_url(self) -> str:
        """Where the application's TensorBoard page is (or will be) served through the RM's proxy."""
        app = urllib.parse.quote(self.app_id, safe="")
        return f"{self._rm_url}/proxy/{app}/{C.SKEIN_PAGES_PREFIX}/{C.TENSORBOARD_PAGE}/"

    # ------------------------------------------------------------ its AM and history

    def am_state(self) -> StateDocument | None:
        """The AM's state document over HTTP, or None while it is not (or no longer) served."""
        try:
            return self.am_fetch()
        except AmUnreachable:
            return None

    def am_fetch(self) -> StateDocument | None:
        """``am_state``, but raising ``AmUnreachable`` when the proxy cannot reach the AM (the follower's)."""
        try:
            response = self.client.http.get(web.state_url(self._rm_url, self.app_id))
        except httpx.HTTPError:  # the RM itself did not answer: its report will say so
            return None
        return web.fetch_state(response)

    def am_node(self) -> AmNode:
        """Where the AM runs and whether its node is gone (``yarn/am_node.py``)."""
        return read_am_node(self.client.http, self._rm_url, self.app_id)

    def ack_final(self) -> None:
        try:
            self.client.http.get(web.state_url(self._rm_url, self.app_id, "ack"))  # GET: the RM's proxy refuses POST
        except httpx.HTTPError:  # the AM stops on its own after a linger
            pass

    def job_history(self) -> JobHistory | None:
        """The job's state and metric history: from its AM while it runs, else from HDFS."""
        try:
            live = web.parse_history(self.client.http.get(web.state_url(self._rm_url, self.app_id, "history")))
        except Exception:  # noqa: BLE001 - not served (any more): look on HDFS
            live = None
        if live is not None and live.state is not None:
            return live
        return self.stored_history()

    def stored_history(self) -> JobHistory | None:
        """The final ``JobHistory`` the AM wrote to HDFS, or None when there is none."""
        if not self.client.webhdfs_url:
            return None
        path = f"{self.client.history_dir}/{self.app_id}.json"
        fs = self.client.webhdfs
        with cluster_errors(f"could not read {path} on HDFS"):
            if fs.status(path, strict=False) is None:
                return None
            with fs.read(path) as reader:
                raw = reader.read(MAX_HISTORY_BYTES + 1)
        try:
            return JobHistory.from_json(raw, max_bytes=MAX_HISTORY_BYTES)
        except SpecError as exc:  # written by the job's AM: a malformed or oversized one counts as none
            log.warning("ignoring %s: %s", path, exc)
            return None

    # ------------------------------------------------------------ its end

    def kill(self) -> None:
        """Kill through the RM's REST API (``PUT .../state``); YARN finishes it in the background.

        The application's staging folder goes too: a killed AM never removes
        it, and it may hold the keytab's copy (``kerberos.refresh_tokens``).
        """
        with cluster_errors(f"could not kill {self.app_id}"):
            kill_application(self.client.cluster, self.client.urls, self.app_id)
        self.remove_staging()

    def remove_staging(self) -> bool:
        """Delete ``~/.skein/<app_id>`` on HDFS (nothing needs it once the application is ended or killed).

        False when there is no WebHDFS or the delete failed (logged: ``tony gc`` removes what is left).
        """
        try:
            folder = staging.staging_folder(self.app_id)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        if not self.client.webhdfs_url:
            return False
        try:
            self.client.webhdfs.delete(folder, recursive=True)
        except Exception as exc:  # noqa: BLE001 - the kill itself succeeded
            log.warning("could not remove the staging folder ~/%s: %s", folder, exc)
            return False
        return True

    def wait(
        self,
        *,
        poll_interval: float = 2.0,
        startup_timeout: float = 600.0,
        am_stale_timeout: float = 60.0,
        am_unreachable_timeout: float = AM_UNREACHABLE_TIMEOUT_S,
        emit: Callable[[str], None] = print,
        on_state: Callable[[StateDocument], None] | None = None,
    ) -> JobResult:
        """Follow until the end, printing state changes and progress (each look: ``TonyClient.poll``)."""
        follower = Follower(
            self.app_id,
            startup_timeout=startup_timeout,
            am_stale_timeout=am_stale_timeout,
            am_unreachable_timeout=am_unreachable_timeout,
        )
        while True:
            result = self.client.poll(follower, emit=emit, on_state=on_state)
            if result is not None:
                return result
            time.sleep(poll_interval)


P = ParamSpec("P")
R = TypeVar("R")


class Handles(Protocol):
    """What hands out application handles (``TonyClient``)."""

    def application(self, app_id: str) -> TonyApplication: ...


def by_id(method: Callable[Concatenate[TonyApplication, P], R]) -> Callable[Concatenate[Handles, str, P], R]:
    """A handle's ``method`` as a method of the client taking the application's id first:
    ``client.report(app_id)`` is ``client.application(app_id).report()``."""

    def call(client: Handles, app_id: str, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return method(client.application(app_id), *args, **kwargs)

    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = f"``application(app_id).{method.__name__}(...)``: {method.__doc__ or ''}".strip()
    return call


__all__ = ["FINAL_COST_WAIT_S", "Handles", "TonyApplication", "by_id"]
