"""The "TonY job" view's route: Airflow's access check, the lookup, the refusals and the headers.

The metastore and the cluster are replaced through FastAPI's dependency overrides; the access check
is Airflow's own ``requires_access_dag`` with the auth manager replaced by one that records what it
was asked.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.api_fastapi.core_api import security
from fastapi.testclient import TestClient

from airflow_provider_tony.plugins import job_view_app as view
from airflow_provider_tony.runtime.messages import JobHistory, StateDocument
from tests.unit.support.paths import REPO

APP = "application_1700000000000_0042"
AM_PAGE = f"http://rm:8088/proxy/{APP}/pages/tony/"
BASE_URL = "http://airflow.example:8080"
PATH = "/jobs/train_dag/train/{MAP_INDEX}/manual__2026-01-01T00:00:00+00:00"


class Auth:
    """Airflow's auth manager as ``requires_access_dag`` uses it: says yes to the DAGs in ``allowed``."""

    def __init__(self, allowed: set[str]) -> None:
        self.allowed = allowed
        self.asked: list[tuple[str, Any, str | None]] = []

    def is_authorized_dag(self, *, method: str, access_entity: Any, details: Any, user: Any) -> bool:
        self.asked.append((method, access_entity, details.id))
        return details.id in self.allowed


class World:
    """What the route reads: the task instance's XComs and the cluster's history, and what it was asked."""

    def __init__(self) -> None:
        self.xcoms: dict[str, object] = {"application_id": f'"{APP}"', "yarn_conn_id": '"yarn_prod"'}
        self.history: JobHistory | None = JobHistory(
            state=StateDocument(application_id=APP, app_state="RUNNING"), name="nightly"
        )
        self.error: Exception | None = None
        self.asked: list[tuple[str, str]] = []
        self.where: list[tuple[str, str, str, str]] = []

    def xcom_reader(self, dag_id: str, task_id: str, map_index: str, run_id: str) -> view.XComReader:
        self.where.append((dag_id, task_id, map_index, run_id))
        return self.xcoms.get

    def history_reader(self) -> view.HistoryReader:
        def read(conn_id: str, app_id: str) -> tuple[JobHistory | None, str]:
            self.asked.append((conn_id, app_id))
            if self.error is not None:
                raise self.error
            return self.history, AM_PAGE

        return read


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def auth(monkeypatch: pytest.MonkeyPatch) -> Auth:
    found = Auth({"train_dag"})
    monkeypatch.setattr(security, "get_auth_manager", lambda: found)
    monkeypatch.setattr(security.DagModel, "get_team_name", staticmethod(lambda dag_id: None))
    monkeypatch.setattr(view, "_base_url", lambda: BASE_URL)
    return found


def _client(world: World, *, user: bool = True) -> Iterator[TestClient]:
    app = view.create_app()
    app.dependency_overrides[view.xcom_reader] = world.xcom_reader
    app.dependency_overrides[view.history_reader] = world.history_reader
    if user:
        app.dependency_overrides[security.get_user] = lambda: object()
    with TestClient(app) as client:
        yield client


@pytest.fixture
def client(world: World, auth: Auth) -> Iterator[TestClient]:
    yield from _client(world)


def _assert_headers(response: Any) -> None:
    policy = response.headers["content-security-policy"]
    assert policy.endswith(f"frame-ancestors {BASE_URL}") and "script-src" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["cache-control"] == "no-store"


def test_the_view_renders_the_tasks_job_through_its_connection(client: TestClient, world: World, auth: Auth) -> None:
    response = client.get(PATH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert APP in response.text and 'id="app-state"' in response.text and "RUNNING" in response.text
    assert f'href="{AM_PAGE}history"' in response.text
    assert world.asked == [("yarn_prod", APP)]
    assert world.where == [("train_dag", "train", "{MAP_INDEX}", "manual__2026-01-01T00:00:00+00:00")]
    assert auth.asked == [("GET", security.DagAccessEntity.TASK_INSTANCE, "train_dag")]
    _assert_headers(response)


def test_a_task_without_a_connection_xcom_is_read_through_the_default(client: TestClient, world: World) -> None:
    del world.xcoms["yarn_conn_id"]
    assert client.get(PATH).status_code == 200
    assert world.asked == [(view.DEFAULT_CONN_ID, APP)]


def test_a_user_without_access_to_the_dag_is_refused_before_anything_is_read(
    client: TestClient, world: World, auth: Auth
) -> None:
    auth.allowed = set()
    response = client.get(PATH)
    assert response.status_code == 403 and response.text == "403: Forbidden"
    assert world.asked == [] and world.where == []
    _assert_headers(response)


def test_no_user_no_view(world: World, auth: Auth) -> None:
    for client in _client(world, user=False):
        response = client.get(PATH)
        assert response.status_code == 401 and "Not authenticated" in response.text
    assert world.asked == [] and auth.asked == []


def test_a_task_that_recorded_no_application_is_a_404_saying_so(client: TestClient, world: World) -> None:
    del world.xcoms["application_id"]
    response = client.get(PATH.replace("{MAP_INDEX}", "3"))
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/plain")
    assert response.text.startswith("no TonY application recorded for train_dag / manual__")
    assert "/ train [3]:" in response.text and world.asked == []
    _assert_headers(response)


def test_an_xcom_that_names_no_application_id_reads_nothing(client: TestClient, world: World) -> None:
    world.xcoms["application_id"] = '"http://elsewhere/"'
    assert client.get(PATH).status_code == 404 and world.asked == []


def test_a_job_with_no_history_left_is_a_404_saying_where_it_looked(client: TestClient, world: World) -> None:
    world.history = None
    response = client.get(PATH)
    assert response.status_code == 404 and f"{APP} of train_dag" in response.text and "HDFS" in response.text


def test_a_cluster_that_does_not_answer_is_a_502_without_its_details(client: TestClient, world: World) -> None:
    world.error = ConnectionError("secret-host:8088 refused")
    response = client.get(PATH)
    assert response.status_code == 502 and "ConnectionError" in response.text
    assert "secret-host" not in response.text


def test_a_bad_map_index_is_a_400(client: TestClient, world: World) -> None:
    response = client.get(PATH.replace("{MAP_INDEX}", "x"))
    assert response.status_code == 400 and "map index" in response.text and world.asked == []


def test_the_entry_point_names_the_plugin_that_mounts_the_app_and_adds_the_tab() -> None:
    entry = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]["airflow.plugins"]
    module, _, name = entry["tony_job_view"].partition(":")
    plugin = getattr(importlib.import_module(module), name)
    assert plugin is view.TonyJobViewPlugin
    (mounted,) = plugin.fastapi_apps
    assert mounted["url_prefix"] == "/tony"
    (tab,) = plugin.external_views
    assert tab["destination"] == "task_instance" and tab["name"] == "TonY job"
    assert tab["href"] == "/tony/jobs/{DAG_ID}/{TASK_ID}/{MAP_INDEX}/{RUN_ID}"
