"""The pure parts of the "TonY job" view of a task instance in the Airflow UI.

The view is the job page (``runtime/page.py``) rendered by the api-server for one
task instance, inside an iframe of the Airflow UI. Everything here is a function of
its arguments, so the rules (who may frame it, what an XCom may name, what the
placeholder the UI left in the address means) are tested without a server.
"""

from __future__ import annotations

import json
import re
import urllib.parse

from airflow_provider_tony.runtime.messages import JobHistory
from airflow_provider_tony.runtime.page import render_page
from airflow_provider_tony.runtime.web import PAGE_POLICY
from airflow_provider_tony.yarn.staging import APP_ID

__all__ = [
    "MOUNT",
    "ROUTE",
    "VIEW_HREF",
    "application_id_of",
    "conn_id_of",
    "content_security_policy",
    "frame_origin",
    "map_index_of",
    "render_view",
    "response_headers",
]

#: Where the app is mounted on the api-server (not one of Airflow's reserved prefixes).
MOUNT = "/tony"
#: The run id last, as a path: a run id is the one part that may hold a ``/``.
ROUTE = "/jobs/{dag_id}/{task_id}/{map_index}/{run_id:path}"
#: The UI replaces these placeholders (Airflow 3.1+ ``external_views``, ``destination: task_instance``).
VIEW_HREF = f"{MOUNT}/jobs/{{DAG_ID}}/{{TASK_ID}}/{{MAP_INDEX}}/{{RUN_ID}}"

#: Airflow's own rule for connection ids (letters, digits, ``_.-``), bounded.
_CONN_ID = re.compile(r"[A-Za-z0-9_.-]{1,250}")
#: An XCom longer than this is not one the operator wrote (an id, a connection name).
MAX_XCOM_CHARS = 512


def frame_origin(base_url: str | None) -> str:
    """The ``frame-ancestors`` source allowed to frame the view: ``[api] base_url``'s origin.

    Without a base URL (or with one that names no scheme and host) the UI is served
    from the api-server itself, so ``'self'``. The origin is rebuilt from its parsed
    parts, so nothing else of the setting (a path, a ``;``) reaches the header.
    """
    parts = urllib.parse.urlsplit((base_url or "").strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "'self'"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    try:
        port = parts.port
    except ValueError:
        return "'self'"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def content_security_policy(base_url: str | None) -> str:
    """The AM page's policy, but framing allowed for the Airflow UI's origin alone."""
    return f"{PAGE_POLICY}; frame-ancestors {frame_origin(base_url)}"


def response_headers(base_url: str | None) -> dict[str, str]:
    """Every answer of the view, the refusals too: never cached, never sniffed, framed only by Airflow."""
    return {
        "Content-Security-Policy": content_security_policy(base_url),
        "X-Content-Type-Options": "nosniff",
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
    }


def map_index_of(text: str) -> int:
    """The map index in the view's address: a number, or -1 for an unmapped task.

    The UI fills ``{MAP_INDEX}`` only on a mapped task instance's page; on any other it
    leaves the placeholder as it is, which means the unmapped instance (-1).
    """
    if text in ("{MAP_INDEX}", "%7BMAP_INDEX%7D"):
        return -1
    if re.fullmatch(r"-1|[0-9]{1,9}", text):
        return int(text)
    raise ValueError(f"map index {text[:40]!r} is neither a number nor -1")


def _xcom_text(raw: object) -> str | None:
    """An XCom's value as the text it holds: the metastore keeps it JSON-encoded (or already decoded)."""
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", "replace")
    if not isinstance(raw, str) or len(raw) > MAX_XCOM_CHARS:
        return None
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw
    return decoded if isinstance(decoded, str) else None


def application_id_of(raw: object) -> str | None:
    """The YARN application id an ``application_id`` XCom names (what ``yarn/staging.py`` accepts as one),
    or None for anything else."""
    text = _xcom_text(raw)
    return text if text is not None and APP_ID.fullmatch(text) else None


def conn_id_of(raw: object, default: str) -> str:
    """The ``tony_yarn`` connection a ``yarn_conn_id`` XCom names; ``default`` when there is none
    (a task run by an earlier release of the operator) or it is no connection id."""
    text = _xcom_text(raw)
    return text if text is not None and _CONN_ID.fullmatch(text) else default


def render_view(history: JobHistory, *, now_wall: float, am_page: str) -> str:
    """The job page for the view: reloading itself while the job runs, its JSON links at the AM's page."""
    return render_page(history, now_wall=now_wall, refresh_s=5, links_base=am_page)
