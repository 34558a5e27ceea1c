"""The "TonY job" view's pure rules: who may frame it, what an XCom may name, the UI's placeholders."""

from __future__ import annotations

import pytest

from airflow_provider_tony.plugins.job_view import (
    MAX_XCOM_CHARS,
    VIEW_HREF,
    application_id_of,
    conn_id_of,
    content_security_policy,
    frame_origin,
    map_index_of,
    render_view,
    response_headers,
)
from airflow_provider_tony.runtime.messages import JobHistory, StateDocument, TaskSummary

APP = "application_1700000000000_0042"
AM_PAGE = f"http://rm:8088/proxy/{APP}/pages/tony/"


@pytest.mark.parametrize(
    "base_url, origin",
    [
        ("http://airflow.example:8080", "http://airflow.example:8080"),
        ("https://airflow.example/some/prefix/", "https://airflow.example"),
        ("https://AIRFLOW.example:443", "https://airflow.example:443"),
        ("http://[::1]:8080/", "http://[::1]:8080"),
        ("", "'self'"),
        (None, "'self'"),
        ("airflow.example:8080", "'self'"),  # no scheme: not an origin
        ("javascript:alert(1)", "'self'"),
        ("http://a.example:99999", "'self'"),  # a port out of range
    ],
)
def test_the_frame_origin_is_the_base_urls_origin_or_self(base_url: str | None, origin: str) -> None:
    assert frame_origin(base_url) == origin


def test_nothing_but_the_origin_of_the_setting_reaches_the_policy() -> None:
    policy = content_security_policy("http://a.example:8080/x; script-src *")
    assert policy.endswith("; frame-ancestors http://a.example:8080")
    assert "script-src" not in policy and policy.count("frame-ancestors") == 1
    assert "default-src 'none'" in policy and "form-action 'none'" in policy


def test_every_answer_is_uncached_unsniffed_and_framed_by_airflow_only() -> None:
    headers = response_headers("http://127.0.0.1:23080")
    assert headers["Content-Security-Policy"].endswith("frame-ancestors http://127.0.0.1:23080")
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Cache-Control"] == "no-store"


def test_the_href_carries_the_uis_placeholders_with_the_run_id_last() -> None:
    assert VIEW_HREF == "/tony/jobs/{DAG_ID}/{TASK_ID}/{MAP_INDEX}/{RUN_ID}"


@pytest.mark.parametrize(
    "text, index", [("-1", -1), ("0", 0), ("17", 17), ("{MAP_INDEX}", -1), ("%7BMAP_INDEX%7D", -1)]
)
def test_the_map_index_is_a_number_or_the_placeholder_of_an_unmapped_task(text: str, index: int) -> None:
    assert map_index_of(text) == index


@pytest.mark.parametrize("text", ["-2", "1.5", "x", "", "1" * 10, "{DAG_ID}"])
def test_any_other_map_index_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="map index"):
        map_index_of(text)


@pytest.mark.parametrize(
    "raw, app_id",
    [
        (f'"{APP}"', APP),  # JSON-encoded, as the metastore keeps it
        (APP, APP),  # already decoded
        (f'"{APP}"'.encode(), APP),
        ('"application_1_2/../x"', None),
        (f'"{APP} "', None),
        ('{"application_id": "x"}', None),
        (42, None),
        (None, None),
        ('"' + "application_1_" + "2" * MAX_XCOM_CHARS + '"', None),  # past the cap, whatever it holds
    ],
)
def test_only_an_application_id_is_taken_from_the_xcom(raw: object, app_id: str | None) -> None:
    assert application_id_of(raw) == app_id


@pytest.mark.parametrize(
    "raw, conn_id",
    [('"yarn_prod"', "yarn_prod"), (None, "default"), ('"a b"', "default"), ('"../x"', "default"), ("[]", "default")],
)
def test_the_connection_is_the_tasks_or_the_default(raw: object, conn_id: str) -> None:
    assert conn_id_of(raw, "default") == conn_id


def _history(app_state: str) -> JobHistory:
    task = TaskSummary(state="RUNNING", role="tensorboard", host="node2", port=6006)
    state = StateDocument(application_id=APP, app_state=app_state, tasks={"tensorboard:0": task})
    return JobHistory(state=state, name="nightly")


def test_the_view_links_to_the_ams_own_routes_and_reloads_while_running() -> None:
    page = render_view(_history("RUNNING"), now_wall=0.0, am_page=AM_PAGE)
    assert f'href="{AM_PAGE}history"' in page and f'href="{AM_PAGE}state"' in page
    assert f'href="http://rm:8088/proxy/{APP}/pages/tensorboard/"' in page
    assert '<meta http-equiv="refresh" content="5">' in page and APP in page
    assert 'http-equiv="refresh"' not in render_view(_history("SUCCEEDED"), now_wall=0.0, am_page=AM_PAGE)
