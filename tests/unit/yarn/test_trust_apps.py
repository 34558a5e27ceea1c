"""Re-attaching only to our own applications (issue 27, point 2).

Application tags are chosen by whoever submits and readable by every
cluster user: another user can submit an application carrying a task run's
tags. ``find_by_tags`` (behind the operator's re-attach and the re-use of a
succeeded run) must accept only applications of the client's YARN user and of
this provider's application type.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.client import TonyClient

TAGS = ["dag_id:d", "task_id:t", "run_id:r"]


def _app(app_id: str, user: str, app_type: str = "skein", state: str = "FINISHED", started: int = 1) -> dict:
    return {
        "id": app_id,
        "user": user,
        "applicationType": app_type,
        "state": state,
        "finalStatus": "SUCCEEDED",
        "applicationTags": ",".join(TAGS + ["tony-try:1"]),
        "startedTime": started,
        "name": "job",
    }


class FakeRm:
    """The RM's ``apps`` answer as an RM that ignores the filters would give it (the check must not rely on them)."""

    def __init__(self, apps: list[dict]) -> None:
        self.apps = apps
        self.paths: list[str] = []

    def __call__(self, path: str) -> Any:
        self.paths.append(path)
        return {"apps": {"app": self.apps}}


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> TonyClient:
    monkeypatch.setenv("HADOOP_USER_NAME", "alice")
    return TonyClient(rm_url="http://rm:8088")


def test_another_users_succeeded_application_with_our_tags_is_not_ours(client: TonyClient, monkeypatch) -> None:
    rm = FakeRm([_app("application_1_0009", "mallory", started=9), _app("application_1_0001", "alice")])
    monkeypatch.setattr(client, "_rm_get", rm)
    found = client.find_by_tags(TAGS, active_only=False)
    assert [a.app_id for a in found] == ["application_1_0001"]
    assert "user=alice" in rm.paths[0] and "applicationTypes=skein" in rm.paths[0]


def test_an_application_of_another_type_is_not_ours(client: TonyClient, monkeypatch) -> None:
    monkeypatch.setattr(client, "_rm_get", FakeRm([_app("application_1_0002", "alice", app_type="MAPREDUCE")]))
    assert client.find_by_tags(TAGS, active_only=False) == []


def test_the_yarn_user_is_the_principals_short_name_with_kerberos() -> None:
    client = TonyClient(rm_url="http://rm:8088", principal="airflow/worker1.example.com@EXAMPLE.COM", keytab="/k")
    assert client.yarn_user == "airflow"


def test_the_operator_does_not_reuse_a_squatters_succeeded_run(client: TonyClient, monkeypatch) -> None:
    """The operator's ``_existing`` through a real hook and client: the squatter's run is not re-used."""
    from airflow_provider_tony.operators.tony import TonyOperator

    monkeypatch.setattr(client, "_rm_get", FakeRm([_app("application_1_0009", "mallory")]))
    op = TonyOperator(task_id="t", job={"roles": {"worker": {"command": ["true"]}}})
    monkeypatch.setattr(op.hook, "get_conn", lambda: client)
    monkeypatch.setattr(op, "identity_tags", lambda context: TAGS)
    assert op._existing({}) is None


def test_find_by_tags_reports_progress_as_a_fraction_like_report(client: TonyClient, monkeypatch) -> None:
    """The RM says 0-100; every AppReport says 0..1 (find_by_tags once passed the percentage on)."""
    app = {**_app("application_1_0003", "alice"), "progress": 40.0, "diagnostics": "d"}
    monkeypatch.setattr(client, "_rm_get", FakeRm([app]))
    (found,) = client.find_by_tags(TAGS, active_only=False)
    assert found.progress == pytest.approx(0.4)
    assert found == web.parse_app_report({"app": app}, "application_1_0003", client.tracking_url("application_1_0003"))
