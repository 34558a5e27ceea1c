"""The submitting side's follow policy, as pure logic.

``Follower.observe(report, document, now)`` looks at one YARN report and the
AM's state document (when there is one) at time ``now`` and says what to log
and what to do: nothing yet, kill the application (it never left the queue,
or its AM stopped publishing while YARN says RUNNING), acknowledge the AM's
final document, or stop following with a result. It touches no network and
reads no clock, so every rule gets unit tests with plain numbers, the way
``runtime/state.py``'s ``JobTracker`` does on the AM side.

``Follower.look(now)`` is one look as a sequence of ``Request``s (read the
AM's document, ask YARN for its report, acknowledge, kill) written once, with
no I/O: a generator that is sent each answer. ``follow_step_async`` is its one
driver, answering each request from an ``AsyncTransport`` (``yarn/http.py``'s,
on the triggerer's event loop); ``follow_step`` runs that same driver over a
blocking ``Transport`` (``TonyClient``: the CLI and the operator). Neither
the look nor the driver knows how the bytes are fetched.
"""

from __future__ import annotations

import enum
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from airflow_provider_tony.runtime.constants import RETRYABLE_MARK
from airflow_provider_tony.runtime.errors import AmUnreachable, ApplicationUnknown, ClusterError, ClusterUnreachable
from airflow_provider_tony.runtime.messages import Cost, Failure, Message, StateDocument
from airflow_provider_tony.yarn import logformat
from airflow_provider_tony.yarn.am_node import AmNode

__all__ = [
    "ACTIVE_YARN_STATES",
    "Action",
    "AmUnreachable",
    "AppReport",
    "AsyncTransport",
    "Follower",
    "JobResult",
    "Look",
    "Request",
    "Step",
    "TonyEvent",
    "Transport",
    "follow_step",
    "follow_step_async",
]

ACTIVE_YARN_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
QUEUED_YARN_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED")


@dataclass
class AppReport(Message):
    """What YARN says about one application: the ResourceManager's REST report (``/ws/v1/cluster/apps``),
    parsed by ``yarn/http.py``'s ``parse_app_report``; ``progress`` is 0..1."""

    app_id: str
    state: str  # YARN's YarnApplicationState: ACCEPTED, RUNNING, FINISHED, FAILED, KILLED, ...
    final_status: str = "UNDEFINED"  # SUCCEEDED, FAILED, KILLED once ended
    diagnostics: str = ""
    tracking_url: str | None = None
    progress: float = 0.0
    tags: list[str] = field(default_factory=list)
    name: str = ""
    cost: Cost | None = None  # the resource-seconds YARN counted so far (final once the application ended)

    def validate(self) -> None:
        if self.cost is not None and not isinstance(self.cost, Cost):
            self.cost = Cost.from_dict(self.cost, "cost")

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_YARN_STATES

    @property
    def queued(self) -> bool:
        return self.state in QUEUED_YARN_STATES


#: ``Failure.kind`` of the follower's own kills, and of an application YARN ended without the AM's account.
KIND_STARTUP_TIMEOUT = "startup_timeout"
KIND_HUNG_AM = "hung_am"
KIND_AM_NODE_LOST = "am_node_lost"
KIND_YARN = "yarn"


def yarn_diagnostics_failure(diagnostics: str) -> Failure:
    """The failure YARN's diagnostics tell of: the one place the retryable mark is read.

    The AM states its verdict as a typed ``Failure`` in its state document; it
    also writes the mark into the diagnostics it leaves with YARN
    (``state.final_diagnostics``), the only account left of an application
    whose AM died, or whose document could not be read, before a client saw it.
    """
    return Failure(kind=KIND_YARN, retryable=RETRYABLE_MARK in diagnostics, message=diagnostics)


