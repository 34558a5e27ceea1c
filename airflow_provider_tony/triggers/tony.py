"""The deferrable half of ``TonyOperator``: follows on the triggerer, frees the worker slot.

It carries only primitives and yields exactly one event, a ``TonyEvent`` as
primitives; the operator's ``execute_complete`` decides success or failure.
Following is natively asyncio: YARN's report (RM REST) and the AM's state
(through the RM's web proxy) are plain HTTP requests on the triggerer's event
loop, judged by the same pure ``Follower`` the synchronous path uses. No JVM runs,
not even to kill (the RM's REST API).
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.follower import (
    AM_UNREACHABLE_TIMEOUT_S,
    RM_OUTAGE_TIMEOUT_S,
    Follower,
    TonyEvent,
    follow_step_async,
)


def _cluster_of(conn_id: str) -> tuple[str, web.HttpSettings]:
    """The RM address and HTTP settings of a connection (reads the connection; starts no JVM)."""
    return YarnHook(conn_id).follow_target()


def _kill(conn_id: str, app_id: str) -> None:
    """Kill through the RM's REST API with a hook made for this alone, closed after."""
    hook = YarnHook(conn_id)
    try:
        hook.kill(app_id)
    finally:
        hook.close()


class _Clocks:
    """Wall-clock anchors (what a trigger serialises) onto this process's monotonic clock and back.

    The follower counts on the monotonic clock (a wall clock may jump); the
    anchors are wall-clock times, which mean the same on every host.
    """

    def __init__(self) -> None:
        self.offset = time.time() - time.monotonic()

    def monotonic(self, wall: float | None) -> float | None:
        return None if wall is None else wall - self.offset

    def wall(self, monotonic: float | None) -> float | None:
        return None if monotonic is None else monotonic + self.offset


class TonyTrigger(BaseTrigger):
    """Wait for YARN application ``app_id`` to end.

    :param app_id: the YARN application id.
    :param yarn_conn_id: the ``tony_yarn`` connection.
    :param poll_interval: seconds between polls.
    :param startup_timeout: seconds the application may stay ACCEPTED.
    :param am_stale_timeout: seconds without a new AM state while RUNNING before it counts as hung.
    :param rm_outage_timeout: seconds the ResourceManager may stay unreachable (restart, failover)
        before following gives up; the default keeps triggers serialized without it working.
    :param am_unreachable_timeout: seconds the RM's proxy may fail to reach the AM before the AM's
        node is looked at (a lost node ends the follow as ``am_node_lost``); serialised with the
        rest, its default reading triggers serialised before it existed.
    :param started_at: wall-clock time (epoch seconds) following began; the start-up deadline
        counts from it. Serialised, so a trigger re-created after a triggerer restart keeps the
        deadline instead of granting a fresh ``startup_timeout`` (None: now).
    :param last_heard_at: wall-clock time the AM was last heard from (its document moved, or the
        application started running), kept up to date while following and serialised with the
        rest: the stale-AM deadline counts from it. None: not heard from yet, and so after a
        triggerer restart, because Airflow stores a trigger's arguments once, when the task
        defers; the stale-AM clock then starts at the first look (a later kill, never an early one).
    """

    def __init__(
        self,
        *,
        app_id: str,
        yarn_conn_id: str,
        poll_interval: float,
        startup_timeout: float,
        am_stale_timeout: float,
        rm_outage_timeout: float = RM_OUTAGE_TIMEOUT_S,
        am_unreachable_timeout: float = AM_UNREACHABLE_TIMEOUT_S,
        started_at: float | None = None,
        last_heard_at: float | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's BaseTrigger.__init__ has no annotations
        self.app_id = app_id
        self.yarn_conn_id = yarn_conn_id
        self.poll_interval = float(poll_interval)
        self.startup_timeout = float(startup_timeout)
        self.am_stale_timeout = float(am_stale_timeout)
        self.rm_outage_timeout = float(rm_outage_timeout)
        self.am_unreachable_timeout = float(am_unreachable_timeout)
        # Wall clocks, not monotonic ones: they must mean the same on another triggerer host.
        self.started_at = time.time() if started_at is None else float(started_at)
        self.last_heard_at = None if last_heard_at is None else float(last_heard_at)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "airflow_provider_tony.triggers.tony.TonyTrigger",
            {
                "app_id": self.app_id,
                "yarn_conn_id": self.yarn_conn_id,
                "poll_interval": self.poll_interval,
                "startup_timeout": self.startup_timeout,
                "am_stale_timeout": self.am_stale_timeout,
                "rm_outage_timeout": self.rm_outage_timeout,
                "am_unreachable_timeout": self.am_unreachable_timeout,
                "started_at": self.started_at,
                "last_heard_at": self.last_heard_at,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            # Once per trigger: the connection lookup is the one blocking call.
            rm_url, settings = await asyncio.to_thread(_cluster_of, self.yarn_conn_id)
        except Exception as exc:  # noqa: BLE001 - reported, the operator decides
            yield TriggerEvent(TonyEvent.error(self.app_id, str(exc)).to_dict())
            return
        clocks = _Clocks()
        follower = Follower(
            self.app_id,
            startup_timeout=self.startup_timeout,
            am_stale_timeout=self.am_stale_timeout,
            rm_outage_timeout=self.rm_outage_timeout,
            am_unreachable_timeout=self.am_unreachable_timeout,
            queued_since=clocks.monotonic(self.started_at),
            heard_at=clocks.monotonic(self.last_heard_at),
        )
        async with web.async_http_client(settings) as http:
            transport = web.AsyncFollowTransport(http, rm_url, functools.partial(_kill, self.yarn_conn_id))
            while True:
                try:
                    step = await follow_step_async(follower, time.monotonic(), transport)
                except Exception as exc:  # noqa: BLE001 - reported, the operator decides
                    yield TriggerEvent(TonyEvent.error(self.app_id, str(exc)).to_dict())
                    return
                for line in step.lines:
                    self.log.info(line)
                self.last_heard_at = clocks.wall(follower.fresh_at)
                if step.result is not None:
                    yield TriggerEvent(TonyEvent.done(step.result).to_dict())
                    return
                await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        """Marked failed/cleared while deferred: the YARN application must not outlive the task.

        The triggerer may cancel ``on_kill`` itself shortly after calling it,
        so the kill runs to its end in a thread of its own, shielded, with a
        hook of its own, closed after.
        """
        await asyncio.shield(asyncio.to_thread(_kill, self.yarn_conn_id, self.app_id))
        self.log.info("killed %s", self.app_id)
