"""The AM's pacing: how often it reads skein's store and looks at the containers.

Pure logic (a stand-in for skein's application client): each read and each
look is a gRPC call that skein's AM serves on the nodes that train.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from airflow_provider_tony.runtime import am as am_module
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.messages import TaskState
from airflow_provider_tony.runtime.spec import JobSpec


def _am(heartbeat_interval: float, running: bool = True) -> ApplicationMaster:
    spec = JobSpec.from_dict(
        {
            "name": "t",
            "roles": {"worker": {"instances": 1, "command": ["true"]}},
            "heartbeat_interval": heartbeat_interval,
            "heartbeat_timeout": 3 * heartbeat_interval,
        }
    )
    am = ApplicationMaster(SimpleNamespace(kv={}), spec, "application_1_0001")
    if running:
        for task in am.tracker.tasks.values():
            task.state = TaskState.RUNNING
    return am


@pytest.mark.parametrize(("interval", "starting", "running"), [(5.0, 0.25, 1.0), (1.0, 0.25, 1.0), (0.2, 0.1, 0.2)])
def test_the_store_is_read_quickly_while_tasks_start_then_once_a_beat_at_most_every_second(
    interval: float, starting: float, running: float
) -> None:
    assert _am(interval, running=False).tick() == starting
    assert _am(interval).tick() == running


@pytest.mark.parametrize(("interval", "expected"), [(0.5, 1.0), (1.0, 1.0), (2.0, 2.0), (5.0, 5.0), (30.0, 5.0)])
def test_containers_are_looked_at_every_heartbeat_interval_between_one_and_five_seconds(
    interval: float, expected: float
) -> None:
    calls: list[list[str]] = []
    am = _am(interval)
    am.app = SimpleNamespace(kv={}, get_containers=lambda states: calls.append(states) or [])
    am.check_containers(1000.0)
    am.check_containers(1000.0 + expected - 0.01)
    assert len(calls) == 1
    am.check_containers(1000.0 + expected)
    assert len(calls) == 2
    assert am_module.CONTAINER_CHECK_MIN_S <= am.container_check_interval() <= am_module.CONTAINER_CHECK_MAX_S


class FakeUI:
    def __init__(self, failures: int = 0, lost_answer: bool = False) -> None:
        self.pages: list[tuple[str, str, str | None]] = []
        self.failures = failures  # the next calls that fail
        self.lost_answer = lost_answer  # a failing call still adds the page (its answer lost)

    def add_page(self, route: str, target: str, link_name: str | None = None) -> None:
        if self.failures:
            self.failures -= 1
            if self.lost_answer:
                self.pages.append((route, target, link_name))
            raise RuntimeError("grpc: deadline exceeded")
        self.pages.append((route, target, link_name))

    def get_pages(self) -> dict[str, str]:
        return {route: target for route, target, _ in self.pages}


def test_containers_are_looked_at_every_tick_while_a_failed_task_awaits_judgment() -> None:
    """A peer's failure pending (a survivor blamed a silent task): YARN's word on the silent task's
    container (killed for memory, not lost) must reach the tracker before it declares anything."""
    calls: list[list[str]] = []
    am = _am(5.0)
    am.app = SimpleNamespace(kv={}, get_containers=lambda states: calls.append(states) or [])
    am.check_containers(1000.0)
    am.check_containers(1000.5)
    assert len(calls) == 1, "throttled while nothing failed"
    am.tracker.tasks["worker:0"].state = TaskState.FAILED
    am.check_containers(1001.0)
    am.check_containers(1001.5)
    assert len(calls) == 3


def test_the_tensorboard_role_is_registered_once_as_a_page_of_the_ui_when_its_port_is_known() -> None:
    from airflow_provider_tony.runtime.messages import Registration

    spec = JobSpec.from_dict(
        {"name": "t", "roles": {"worker": {"command": ["true"]}, "tensorboard": {"command": ["true"]}}}
    )
    ui = FakeUI()
    am = ApplicationMaster(SimpleNamespace(kv={}, ui=ui), spec, "application_1_0001")
    am.tracker.register("worker:0", Registration(host="node1", port=4000), 1.0)
    am.register_pages()
    assert ui.pages == [], "no tensorboard task registered yet"
    am.tracker.register("tensorboard:0", Registration(host="node2", port=6006), 2.0)
    am.register_pages()
    am.register_pages()
    assert ui.pages == [("tensorboard", "http://node2:6006", "TensorBoard")]


@pytest.mark.parametrize("lost_answer", [False, True], ids=["refused", "answer-lost"])
def test_a_failed_page_registration_is_tried_again_until_the_page_is_there(lost_answer: bool) -> None:
    """A link to TensorBoard is shown from submit on: one failed call must not leave it dead for good."""
    from airflow_provider_tony.runtime.messages import Registration

    spec = JobSpec.from_dict(
        {"name": "t", "roles": {"worker": {"command": ["true"]}, "tensorboard": {"command": ["true"]}}}
    )
    ui = FakeUI(failures=2, lost_answer=lost_answer)
    am = ApplicationMaster(SimpleNamespace(kv={}, ui=ui), spec, "application_1_0001")
    am.tracker.register("tensorboard:0", Registration(host="node2", port=6006), 2.0)
    for _ in range(4):
        am.register_pages()
    assert ui.pages == [("tensorboard", "http://node2:6006", "TensorBoard")], "added once, after the failures"
    assert am.pages == {"tensorboard:0"}
    assert am.page_failures.get("tensorboard:0", 0) == (0 if lost_answer else 2)


def test_tensorboard_links_go_through_the_resourcemanagers_proxy() -> None:
    from airflow_provider_tony.runtime.messages import StateDocument, TaskSummary
    from airflow_provider_tony.yarn.client import TonyClient

    client = TonyClient(rm_url="http://rm:8088/")
    serving = TaskSummary(state="RUNNING", role="tensorboard", host="node2", port=6006)
    doc = StateDocument(application_id="application_1_0001", tasks={"tensorboard:0": serving})
    assert (
        client.tensorboard_url("application_1_0001", doc)
        == "http://rm:8088/proxy/application_1_0001/pages/tensorboard/"
    )
    pending = StateDocument(
        application_id="application_1_0001", tasks={"tensorboard:0": TaskSummary(state="PENDING", role="tensorboard")}
    )
    app = "application_1_0001"
    assert client.tensorboard_url(app, pending) == "" and client.tensorboard_url(app, None) == ""


def _ended(service: str, instance: int, state: str = "SUCCEEDED") -> SimpleNamespace:
    return SimpleNamespace(
        service_name=service,
        instance=instance,
        state=state,
        yarn_container_id=f"container_1_0001_01_00000{instance + 2}",
        exit_message="",
    )


@pytest.mark.parametrize(("exit_code", "state"), [(0, TaskState.SUCCEEDED), (3, TaskState.FAILED)])
def test_a_container_that_ended_after_writing_its_exit_record_is_not_lost(exit_code: int, state: TaskState) -> None:
    """The container ends right after its executor wrote the exit record, often before the AM's
    next read of the store: the record decides, else a finished task would be declared lost
    (and a successful job retried)."""
    from airflow_provider_tony.runtime import constants as C
    from airflow_provider_tony.runtime.messages import ExitRecord

    am = _am(1.0)
    kv = {C.kv_exit("worker:0"): ExitRecord(exit_code=exit_code, stderr_tail=["done"]).to_json()}
    am.app = SimpleNamespace(kv=kv, get_containers=lambda states: [_ended("worker", 0)])
    am.check_containers(1000.0)
    task = am.tracker.tasks["worker:0"]
    assert task.state is state and task.exit_code == exit_code and task.stderr_tail == ["done"]


def test_a_container_that_ended_without_an_exit_record_is_lost() -> None:
    am = _am(1.0)
    am.app = SimpleNamespace(kv={}, get_containers=lambda states: [_ended("worker", 0, "KILLED")])
    am.check_containers(1000.0)
    task = am.tracker.tasks["worker:0"]
    assert task.state is TaskState.LOST and task.exit_code is None
    assert "container_1_0001_01_000002" in task.message and "KILLED" in task.message


def test_a_failed_call_to_skeins_am_is_tried_again_on_the_next_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty ApplicationError from skein's AM (its gRPC server under load) fails the job only when
    ``SKEIN_ERROR_TICKS`` ticks in a row fail; a success in between starts the count again."""
    from skein.exceptions import ApplicationError

    from airflow_provider_tony.runtime.state import Verdict

    monkeypatch.setattr(am_module.time, "sleep", lambda _s: None)
    done = Verdict(True, "worker:0 succeeded")

    def run_with(answers: list[object]) -> Verdict:
        am = _am(1.0)
        outcomes = iter(answers)

        def step(_now: float) -> Verdict | None:
            answer = next(outcomes)
            if isinstance(answer, Exception):
                raise answer
            return answer  # type: ignore[return-value]

        am.step = step  # type: ignore[method-assign]
        return am.run()

    flaky = ApplicationError("")
    limit = am_module.SKEIN_ERROR_TICKS
    assert run_with([*[flaky] * (limit - 1), None, *[flaky] * (limit - 1), done]) is done
    with pytest.raises(ApplicationError):
        run_with([*[flaky] * limit, done])
    with pytest.raises(KeyError):  # not skein's: the job's failure at once, as before
        run_with([KeyError("bug"), done])