@dataclass
class JobResult(Message):
    """How an application ended, as the operator and the CLI report it.

    ``failure`` is the typed cause of an unsuccessful end (None on success):
    the AM's own when its document has one, else read from YARN's diagnostics
    once, here (``yarn_diagnostics_failure``).
    """

    app_id: str
    yarn_state: str
    final_status: str
    diagnostics: str = ""
    tracking_url: str | None = None
    am_state: StateDocument | None = None
    failure: Failure | None = None
    cost: Cost | None = None  # from the ResourceManager's final report; None where YARN no longer had it

    def validate(self) -> None:
        if self.am_state is not None and not isinstance(self.am_state, StateDocument):
            self.am_state = StateDocument.from_dict(self.am_state, "am_state")
        if self.cost is not None and not isinstance(self.cost, Cost):
            self.cost = Cost.from_dict(self.cost, "cost")
        if self.failure is not None and not isinstance(self.failure, Failure):
            self.failure = Failure.from_dict(self.failure, "failure")
        if self.failure is None and not self.succeeded:
            self.failure = self._failure_of_end()

    def _failure_of_end(self) -> Failure:
        doc = self.am_state
        if doc is not None and doc.failure is not None:
            return doc.failure
        failure = yarn_diagnostics_failure(self.diagnostics or "")
        # An AM older than the typed ``failure`` said retryable in its document only.
        failure.retryable = failure.retryable or bool(doc is not None and doc.retryable)
        return failure

    @classmethod
    def from_report(cls, rep: AppReport, am_state: StateDocument | None = None) -> JobResult:
        """From the report of an application that has ended."""
        return cls(rep.app_id, rep.state, rep.final_status, rep.diagnostics, rep.tracking_url, am_state, cost=rep.cost)

    @property
    def succeeded(self) -> bool:
        return self.final_status == "SUCCEEDED"

    @property
    def retryable(self) -> bool:
        return self.failure is not None and self.failure.retryable


class Action(str, enum.Enum):
    """What the I/O around the follower does after one look."""

    NONE = "none"  # look again after the poll interval
    KILL_STARTUP_TIMEOUT = "kill-startup-timeout"  # queued past startup_timeout: kill, then fail
    KILL_HUNG_AM = "kill-hung-am"  # RUNNING but the AM's document went stale: kill, then fail
    KILL_AM_NODE_LOST = "kill-am-node-lost"  # the proxy cannot reach the AM and its node is gone: kill, then fail
    ACK = "ack"  # the AM published its verdict: tell it a client has read it, look again
    DONE = "done"  # the application ended: stop following

    @property
    def kills(self) -> bool:
        return self in (Action.KILL_STARTUP_TIMEOUT, Action.KILL_HUNG_AM, Action.KILL_AM_NODE_LOST)


@dataclass
class Step:
    """The outcome of one look: lines to log, what to do, and what it ends with."""

    action: Action = Action.NONE
    lines: list[str] = field(default_factory=list)
    result: JobResult | None = None  # set with DONE and with the kills (the result after the kill)
    new_document: StateDocument | None = None  # a state document not seen before (for callbacks)


# An RM restart with work-preserving recovery, or a failover, takes seconds to a few minutes.
RM_OUTAGE_TIMEOUT_S = 600.0
#: Seconds the proxy may fail to reach a RUNNING application's AM before its node is looked at: longer
#: than an AM's own start (its web server comes up seconds after YARN says RUNNING) would need to be
#: checked often, short enough that a lost node is named within 30 s at a 5 s poll interval.
AM_UNREACHABLE_TIMEOUT_S = 15.0


