"""The deferrable half of ``TonyOperator``: follows on the triggerer, frees the worker slot.

It carries only primitives and yields exactly one event, a ``TonyEvent`` as
primitives; the operator's ``execute_complete`` decides success or failure.
Following is natively asyncio: YARN's report (RM REST) and the AM's state
(through the RM's web proxy) are plain HTTP requests on the triggerer's event
loop, judged by the same pure ``Follower`` the synchronous path uses. No
skein driver (a JVM) runs to follow; one is started only to kill.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.follower import RM_OUTAGE_TIMEOUT_S, Follower, TonyEvent


def _cluster_of(conn_id: str) -> tuple[str, web.HttpSettings]:
    """The RM address and HTTP settings of a connection (reads the connection; starts no JVM)."""
    client = YarnHook(conn_id).get_conn()
    return client.rm_url, client.http_settings


def _kill(conn_id: str, app_id: str) -> None:
    """Kill through skein's driver, started for this alone and stopped after."""
    hook = YarnHook(conn_id)
    try:
        hook.kill(app_id)
    finally:
        hook.close()


class TonyTrigger(BaseTrigger):
    """Wait for YARN application ``app_id`` to end.

    :param app_id: the YARN application id.
    :param yarn_conn_id: the ``tony_yarn`` connection.
    :param poll_interval: seconds between polls.
    :param startup_timeout: seconds the application may stay ACCEPTED.
    :param am_stale_timeout: seconds without a new AM state while RUNNING before it counts as hung.
    :param rm_outage_timeout: seconds the ResourceManager may stay unreachable (restart, failover)
        before following gives up; the default keeps triggers serialized without it working.
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
    ) -> None:
        super().__init__()
        self.app_id = app_id
        self.yarn_conn_id = yarn_conn_id
        self.poll_interval = float(poll_interval)
        self.startup_timeout = float(startup_timeout)
        self.am_stale_timeout = float(am_stale_timeout)
        self.rm_outage_timeout = float(rm_outage_timeout)

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
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            # Once per trigger: the connection lookup is the one blocking call.
            rm_url, settings = await asyncio.to_thread(_cluster_of, self.yarn_conn_id)
        except Exception as exc:  # noqa: BLE001 - reported, the operator decides
            yield TriggerEvent(TonyEvent.error(self.app_id, str(exc)).to_dict())
            return
        follower = Follower(
            self.app_id,
            startup_timeout=self.startup_timeout,
            am_stale_timeout=self.am_stale_timeout,
            rm_outage_timeout=self.rm_outage_timeout,
        )
        async with web.async_http_client(settings) as http:
            while True:
                try:
                    step = await web.poll_async(http, rm_url, follower, now=time.monotonic(), emit=self.log.info)
                    if step.action.kills:
                        await asyncio.shield(asyncio.to_thread(_kill, self.yarn_conn_id, self.app_id))
                except Exception as exc:  # noqa: BLE001 - reported, the operator decides
                    yield TriggerEvent(TonyEvent.error(self.app_id, str(exc)).to_dict())
                    return
                if step.result is not None:
                    yield TriggerEvent(TonyEvent.done(step.result).to_dict())
                    return
                await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        """Marked failed/cleared while deferred: the YARN application must not outlive the task.

        The triggerer may cancel ``on_kill`` itself shortly after calling it,
        so the kill runs to its end in a thread of its own, shielded, with a
        hook (and a skein driver) of its own, closed after.
        """
        await asyncio.shield(asyncio.to_thread(_kill, self.yarn_conn_id, self.app_id))
        self.log.info("killed %s", self.app_id)
