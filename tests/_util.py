"""Small helpers shared by the tests: waiting on conditions, reading the RM."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.25) -> T:
    """Poll ``check`` until it returns something truthy; fail the test naming ``what``.

    Tests wait on conditions, never on fixed sleeps: the interval is only how
    often we look, the timeout is a failure bound, not an expected duration.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last value: {last!r})")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def rm_apps(rm_url: str, states: str | None = None, tag: str | None = None) -> list[dict]:
    """Applications known to the ResourceManager (REST), optionally filtered."""
    query = []
    if states:
        query.append(f"states={states}")
    if tag:
        query.append(f"applicationTags={tag}")
    url = f"{rm_url}/ws/v1/cluster/apps" + ("?" + "&".join(query) if query else "")
    apps = (get_json(url).get("apps") or {}).get("app") or []
    return apps


def rm_app(rm_url: str, app_id: str) -> dict:
    return get_json(f"{rm_url}/ws/v1/cluster/apps/{app_id}")["app"]