class Follower:
    """Memory of one application while it is followed, and the rules applied to it.

    :param app_id: the YARN application id.
    :param startup_timeout: seconds the application may stay queued (NEW .. ACCEPTED) before it is
        killed: the queue has no room for its application master.
    :param am_stale_timeout: seconds without a new state document (its ``seq`` unchanged) while YARN
        says RUNNING before the AM counts as hung and the application is killed. The clock starts
        when the application is first seen RUNNING, not when following began.
    :param report_max_age: while the AM serves a live document, YARN's report is asked for at
        least this often (see ``report_from_document``).
    :param rm_outage_timeout: seconds the ResourceManager may stay unreachable (a restart, a
        failover) before following gives up with ``ClusterUnreachable``. The job keeps running
        meanwhile (work-preserving recovery); the outage counts toward neither timeout above.
    :param am_unreachable_timeout: seconds the RM's proxy may answer that it cannot reach the AM
        (``AmUnreachable``) before the AM container's node is looked at (``Request.AM_NODE``): a node
        the RM reports lost, or whose NodeManager refuses connections, ends the follow at once with
        ``am_node_lost`` (retryable), long before ``am_stale_timeout``, and on a production RM long
        before the node's liveness expires. An AM that answers but publishes nothing new is
        still judged by ``am_stale_timeout`` alone.
    :param queued_since: the start-up clock's start, on the clock ``now`` is read from, when a
        previous follower of the same application began it (a restarted trigger); None starts it
        at the first look that finds the application queued.
    :param heard_at: likewise the stale-AM clock's start (the AM last heard from); None starts it
        when the application is first seen RUNNING.
    """

    def __init__(
        self,
        app_id: str,
        *,
        startup_timeout: float,
        am_stale_timeout: float,
        report_max_age: float = 60.0,
        rm_outage_timeout: float = RM_OUTAGE_TIMEOUT_S,
        am_unreachable_timeout: float = AM_UNREACHABLE_TIMEOUT_S,
        queued_since: float | None = None,
        heard_at: float | None = None,
    ) -> None:
        self.app_id = app_id
        self.startup_timeout = startup_timeout
        self.am_stale_timeout = am_stale_timeout
        self.report_max_age = report_max_age
        self.rm_outage_timeout = rm_outage_timeout
        self.am_unreachable_timeout = am_unreachable_timeout
        self.am_unreachable_since: float | None = None  # the proxy began failing to reach the AM
        self.am_unreachable_why = ""
        self.unreachable_since: float | None = None  # the RM stopped answering (None: it answers)
        self.last_state: str | None = None
        self.last_report: AppReport | None = None
        self.reported_at: float | None = None  # when the last report came from YARN itself
        self.queued_since = queued_since  # when the start-up clock began (None: at the first queued look)
        self.last_seq: Any = None
        self.fresh_at = heard_at  # when RUNNING began or the document last moved (None: not yet)
        self.document: StateDocument | None = None  # the newest one read
        self.task_states: dict[str, str] = {}  # task id -> the state last logged
        self.events_seen: set[str] = set()

    @property
    def wants_document_first(self) -> bool:
        """Once RUNNING, read the AM's document first: it may spare asking YARN."""
        return self.last_state == "RUNNING"

    def report_from_document(self, document: StateDocument | None, now: float) -> AppReport | None:
        """YARN's last RUNNING report, still true, when the AM just served a live document; else None.

        An AM that serves its document through the RM's proxy is running: the
        proxy reaches only a RUNNING application's AM, and one that was
        killed, ended or lost its container no longer answers. So while the
        document keeps coming and has no verdict, asking YARN as well would
        only repeat RUNNING; it is asked when the document is missing or
        final, and at least every ``report_max_age`` seconds. This halves
        the requests of following (its cost, on the triggerer).
        """
        rep = self.last_report
        if (
            document is None
            or document.final
            or rep is None
            or rep.state != "RUNNING"
            or self.reported_at is None
            or now - self.reported_at >= self.report_max_age
        ):
            return None
        return rep

    def unreachable(self, exc: ClusterError, now: float) -> Step:
        """YARN's report could not be had: follow on through an outage, up to ``rm_outage_timeout``.

        An outage is an RM that does not answer (``ClusterUnreachable``), or
        that answers "unknown application" right after one (a restarted RM
        serves REST before it has recovered its applications). Any other
        error, or an outage that lasts longer, is raised. The RM's proxy is
        down with the RM, so the AM's document is not read either: the
        hung-AM clock is paused (see ``observe``), not run down.
        """
        recovering = isinstance(exc, ApplicationUnknown) and self.unreachable_since is not None
        if not isinstance(exc, ClusterUnreachable) and not recovering:
            raise exc
        error = str(exc)
        step = Step()
        self.am_unreachable_since = None  # the proxy is the RM's: whether the AM answers is unknown meanwhile
        if self.unreachable_since is None:
            self.unreachable_since = now
            step.lines.append(f"{error}; following on (the job keeps running), for up to {self.rm_outage_timeout:g}s")
        elif now - self.unreachable_since > self.rm_outage_timeout:
            raise type(exc)(
                f"{error}, for {now - self.unreachable_since:.0f}s (rm_outage_timeout {self.rm_outage_timeout:g}s)"
            ) from exc
        return step

    def observe(
        self, report: AppReport, document: StateDocument | None, now: float, am_unreachable: str | None = None
    ) -> Step:
        """One look: ``document`` is the AM's state document, None when it could not be read.

        ``am_unreachable`` is the proxy's answer when it could not reach the AM
        (``AmUnreachable``): it starts (or keeps) the unreachable-AM clock that
        ``node_check_due`` reads; any other look stops it.
        """
        step = Step()
        if self.unreachable_since is not None:  # the RM answers again: the outage was nobody's fault
            outage = now - self.unreachable_since
            step.lines.append(f"the ResourceManager answers again after {outage:.0f}s")
            self.unreachable_since = None
            self.fresh_at = None if self.fresh_at is None else now
            self.queued_since = None if self.queued_since is None else self.queued_since + outage
        if report is not self.last_report:  # a fresh one from YARN, not ``report_from_document``'s
            self.last_report, self.reported_at = report, now
        if report.state != self.last_state:
            step.lines.append(f"{self.app_id} is {report.state} ({report.tracking_url})")
            self.last_state = report.state
        if report.queued:
            self.queued_since = self.queued_since if self.queued_since is not None else now
            waited = now - self.queued_since
            if waited > self.startup_timeout:
                step.action = Action.KILL_STARTUP_TIMEOUT
                step.result = _killed(
                    report,
                    None,
                    KIND_STARTUP_TIMEOUT,
                    f"still {report.state} after {self.startup_timeout:g}s (startup_timeout): "
                    "the queue has no room for the application master; killed",
                )
            return step
        if report.state == "RUNNING":
            self._track_reach(document, am_unreachable, now)
            return self._running(report, document, now, step)
        self.am_unreachable_since = None
        # Ended. The final state document is the richest account; YARN's
        # diagnostics are the durable one.
        step.action = Action.DONE
        step.result = JobResult.from_report(report, self.document)
        return step

    def look(self, now: float) -> Look:
        """One look at ``now`` as the requests it needs, answered one by one by a transport.

        The AM's document first once RUNNING (its live answer spares asking
        YARN, see ``report_from_document``), YARN's report otherwise, and the
        document again when the application has just started running. A
        ``ClusterError`` thrown in for the report is an outage to follow
        through (``unreachable``). The look ends by acknowledging a final
        document or killing, as ``observe`` decides, and returns its ``Step``.
        """
        document: StateDocument | None = None
        why: str | None = None
        if self.wants_document_first:
            document, why = yield from self._fetch()
        report = self.report_from_document(document, now)
        if report is None:
            try:
                report = yield Request.REPORT
            except ClusterError as exc:
                return self.unreachable(exc, now)  # raises unless it is an outage to wait out
            if report.state == "RUNNING" and not self.wants_document_first:  # just started running
                document, why = yield from self._fetch()
        step = self.observe(report, document, now, why)
        if self.node_check_due(step, now):
            try:
                node = yield Request.AM_NODE
            except ClusterError as exc:  # the RM could not say: no verdict from a missing fact
                step.lines.append(f"could not look at the AM's node: {exc}")
            else:
                self.judge_node(step, report, node, now)
        if step.action is Action.ACK:
            yield Request.ACK
        elif step.action.kills:
            yield Request.KILL
        return step

    def _fetch(self) -> Generator[Request, Any, tuple[StateDocument | None, str | None]]:
        """The AM's document, or why the proxy could not reach the AM (``AmUnreachable``)."""
        try:
            return (yield Request.STATE), None
        except AmUnreachable as exc:
            return None, str(exc)

    def _track_reach(self, document: StateDocument | None, why: str | None, now: float) -> None:
        if why is None or document is not None:
            self.am_unreachable_since = None
        elif self.am_unreachable_since is None:
            self.am_unreachable_since, self.am_unreachable_why = now, why

    def node_check_due(self, step: Step, now: float) -> bool:
        """Whether to look at the AM's node: the proxy has failed to reach the AM long enough.

        Asked only while the application runs and nothing else ended this look,
        a hung-AM kill excepted: a lost node is the truer name for it.
        """
        return (
            step.action in (Action.NONE, Action.KILL_HUNG_AM)
            and self.am_unreachable_since is not None
            and now - self.am_unreachable_since >= self.am_unreachable_timeout
        )

    def judge_node(self, step: Step, report: AppReport, node: AmNode, now: float) -> None:
        """End the follow with ``am_node_lost`` when the AM's node is gone; otherwise leave ``step`` be."""
        if not node.lost:
            return
        since = self.am_unreachable_since or 0.0
        step.action = Action.KILL_AM_NODE_LOST
        step.result = _killed(
            report,
            self.document,
            KIND_AM_NODE_LOST,
            f"the application master's node {node.node_id} was lost: {node.describe()}, and the "
            f"ResourceManager's proxy could not reach the AM ({self.am_unreachable_why}) "
            f"for {now - since:.0f}s; killed",
        )

    def _running(self, report: AppReport, document: StateDocument | None, now: float, step: Step) -> Step:
        if self.fresh_at is None:
            self.fresh_at = now  # the AM process starts after YARN says RUNNING: give it the full timeout
        if document is not None:
            self.document = document
            if document.seq != self.last_seq:
                self.last_seq, self.fresh_at = document.seq, now
                step.new_document = document
            step.lines.extend(self._progress_lines(document))
            if document.final:
                step.action = Action.ACK
        silent = now - self.fresh_at
        if silent > self.am_stale_timeout:
            step.action = Action.KILL_HUNG_AM
            step.result = _killed(
                report,
                self.document,
                KIND_HUNG_AM,
                f"the application master stopped publishing its state for {silent:.0f}s "
                "while YARN reports RUNNING (hung AM); killed",
            )
        return step

    def _progress_lines(self, doc: StateDocument) -> list[str]:
        """New artefact events, a line per task whose state changed, and the poll's summary line."""
        lines = []
        for event in doc.artefact_events():  # restores, checkpoint uploads, model export
            if event not in self.events_seen:
                self.events_seen.add(event)
                lines.append(logformat.shown(event))
        lines.extend(logformat.task_state_lines(doc, self.task_states))
        lines.append(logformat.summary_line(doc))
        return lines


