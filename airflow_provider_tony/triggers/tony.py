"""The deferrable half of ``TonyOperator``: polls on the triggerer, frees the worker slot.

It carries only primitives, polls with the same ``TonyClient.poll`` and
``Follower`` the synchronous path uses, and yields exactly one event, a
``TonyEvent`` as primitives; the operator's ``execute_complete`` decides
success or failure.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_tony.hooks.yarn import YarnHook
from airflow_provider_tony.yarn.follower import Follower, TonyEvent

# One hook (so one skein driver JVM, with its memory and CPU) per
# connection per triggerer process, shared by every TonyTrigger polling
# through it; without this, 20 deferred jobs meant 20 JVMs. Touched only from
# the triggerer's event loop thread; the last user closes it.
_SHARED_HOOKS: dict[str, YarnHook] = {}
_USERS: Counter[str] = Counter()


def _acquire_hook(conn_id: str) -> YarnHook:
    hook = _SHARED_HOOKS.get(conn_id)
    if hook is None:
        hook = _SHARED_HOOKS[conn_id] = YarnHook(conn_id)
    _USERS[conn_id] += 1
    return hook


async def _release_hook(conn_id: str) -> None:
    _USERS[conn_id] -= 1
    if _USERS[conn_id] <= 0:
        del _USERS[conn_id]
        hook = _SHARED_HOOKS.pop(conn_id, None)
        if hook is not None:  # shielded: a second cancel must not leave its driver JVM running
            await asyncio.shield(asyncio.to_thread(hook.close))


class TonyTrigger(BaseTrigger):
    """Wait for YARN application ``app_id`` to end.

    :param app_id: the YARN application id.
    :param yarn_conn_id: the ``tony_yarn`` connection.
    :param poll_interval: seconds between polls.
    :param startup_timeout: seconds the application may stay ACCEPTED.
    :param am_stale_timeout: seconds without a new AM state while RUNNING before it counts as hung.
    """

    def __init__(self, *, app_id: str, yarn_conn_id: str, poll_interval: float, startup_timeout: float,
                 am_stale_timeout: float) -> None:
        super().__init__()
        self.app_id = app_id
        self.yarn_conn_id = yarn_conn_id
        self.poll_interval = float(poll_interval)
        self.startup_timeout = float(startup_timeout)
        self.am_stale_timeout = float(am_stale_timeout)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("airflow_provider_tony.triggers.tony.TonyTrigger", {
            "app_id": self.app_id, "yarn_conn_id": self.yarn_conn_id, "poll_interval": self.poll_interval,
            "startup_timeout": self.startup_timeout, "am_stale_timeout": self.am_stale_timeout})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = _acquire_hook(self.yarn_conn_id)
        follower = Follower(self.app_id, startup_timeout=self.startup_timeout,
                            am_stale_timeout=self.am_stale_timeout)
        try:
            while True:
                try:
                    result = await asyncio.to_thread(hook.get_conn().poll, follower, emit=self.log.info)
                except Exception as exc:  # noqa: BLE001 - reported, the operator decides
                    yield TriggerEvent(TonyEvent.error(self.app_id, str(exc)).to_dict())
                    return
                if result is not None:
                    yield TriggerEvent(TonyEvent.done(result).to_dict())
                    return
                await asyncio.sleep(self.poll_interval)
        finally:
            await _release_hook(self.yarn_conn_id)

    async def on_kill(self) -> None:
        """Marked failed/cleared while deferred: the YARN application must not outlive the task.

        The triggerer may cancel ``on_kill`` itself shortly after calling it,
        so the kill runs to its end in a thread of its own, shielded, with a
        hook of its own: closing a shared one here could stop the very driver
        the kill is still using.
        """
        def kill_and_close() -> None:
            hook = YarnHook(self.yarn_conn_id)
            try:
                hook.kill(self.app_id)
                self.log.info("killed %s", self.app_id)
            finally:
                hook.close()

        await asyncio.shield(asyncio.to_thread(kill_and_close))
