"""The submitting side's follow policy (``yarn/follower.py``), driven with plain clocks.

``Follower.observe`` takes a YARN report, the AM's state document and ``now``;
these tests pass made-up reports and documents and plain floats, so every
timeout boundary is exact and nothing sleeps. The last tests drive
``TonyClient.poll`` with a fake cluster (HTTP) and a fake skein kill to show the I/O does what the step says.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from airflow_provider_tony.runtime.constants import RETRYABLE_MARK
from airflow_provider_tony.runtime.errors import (
    ApplicationUnknown,
    ClusterError,
    ClusterUnreachable,
    DocumentVersionError,
)
from airflow_provider_tony.runtime.messages import (
    STATE_DOCUMENT_VERSION,
    Failure,
    JobHistory,
    Message,
    Progress,
    StateDocument,
    TaskSummary,
)
from airflow_provider_tony.yarn import http as web
from airflow_provider_tony.yarn.client import TonyClient
from airflow_provider_tony.yarn.follower import Action, AppReport, Follower, JobResult, TonyEvent
from tests.unit.support.follower import APP, STALE, STARTUP, T0, URL, report


def follower() -> Follower:
    return Follower(APP, startup_timeout=STARTUP, am_stale_timeout=STALE)


def doc(
    seq: int,
    *,
    final: bool = False,
    step: int | None = None,
    events: list[str] | None = None,
    artefacts: list[str] | None = None,
    state: str = "RUNNING",
    retryable: bool = False,
    diagnostics: str = "",
) -> StateDocument:
    progress = Progress(step=step, epoch=1, metrics={"loss": 0.25}) if step is not None else None
    return StateDocument(
        application_id=APP,
        app_state="SUCCEEDED" if final else "RUNNING",
        seq=seq,
        final=final,
        retryable=retryable,
        diagnostics=diagnostics,
        events=[*(events or []), *(artefacts or [])],
        artefacts=artefacts or [],
        tasks={"worker:0": TaskSummary(state=state, role="worker", progress=progress)},
    )


# --------------------------------------------------------------------------- #
# start-up timeout
# --------------------------------------------------------------------------- #


def test_a_queued_application_is_killed_once_past_the_startup_timeout() -> None:
    f = follower()
    first = f.observe(report("ACCEPTED"), None, T0)
    assert first.action is Action.NONE and first.result is None
    assert first.lines == [f"{APP} is ACCEPTED ({URL})"]
    assert f.observe(report("ACCEPTED"), None, T0 + STARTUP).action is Action.NONE  # at the limit: not yet
    step = f.observe(report("ACCEPTED"), None, T0 + STARTUP + 0.001)
    assert step.action is Action.KILL_STARTUP_TIMEOUT and step.action.kills
    assert step.lines == [], "an unchanged state is logged once"
    assert step.result is not None and not step.result.succeeded and step.result.retryable
    assert step.result.yarn_state == "KILLED" and step.result.final_status == "FAILED"
    assert f"still ACCEPTED after {STARTUP:g}s (startup_timeout)" in step.result.diagnostics


def test_the_startup_clock_counts_from_the_first_queued_look_through_every_queued_state() -> None:
    f = follower()
    f.observe(report("NEW"), None, T0)
    f.observe(report("SUBMITTED"), None, T0 + 10)
    assert f.observe(report("ACCEPTED"), None, T0 + STARTUP + 1).action is Action.KILL_STARTUP_TIMEOUT


# --------------------------------------------------------------------------- #
# hung AM
# --------------------------------------------------------------------------- #


def test_an_am_that_stops_publishing_while_yarn_says_running_is_killed_as_hung() -> None:
    f = follower()
    f.observe(report("RUNNING"), doc(1), T0)
    assert f.observe(report("RUNNING"), doc(1), T0 + STALE).action is Action.NONE  # at the limit: not yet
    step = f.observe(report("RUNNING"), doc(1), T0 + STALE + 0.5)
    assert step.action is Action.KILL_HUNG_AM
    assert step.result is not None and step.result.retryable and not step.result.succeeded
    assert "stopped publishing its state for 30s" in step.result.diagnostics
    assert "hung AM" in step.result.diagnostics
    assert step.result.am_state == doc(1), "the last document read goes with the result"


def test_an_am_that_never_publishes_is_hung_after_the_timeout_counted_from_running() -> None:
    f = follower()
    f.observe(report("RUNNING"), None, T0)
    assert f.observe(report("RUNNING"), None, T0 + STALE).action is Action.NONE
    step = f.observe(report("RUNNING"), None, T0 + STALE + 1)
    assert step.action is Action.KILL_HUNG_AM and step.result is not None and step.result.am_state is None


def test_a_new_document_resets_the_staleness_clock() -> None:
    f = follower()
    f.observe(report("RUNNING"), doc(1), T0)
    step = f.observe(report("RUNNING"), doc(2), T0 + STALE - 1)
    assert step.new_document == doc(2)
    assert f.observe(report("RUNNING"), doc(2), T0 + STALE + 5).action is Action.NONE, "seq moved at T0+29"
    assert f.observe(report("RUNNING"), doc(2), T0 + 2 * STALE).action is Action.KILL_HUNG_AM


def test_a_document_with_the_same_seq_does_not_count_as_alive_and_is_not_handed_on() -> None:
    f = follower()
    assert f.observe(report("RUNNING"), doc(4), T0).new_document == doc(4)
    again = f.observe(report("RUNNING"), doc(4, step=9), T0 + 1)
    assert again.new_document is None


def test_time_spent_queued_does_not_count_towards_a_hung_am() -> None:
    """The staleness clock starts when YARN first says RUNNING, not when following began."""
    f = follower()
    f.observe(report("ACCEPTED"), None, T0)
    step = f.observe(report("RUNNING"), None, T0 + STARTUP - 1)  # queued almost a minute; AM not up yet
    assert step.action is Action.NONE, step.result
    assert step.lines == [f"{APP} is RUNNING ({URL})"]
    assert f.observe(report("RUNNING"), None, T0 + STARTUP - 1 + STALE + 1).action is Action.KILL_HUNG_AM


# --------------------------------------------------------------------------- #
# final acknowledgement and the end
# --------------------------------------------------------------------------- #


def test_a_final_document_is_acknowledged_and_following_goes_on_until_yarn_ends() -> None:
    f = follower()
    f.observe(report("RUNNING"), doc(1), T0)
    step = f.observe(report("RUNNING"), doc(2, final=True), T0 + 1)
    assert step.action is Action.ACK and step.result is None
    assert f.observe(report("RUNNING"), doc(2, final=True), T0 + 2).action is Action.ACK  # idempotent


def test_an_ended_application_returns_yarns_outcome_with_the_last_document() -> None:
    f = follower()
    f.observe(report("RUNNING"), doc(1), T0)
    last = doc(2, final=True, step=60)
    f.observe(report("RUNNING"), last, T0 + 1)
    step = f.observe(report("FINISHED", "SUCCEEDED", "worker:0 succeeded"), None, T0 + 2)
    assert step.action is Action.DONE
    assert step.result == JobResult(APP, "FINISHED", "SUCCEEDED", "worker:0 succeeded", URL, last)
    assert step.result.succeeded and not step.result.retryable
    assert step.lines == [f"{APP} is FINISHED ({URL})"]


def test_an_application_that_ended_before_it_was_followed_returns_without_a_document() -> None:
    step = follower().observe(report("FAILED", "FAILED", "[retryable] worker:0 lost"), None, T0)
    assert step.action is Action.DONE and step.result is not None
    assert step.result.am_state is None and step.result.retryable and not step.result.succeeded


def test_a_retryable_verdict_in_the_document_makes_the_result_retryable() -> None:
    f = follower()
    f.observe(report("RUNNING"), doc(1, final=True, retryable=True, diagnostics="worker:0 missed heartbeats"), T0)
    step = f.observe(report("FINISHED", "FAILED", "worker:0 missed heartbeats"), None, T0 + 1)
    assert step.result is not None and step.result.retryable


# --------------------------------------------------------------------------- #
# what is logged
# --------------------------------------------------------------------------- #


def test_events_once_task_states_on_change_and_one_summary_per_poll() -> None:
    f = follower()
    # Chosen by the AM's mark, not by words: a container message that mentions a checkpoint is no artefact.
    events = ["worker:0 registered at h:1", "ps:0 container ended: no checkpoint or model here"]
    artefacts = ["worker:0 restored checkpoint step 10 from /c in 0.1s"]
    first = f.observe(report("RUNNING"), doc(1, step=5, events=events, artefacts=artefacts), T0)
    assert first.lines == [
        f"{APP} is RUNNING ({URL})",
        artefacts[0],
        "worker:0 RUNNING",
        "RUNNING: 1 RUNNING | worker:0 step 5 epoch 1 (loss=0.25)",
    ]
    same = f.observe(report("RUNNING"), doc(2, step=5, events=events, artefacts=artefacts), T0 + 1)
    assert same.lines == ["RUNNING: 1 RUNNING | worker:0 step 5 epoch 1 (loss=0.25)"], "only the summary"
    more = [*artefacts, "worker:0 uploaded checkpoint 20"]
    later = f.observe(report("RUNNING"), doc(3, step=6, events=events, artefacts=more), T0 + 2)
    assert later.lines == [
        "worker:0 uploaded checkpoint 20",
        "RUNNING: 1 RUNNING | worker:0 step 6 epoch 1 (loss=0.25)",
    ]
    done = f.observe(report("RUNNING"), doc(4, step=6, state="SUCCEEDED"), T0 + 3)
    assert done.lines[0] == "worker:0 RUNNING -> SUCCEEDED"


# --------------------------------------------------------------------------- #
# the trigger event
# --------------------------------------------------------------------------- #


def test_the_trigger_event_round_trips_through_primitives() -> None:
    result = JobResult(APP, "FINISHED", "SUCCEEDED", "ok", URL, doc(3, final=True, step=60))
    event = TonyEvent.done(result)
    data = event.to_dict()
    assert data["status"] == "done" and data["app_id"] == APP
    assert data["result"]["am_state"]["tasks"]["worker:0"]["progress"]["step"] == 60  # plain dicts all the way
    assert TonyEvent.from_dict(data) == event
    assert TonyEvent.from_dict(TonyEvent.error(APP, "RM down").to_dict()) == TonyEvent("error", APP, "RM down")


def test_a_document_from_a_newer_am_is_read_ignoring_unknown_fields() -> None:
    """A newer AM that only added fields keeps the version (the module doc's rule): it is read."""
    data: dict[str, Any] = {**doc(5).to_dict(), "version": STATE_DOCUMENT_VERSION, "preemptions": 1}
    data["tasks"]["worker:0"]["gpu_memory"] = 123
    read = StateDocument.from_dict(data)
    assert read.seq == 5 and read.version == STATE_DOCUMENT_VERSION and read.tasks["worker:0"].state == "RUNNING"


@pytest.mark.parametrize("cls", [StateDocument, JobHistory])
def test_a_document_of_a_newer_major_version_is_refused_with_the_fix(cls: type[Message]) -> None:
    newer = STATE_DOCUMENT_VERSION + 1
    with pytest.raises(DocumentVersionError) as err:
        cls.from_dict({"version": newer}, "state")
    assert str(err.value) == (
        f"state.version: a {cls.__name__} of layout version {newer}, newer than the {STATE_DOCUMENT_VERSION} this "
        "provider reads; it was written by a newer version of airflow-provider-tony: upgrade the provider here "
        "(on the Airflow workers and triggerer, or where the CLI runs)"
    )
    for same_or_older in (None, 1, STATE_DOCUMENT_VERSION):
        assert cls.from_dict({"version": same_or_older} if same_or_older else {}).version in (1, STATE_DOCUMENT_VERSION)


def test_a_state_document_nested_in_a_history_is_checked_too() -> None:
    with pytest.raises(DocumentVersionError, match=r"state\.version: a StateDocument of layout version 9"):
        JobHistory.from_dict({"state": {"version": 9}})


def test_following_a_newer_am_fails_with_the_version_error_not_as_a_hung_am() -> None:
    """parse_state would otherwise count the document as none, and the stale-AM rule would kill the job."""
    data = {**doc(5).to_dict(), "version": STATE_DOCUMENT_VERSION + 1}
    response = httpx.Response(200, json=data, request=httpx.Request("GET", "http://rm/proxy/x/pages/tony/state"))
    with pytest.raises(DocumentVersionError, match="upgrade the provider"):
        web.parse_state(response)


# --------------------------------------------------------------------------- #
# TonyClient.poll: the thin I/O around the follower
# --------------------------------------------------------------------------- #


class FakeCluster:
    """What TonyClient.poll touches: the RM's REST report and the AM's routes over HTTP
    (an ``httpx.MockTransport``), and the kill (``PUT .../state`` on the RM's REST API)."""

    def __init__(self, states: list[str], documents: list[StateDocument | None]) -> None:
        self.states = states
        self.documents = documents
        self.acks: list[str] = []
        self.killed: list[str] = []
        self.fail_report: Exception | None = None

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == f"/ws/v1/cluster/apps/{APP}/state" and request.method == "PUT":
            assert json.loads(request.content) == {"state": "KILLED"}
            self.killed.append(APP)
            return httpx.Response(202, json={"state": "RUNNING"})
        if path == f"/ws/v1/cluster/apps/{APP}":
            if self.fail_report is not None:
                raise self.fail_report
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            final = {"FINISHED": "SUCCEEDED", "KILLED": "KILLED"}.get(state, "UNDEFINED")
            return httpx.Response(
                200,
                json={
                    "app": {"state": state, "finalStatus": final, "progress": 50.0, "applicationTags": "t", "name": "n"}
                },
            )
        if path == f"/proxy/{APP}/pages/tony/state":
            d = self.documents.pop(0) if len(self.documents) > 1 else self.documents[0]
            return httpx.Response(200, json={} if d is None else d.to_dict())
        if path == f"/proxy/{APP}/pages/tony/ack" and request.method == "GET":
            self.acks.append(APP)
            return httpx.Response(200, text="ok")
        return httpx.Response(404, text=f"unexpected {request.method} {path}")


def client_with(fake: FakeCluster) -> TonyClient:
    client = TonyClient(rm_url="http://rm:8088")
    client.cluster._client = httpx.Client(transport=httpx.MockTransport(fake.handle))
    return client


def test_poll_acknowledges_a_final_document_and_returns_the_result_when_yarn_ends() -> None:
    fake = FakeCluster(["RUNNING", "FINISHED"], [doc(1, final=True)])
    client, lines, seen = client_with(fake), [], []
    f = follower()
    assert client.poll(f, emit=lines.append, on_state=seen.append) is None
    assert fake.acks == [APP]
    assert seen == [doc(1, final=True)]
    result = client.poll(f, emit=lines.append)
    assert result is not None and result.succeeded and result.am_state == doc(1, final=True)
    assert fake.killed == []
    assert lines[0] == f"{APP} is RUNNING (http://rm:8088/cluster/app/{APP})"


def test_poll_kills_when_the_follower_says_so() -> None:
    fake = FakeCluster(["ACCEPTED"], [None])
    client = client_with(fake)
    f = Follower(APP, startup_timeout=0.0, am_stale_timeout=STALE)
    client.poll(f, emit=lambda _l: None)  # starts the clock
    result = wait_for_result(client, f)
    assert fake.killed == [APP]
    assert result.final_status == "FAILED" and "startup_timeout" in result.diagnostics


def wait_for_result(client: TonyClient, f: Follower) -> JobResult:
    """poll reads the monotonic clock: with a zero timeout, the first look after the start kills."""
    for _ in range(1000):
        result = client.poll(f, emit=lambda _l: None)
        if result is not None:
            return result
    raise AssertionError("no result")


def test_transport_errors_become_cluster_errors_in_one_place_once_the_outage_lasts() -> None:
    fake = FakeCluster(["RUNNING"], [None])
    fake.fail_report = httpx.ConnectError("connection refused")
    client, lines = client_with(fake), []
    f = Follower(APP, startup_timeout=STARTUP, am_stale_timeout=STALE, rm_outage_timeout=0.0)
    assert client.poll(f, emit=lines.append) is None  # the first miss only starts the outage clock
    assert "unreachable" in lines[0] and "following on" in lines[0]
    with pytest.raises(ClusterUnreachable, match=f"no report for {APP}: .* unreachable .*connection refused"):
        for _ in range(1000):  # poll reads the monotonic clock: the next look past zero seconds raises
            client.poll(f, emit=lines.append)
    assert issubclass(ClusterUnreachable, ClusterError)


@pytest.mark.parametrize(
    ("error", "unreachable"),
    [
        (httpx.ConnectError("refused"), True),
        (httpx.ReadTimeout("slow"), True),
        (httpx.HTTPStatusError("503", request=httpx.Request("GET", "http://rm"), response=httpx.Response(503)), True),
        (httpx.HTTPStatusError("404", request=httpx.Request("GET", "http://rm"), response=httpx.Response(404)), False),
    ],
)
def test_only_a_silent_or_failing_rm_is_unreachable_a_404_is_an_answer(error: Exception, unreachable: bool) -> None:
    from airflow_provider_tony.yarn.http import rm_error

    assert isinstance(rm_error("http://rm", APP, error), ClusterUnreachable) is unreachable


def test_an_rm_outage_is_waited_out_and_does_not_count_against_the_am() -> None:
    """A work-preserving RM restart: YARN and its proxy are gone for longer than the hung-AM timeout."""
    f = Follower(APP, startup_timeout=STARTUP, am_stale_timeout=STALE, rm_outage_timeout=10 * STALE)
    f.observe(report("RUNNING"), doc(1), T0)
    down = ClusterUnreachable("no report: ResourceManager unreachable")
    first = f.unreachable(down, T0 + 1)
    assert first.result is None and len(first.lines) == 1
    assert f.unreachable(down, T0 + 4 * STALE).lines == []  # said once
    # back, but still recovering its applications: "unknown" is part of the outage, not the end
    assert f.unreachable(ApplicationUnknown("does not know it (HTTP 404)"), T0 + 5 * STALE).result is None
    back = f.observe(report("RUNNING"), doc(1), T0 + 5 * STALE + 1)  # same seq: the AM had no proxy to publish to
    assert back.action is Action.NONE and "answers again after" in back.lines[0]
    # the hung-AM clock runs again from the recovery
    assert f.observe(report("RUNNING"), doc(1), T0 + 6 * STALE + 2).action is Action.KILL_HUNG_AM
    # a new outage starts its own clock: said again, and given up only past the timeout
    again = f.unreachable(down, T0 + 7 * STALE)
    assert again.result is None and len(again.lines) == 1
    with pytest.raises(ClusterUnreachable, match="rm_outage_timeout 300s"):
        f.unreachable(down, T0 + 18 * STALE)


def test_unknown_application_outside_an_outage_and_other_errors_end_following_at_once() -> None:
    f = follower()
    f.observe(report("RUNNING"), doc(1), T0)
    with pytest.raises(ApplicationUnknown):
        f.unreachable(ApplicationUnknown("does not know it (HTTP 404)"), T0 + 1)
    with pytest.raises(ClusterError, match="refused"):
        f.unreachable(ClusterError("refused the report (HTTP 403)"), T0 + 2)


# --------------------------------------------------------------------------- #
# Asking YARN only when the AM's document cannot answer
# --------------------------------------------------------------------------- #


def running(app_id: str = APP) -> AppReport:
    return AppReport(app_id=app_id, state="RUNNING", tracking_url="u")


def test_a_live_document_stands_for_yarns_running_report_until_it_is_too_old() -> None:
    f = Follower(APP, startup_timeout=600, am_stale_timeout=600, report_max_age=60.0)
    assert not f.wants_document_first and f.report_from_document(doc(1), 0.0) is None, "no report from YARN yet"
    rep = running()
    f.observe(rep, doc(1), 100.0)
    assert f.wants_document_first
    assert f.report_from_document(doc(2), 159.9) is rep
    assert f.report_from_document(doc(2), 160.0) is None, "at report_max_age YARN is asked again"
    assert f.report_from_document(None, 101.0) is None, "no document: the AM may be gone, ask YARN"
    assert f.report_from_document(doc(2, final=True), 101.0) is None, "a verdict: YARN says when it ended"
    f.observe(f.report_from_document(doc(2), 110.0) or rep, doc(2), 110.0)
    assert f.reported_at == 100.0, "a report standing in for YARN's does not restart its clock"


def test_a_queued_application_is_never_taken_as_running() -> None:
    f = follower()
    f.observe(AppReport(app_id=APP, state="ACCEPTED"), None, 0.0)
    assert not f.wants_document_first and f.report_from_document(doc(1), 1.0) is None


def test_the_stale_am_rule_still_holds_when_yarn_is_not_asked() -> None:
    f = Follower(APP, startup_timeout=600, am_stale_timeout=STALE, report_max_age=1e9)
    f.observe(running(), doc(1), 0.0)
    step = f.observe(f.report_from_document(doc(1), STALE + 1) or running(), doc(1), STALE + 1)
    assert step.action is Action.KILL_HUNG_AM


def test_polling_a_running_job_asks_yarn_once_while_the_am_answers() -> None:
    fake = FakeCluster(["RUNNING"], [doc(i) for i in range(1, 12)])
    client, f = client_with(fake), follower()
    rm_asked = []
    original = fake.handle

    def counting(request: httpx.Request) -> httpx.Response:
        if request.url.path.startswith("/ws/v1/cluster/apps/"):
            rm_asked.append(1)
        return original(request)

    client.cluster._client = httpx.Client(transport=httpx.MockTransport(counting))
    for _ in range(10):
        assert client.poll(f, emit=lambda _l: None) is None
    assert len(rm_asked) == 1


def test_the_rm_outage_timeout_is_exclusive_and_the_error_says_how_long() -> None:
    """At exactly rm_outage_timeout the follower still waits; past it the error gives the outage's length."""
    f = Follower(APP, startup_timeout=STARTUP, am_stale_timeout=STALE, rm_outage_timeout=30.0)
    down = ClusterUnreachable("no report: ResourceManager unreachable")
    f.unreachable(down, T0 + 100)  # the outage starts
    assert f.unreachable(down, T0 + 130).result is None
    with pytest.raises(ClusterUnreachable) as err:
        f.unreachable(down, T0 + 131)
    assert str(err.value) == "no report: ResourceManager unreachable, for 31s (rm_outage_timeout 30s)"


def test_the_kill_results_are_exact() -> None:
    """What the operator and the trigger report after each kill: the whole JobResult."""
    f = follower()
    f.observe(report("ACCEPTED"), None, T0)
    queued = f.observe(report("ACCEPTED"), None, T0 + STARTUP + 1).result
    why = "still ACCEPTED after 60s (startup_timeout): the queue has no room for the application master; killed"
    assert queued == JobResult(
        APP, "KILLED", "FAILED", f"{RETRYABLE_MARK} {why}", URL, None, Failure("startup_timeout", True, message=why)
    )
    f = follower()
    f.observe(report("RUNNING"), doc(1), T0)
    hung = f.observe(report("RUNNING"), doc(1), T0 + STALE + 2).result
    why = "the application master stopped publishing its state for 32s while YARN reports RUNNING (hung AM); killed"
    assert hung == JobResult(
        APP, "KILLED", "FAILED", f"{RETRYABLE_MARK} {why}", URL, doc(1), Failure("hung_am", True, message=why)
    )


def test_an_outage_while_queued_pauses_the_startup_clock() -> None:
    """Queued 20 s, then the RM is away 100 s: the start-up clock resumes where it was, and a
    follower that was never RUNNING keeps no hung-AM clock."""
    f = follower()
    f.observe(report("ACCEPTED"), None, T0)
    f.observe(report("ACCEPTED"), None, T0 + 20)
    f.unreachable(ClusterUnreachable("down"), T0 + 20)
    back = f.observe(report("ACCEPTED"), None, T0 + 120)
    assert back.lines == ["the ResourceManager answers again after 100s"] and back.action is Action.NONE
    assert f.queued_since == T0 + 100 and f.fresh_at is None
    assert f.observe(report("ACCEPTED"), None, T0 + 100 + STARTUP).action is Action.NONE
    assert f.observe(report("ACCEPTED"), None, T0 + 100 + STARTUP + 1).action is Action.KILL_STARTUP_TIMEOUT


def test_a_new_follower_knows_nothing_yet() -> None:
    f = Follower(APP, startup_timeout=STARTUP, am_stale_timeout=STALE)
    assert (f.last_state, f.reported_at, f.last_seq, f.queued_since, f.fresh_at) == (None,) * 5
    assert f.report_max_age == 60.0


def test_a_malformed_event_names_the_part_that_is_wrong() -> None:
    """The trigger's event crosses Airflow's database: an incompatible one fails naming its part."""
    from airflow_provider_tony.runtime.errors import SpecError

    with pytest.raises(SpecError, match=r"^result: JobResult message is incomplete"):
        TonyEvent.from_dict({"status": "done", "app_id": APP, "result": {"app_id": APP, "yarn_state": "X"}}, "event")
    with pytest.raises(SpecError, match=r"^am_state: 'oops' is a str, not a mapping"):
        JobResult.from_dict({"app_id": APP, "yarn_state": "FINISHED", "final_status": "FAILED", "am_state": "oops"})


# --------------------------------------------------------------------------- #
# The typed outcome: JobResult.failure
# --------------------------------------------------------------------------- #


def test_the_ams_typed_failure_is_the_results_and_yarns_mark_is_not_read_then() -> None:
    """Only when the AM's document says nothing typed are YARN's diagnostics read (once, for the mark)."""
    cause = Failure("lost", True, "worker:1", None, "worker:1 lost", ["worker:0"])
    final = StateDocument(application_id=APP, app_state="FAILED", final=True, failure=cause)
    result = JobResult.from_report(report("FINISHED", "FAILED", "worker:1 lost"), final)
    assert result.failure == cause and result.retryable
    permanent = StateDocument(final=True, failure=Failure("code", False, "worker:0", 1, "exited with code 1"))
    # An AM's typed word wins over text: a mark in YARN's diagnostics does not make it retryable.
    assert not JobResult.from_report(report("FINISHED", "FAILED", f"{RETRYABLE_MARK} x"), permanent).retryable


@pytest.mark.parametrize(
    "diagnostics, document, retryable",
    [
        (f"{RETRYABLE_MARK} worker:0 lost", None, True),  # the AM died after telling YARN only
        ("AM container exited with exitCode: -104", None, False),
        ("worker:0 lost", StateDocument(retryable=True), True),  # an AM from before typed failures
        ("worker:0 exited with code 1", StateDocument(retryable=False), False),
    ],
)
def test_without_the_ams_failure_it_is_read_from_yarns_diagnostics(
    diagnostics: str, document: StateDocument | None, retryable: bool
) -> None:
    result = JobResult.from_report(report("FINISHED", "FAILED", diagnostics), document)
    assert result.failure == Failure("yarn", retryable, message=diagnostics)
    assert result.retryable is retryable


def test_a_success_has_no_failure_and_the_failure_survives_the_trigger_event() -> None:
    assert JobResult.from_report(report("FINISHED", "SUCCEEDED", f"{RETRYABLE_MARK} odd")).failure is None
    result = JobResult.from_report(report("FINISHED", "FAILED", f"{RETRYABLE_MARK} worker:0 lost"))
    event = TonyEvent.from_dict(TonyEvent.done(result).to_dict())
    assert event.result == result and event.result is not None and event.result.failure is not None
    older = TonyEvent.done(result).to_dict()
    del older["result"]["failure"]  # an event stored by a trigger from before typed failures
    rebuilt = TonyEvent.from_dict(older).result
    assert rebuilt is not None and rebuilt.failure == result.failure


# --------------------------------------------------------------------------- #
# One look, two transports: the requests are the look's, not the transport's
# --------------------------------------------------------------------------- #


class Recorder:
    """A blocking transport that answers from a script and records each request."""

    def __init__(self, reports: list[AppReport | ClusterError], documents: list[StateDocument | None]) -> None:
        self.reports, self.documents, self.asked = reports, documents, []  # type: list[str]

    def report(self, app_id: str) -> AppReport:
        self.asked.append("report")
        answer = self.reports.pop(0)
        if isinstance(answer, ClusterError):
            raise answer
        return answer

    def am_fetch(self, app_id: str) -> StateDocument | None:
        self.asked.append("am_fetch")
        return self.documents.pop(0)

    def am_node(self, app_id: str) -> Any:
        raise AssertionError("no look of these scripts asks where the AM runs")

    def ack_final(self, app_id: str) -> None:
        self.asked.append("ack_final")

    def kill(self, app_id: str) -> None:
        self.asked.append("kill")


class AsyncRecorder:
    def __init__(self, blocking: Recorder) -> None:
        self.blocking = blocking

    async def report(self, app_id: str) -> AppReport:
        return self.blocking.report(app_id)

    async def am_fetch(self, app_id: str) -> StateDocument | None:
        return self.blocking.am_fetch(app_id)

    async def am_node(self, app_id: str) -> Any:
        return self.blocking.am_node(app_id)

    async def ack_final(self, app_id: str) -> None:
        self.blocking.ack_final(app_id)

    async def kill(self, app_id: str) -> None:
        self.blocking.kill(app_id)


def _script() -> Recorder:
    down = ClusterUnreachable("no report: ResourceManager unreachable")
    reports: list[AppReport | ClusterError] = [report("ACCEPTED"), report("RUNNING"), report("RUNNING"), down]
    reports.append(report("FINISHED", "SUCCEEDED"))
    return Recorder(reports, [doc(1), doc(2), doc(3, final=True), None, None])


def _follow(drive: Any) -> tuple[list[list[str]], list[Action], JobResult | None]:
    """Looks at T0, T0+1, ... until a result; what each look asked, and what it decided."""
    f, transport, asked, actions = follower(), _script(), [], []
    for i in range(10):
        before = len(transport.asked)
        step = drive(f, T0 + i, transport)
        asked.append(transport.asked[before:])
        actions.append(step.action)
        if step.result is not None:
            return asked, actions, step.result
    raise AssertionError("never ended")


def test_the_blocking_and_the_asyncio_drivers_ask_the_same_things_in_the_same_order() -> None:
    import asyncio

    from airflow_provider_tony.yarn.follower import follow_step, follow_step_async

    asked, actions, result = _follow(follow_step)
    assert asked == [
        ["report"],  # queued: YARN only
        ["report", "am_fetch"],  # just RUNNING: the document too
        ["am_fetch"],  # a live document spares asking YARN
        ["am_fetch", "report", "ack_final"],  # a final document: YARN asked, the verdict acknowledged
        ["am_fetch", "report"],  # the RM is down: the outage is followed through
        ["am_fetch", "report"],  # FINISHED
    ]
    assert actions == [Action.NONE, Action.NONE, Action.NONE, Action.ACK, Action.NONE, Action.DONE]
    assert result is not None and result.succeeded
    awaited = _follow(lambda f, now, t: asyncio.run(follow_step_async(f, now, AsyncRecorder(t))))
    assert awaited == (asked, actions, result)


def test_a_kill_is_a_request_of_the_look_and_its_error_reaches_the_caller() -> None:
    from airflow_provider_tony.yarn.follower import follow_step

    transport = Recorder([report("ACCEPTED"), report("ACCEPTED")], [])
    f = follower()
    follow_step(f, T0, transport)
    step = follow_step(f, T0 + STARTUP + 1, transport)
    assert transport.asked == ["report", "report", "kill"] and step.action is Action.KILL_STARTUP_TIMEOUT

    def refuse(app_id: str) -> None:
        raise ClusterError(f"could not kill {app_id}")

    transport = Recorder([report("ACCEPTED"), report("ACCEPTED")], [])
    transport.kill = refuse  # type: ignore[method-assign]
    f = follower()
    follow_step(f, T0, transport)
    with pytest.raises(ClusterError, match="could not kill"):
        follow_step(f, T0 + STARTUP + 1, transport)