def _killed(report: AppReport, document: StateDocument | None, kind: str, message: str) -> JobResult:
    """The result of a kill the follower decided: retryable (the cluster's state, not the job's code)."""
    failure = Failure(kind=kind, retryable=True, message=message)
    return JobResult(
        report.app_id, "KILLED", "FAILED", f"{RETRYABLE_MARK} {message}", report.tracking_url, document, failure
    )


class Request(str, enum.Enum):
    """What one look asks of the cluster; the answer is sent back into the look."""

    STATE = "am_fetch"  # the AM's state document, None while it serves none; AmUnreachable thrown in when the
    # proxy answers that it cannot reach the AM
    AM_NODE = "am_node"  # where the AM runs and whether that node is gone (``yarn/am_node.py``'s ``AmNode``)
    REPORT = "report"  # YARN's AppReport; a ClusterError is thrown in instead when YARN could not be asked
    ACK = "ack_final"  # tell the AM a client has read its final document (answer: None)
    KILL = "kill"  # kill the application (answer: None)


#: One look: yields ``Request``s, is sent their answers, returns the ``Step``.
Look = Generator[Request, Any, Step]


class Transport(Protocol):
    """The blocking I/O a look needs (``TonyClient`` is one); a method per ``Request``, named by its value."""

    def am_fetch(self, app_id: str) -> StateDocument | None: ...
    def am_node(self, app_id: str) -> AmNode: ...
    def report(self, app_id: str) -> AppReport: ...
    def ack_final(self, app_id: str) -> None: ...
    def kill(self, app_id: str) -> None: ...


