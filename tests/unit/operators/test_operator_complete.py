"""``TonyOperator.execute_complete``: the operator, not the trigger, decides how a deferred job ended."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_provider_tony.operators.tony import TonyOperator
from airflow_provider_tony.yarn.client import JobResult, TonyClient

APP = "application_1700000000000_0007"


class FakeHook:
    """Records what the operator asks of the cluster; a deferred job's end needs no cluster call."""

    base_path = "/user/airflow/tony"
    default_queue = "default"

    def final_cost(self, app_id: str) -> None:
        """The RM's final count: none here (the result's own figures stay)."""
        return None

    def __init__(self) -> None:
        self.killed: list[str] = []

    client = TonyClient(rm_url="http://rm:8088")

    def tracking_url(self, app_id: str) -> str:
        return self.client.tracking_url(app_id)

    def job_page_url(self, app_id: str) -> str:
        return self.client.job_page_url(app_id)

    def tensorboard_url(self, app_id: str, doc: Any) -> str:
        return self.client.tensorboard_url(app_id, doc)

    def tensorboard_page_url(self, app_id: str) -> str:
        return self.client.tensorboard_page_url(app_id)

    def kill(self, app_id: str) -> None:
        self.killed.append(app_id)

    def container_logs(self, container_id: str, host: str) -> dict[str, str]:
        return {}


class FakeTI:
    """What ``build_spec`` reads of the task instance (a fresh operator rebuilds the job after deferral)."""

    dag_id, task_id, run_id, map_index, try_number = "nightly", "train", "manual__1", -1, 1

    def __init__(self) -> None:
        self.xcom: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[key] = value


def operator() -> TonyOperator:
    op = TonyOperator(task_id="train", job={"roles": {"worker": {"command": ["true"]}}})
    op._hook = FakeHook()  # type: ignore[assignment]
    return op


def test_an_error_event_fails_the_try_naming_the_application_and_the_cause() -> None:
    op = operator()
    event = {"status": "error", "app_id": APP, "message": "ResourceManager at http://rm:8088 unreachable"}
    with pytest.raises(
        AirflowException, match=f"lost track of {APP}: ResourceManager at http://rm:8088 unreachable"
    ) as err:
        op.execute_complete({"ti": FakeTI()}, event)
    # Losing track is not the job's fault: the try fails, retries stay allowed (and re-attach).
    assert not isinstance(err.value, AirflowFailException)
    assert op._app_id == APP, "on_kill must still know which application to kill"
    op.on_kill()
    assert op._hook.killed == [APP]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "event",
    [{"app_id": APP}, {"status": "timeout", "app_id": APP, "message": "x"}],
    ids=["no status", "unknown status"],
)
def test_an_event_that_is_not_done_never_counts_as_success(event: dict[str, Any]) -> None:
    with pytest.raises(AirflowException, match=f"lost track of {APP}"):
        operator().execute_complete({"ti": FakeTI()}, event)


def test_a_done_event_with_a_failed_job_fails_with_its_diagnostics() -> None:
    result = JobResult(APP, "FINISHED", "FAILED", "worker:1 exited with code 3", f"http://rm/cluster/app/{APP}", {})
    with pytest.raises(AirflowException, match="worker:1 exited with code 3") as err:
        operator().execute_complete(
            {"ti": FakeTI()}, {"status": "done", "app_id": APP, "result": dataclasses.asdict(result)}
        )
    assert f"yarn logs -applicationId {APP}" in str(err.value)


def test_a_done_event_with_a_succeeded_job_returns_the_result() -> None:
    result = JobResult(
        APP,
        "FINISHED",
        "SUCCEEDED",
        "ok",
        f"http://rm/cluster/app/{APP}",
        {"tasks": {"worker:0": {"state": "SUCCEEDED", "progress": {"step": 9, "metrics": {"acc": 0.9}}}}},
    )
    ti = FakeTI()
    value = operator().execute_complete(
        {"ti": ti}, {"status": "done", "app_id": APP, "result": dataclasses.asdict(result)}
    )
    assert value["application_id"] == APP and value["final_state"] == "SUCCEEDED"
    assert value["tasks"]["worker:0"]["state"] == "SUCCEEDED"
    # the job rebuilt after the deferral names the deciding task's figures and the checkpoint folder
    assert value["step"] == 9 and value["metrics"] == {"acc": 0.9}
    assert value["checkpoint_dir"] and "nightly" in value["checkpoint_dir"], value["checkpoint_dir"]