class AsyncTransport(Protocol):
    """``Transport`` on an event loop (``yarn/http.py``'s ``AsyncFollowTransport``)."""

    async def am_fetch(self, app_id: str) -> StateDocument | None: ...
    async def am_node(self, app_id: str) -> AmNode: ...
    async def report(self, app_id: str) -> AppReport: ...
    async def ack_final(self, app_id: str) -> None: ...
    async def kill(self, app_id: str) -> None: ...


def _advance(look: Look, answer: object) -> tuple[Request | None, Step | None]:
    """Send ``answer`` into the look (an exception is thrown in): its next request, or its step once done."""
    try:
        return (look.throw(answer) if isinstance(answer, BaseException) else look.send(answer)), None
    except StopIteration as done:
        return None, done.value


async def follow_step_async(follower: Follower, now: float, transport: AsyncTransport) -> Step:
    """One look through ``follower``, its requests answered by ``transport``: the one driver of a look."""
    look = follower.look(now)
    request, step = _advance(look, None)
    while request is not None:
        try:
            answer: object = await getattr(transport, request.value)(follower.app_id)
        except ClusterError as exc:  # the look decides: an outage to follow through, or raised again
            answer = exc
        request, step = _advance(look, answer)
    assert step is not None
    return step


class _Blocking:
    """A blocking ``Transport`` as an ``AsyncTransport`` whose calls never suspend."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.transport, name)

        async def call(app_id: str) -> Any:
            return method(app_id)

        return call


def follow_step(follower: Follower, now: float, transport: Transport) -> Step:
    """``follow_step_async`` with blocking calls, run to its end without an event loop.

    Nothing in the look awaits anything but the transport, and a blocking
    transport's calls return at once, so the coroutine finishes on its first
    ``send``: the operator's and the CLI's follow loop is the trigger's.
    """
    coroutine = follow_step_async(follower, now, _Blocking(transport))
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a blocking transport suspended the look")


@dataclass
class TonyEvent(Message):
    """The one event ``TonyTrigger`` yields, as primitives (``to_dict``) for Airflow's database.

    ``status`` is ``done`` with ``result`` (the operator decides success from it),
    or ``error`` with ``message`` when following failed (the cluster could not be asked).
    """

    DONE: ClassVar[str] = "done"
    ERROR: ClassVar[str] = "error"

    status: str
    app_id: str
    message: str = ""
    result: JobResult | None = None

    def validate(self) -> None:
        if self.result is not None and not isinstance(self.result, JobResult):
            self.result = JobResult.from_dict(self.result, "result")

    @classmethod
    def done(cls, result: JobResult) -> TonyEvent:
        return cls(cls.DONE, result.app_id, result=result)

    @classmethod
    def error(cls, app_id: str, message: str) -> TonyEvent:
        return cls(cls.ERROR, app_id, message=message)
