"""The submitting side's follow policy, as pure logic.

``Follower.observe(report, document, now)`` looks at one YARN report and the
AM's state document (when there is one) at time ``now`` and says what to log
and what to do: nothing yet, kill the application (it never left the queue,
or its AM stopped publishing while YARN says RUNNING), acknowledge the AM's
final document, or stop following with a result. It touches no network and
reads no clock, so every rule gets unit tests with plain numbers, the way
``runtime/state.py``'s ``JobTracker`` does on the AM side; ``TonyClient.poll``
is the thin input/output around it, used by the CLI, the operator and the
trigger alike.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_provider_tony.runtime.constants import RETRYABLE_MARK
from airflow_provider_tony.runtime.errors import ApplicationUnknown, ClusterError, ClusterUnreachable
from airflow_provider_tony.runtime.messages import Message, StateDocument
from airflow_provider_tony.yarn import logformat

__all__ = ["ACTIVE_YARN_STATES", "Action", "AppReport", "Follower", "JobResult", "Step", "TonyEvent"]

ACTIVE_YARN_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
QUEUED_YARN_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED")


@dataclass
class AppReport(Message):
    """What YARN says about one application (from skein's ``ApplicationReport``)."""

    app_id: str
    state: str  # YARN's YarnApplicationState: ACCEPTED, RUNNING, FINISHED, FAILED, KILLED, ...
    final_status: str = "UNDEFINED"  # SUCCEEDED, FAILED, KILLED once ended
    diagnostics: str = ""
    tracking_url: str | None = None
    progress: float = 0.0
    tags: list[str] = field(default_factory=list)
    name: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_YARN_STATES

    @property
    def queued(self) -> bool:
        return self.state in QUEUED_YARN_STATES


@dataclass
class JobResult(Message):
    """How an application ended, as the operator and the CLI report it."""

    app_id: str
    yarn_state: str
    final_status: str
    diagnostics: str = ""
    tracking_url: str | None = None
    am_state: StateDocument | None = None

    def validate(self) -> None:
        if self.am_state is not None and not isinstance(self.am_state, StateDocument):
            self.am_state = StateDocument.from_dict(self.am_state, "am_state")

    @classmethod
    def from_report(cls, rep: AppReport, am_state: StateDocument | None = None) -> JobResult:
        """From the report of an application that has ended."""
        return cls(rep.app_id, rep.state, rep.final_status, rep.diagnostics, rep.tracking_url, am_state)

    @property
    def succeeded(self) -> bool:
        return self.final_status == "SUCCEEDED"

    @property
    def retryable(self) -> bool:
        return RETRYABLE_MARK in (self.diagnostics or "") or bool(self.am_state and self.am_state.retryable)


class Action(str, enum.Enum):
    """What the I/O around the follower does after one look."""

    NONE = "none"  # look again after the poll interval
    KILL_STARTUP_TIMEOUT = "kill-startup-timeout"  # queued past startup_timeout: kill, then fail
    KILL_HUNG_AM = "kill-hung-am"  # RUNNING but the AM's document went stale: kill, then fail
    ACK = "ack"  # the AM published its verdict: tell it a client has read it, look again
    DONE = "done"  # the application ended: stop following

    @property
    def kills(self) -> bool:
        return self in (Action.KILL_STARTUP_TIMEOUT, Action.KILL_HUNG_AM)


@dataclass
class Step:
    """The outcome of one look: lines to log, what to do, and what it ends with."""

    action: Action = Action.NONE
    lines: list[str] = field(default_factory=list)
    result: JobResult | None = None  # set with DONE and with the kills (the result after the kill)
    new_document: StateDocument | None = None  # a state document not seen before (for callbacks)


# An RM restart with work-preserving recovery, or a failover, takes seconds to a few minutes.
RM_OUTAGE_TIMEOUT_S = 600.0


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
    """

    def __init__(
        self,
        app_id: str,
        *,
        startup_timeout: float,
        am_stale_timeout: float,
        report_max_age: float = 60.0,
        rm_outage_timeout: float = RM_OUTAGE_TIMEOUT_S,
    ) -> None:
        self.app_id = app_id
        self.startup_timeout = startup_timeout
        self.am_stale_timeout = am_stale_timeout
        self.report_max_age = report_max_age
        self.rm_outage_timeout = rm_outage_timeout
        self.unreachable_since: float | None = None  # the RM stopped answering (None: it answers)
        self.last_state: str | None = None
        self.last_report: AppReport | None = None
        self.reported_at: float | None = None  # when the last report came from YARN itself
        self.queued_since: float | None = None
        self.last_seq: Any = None
        self.fresh_at: float | None = None  # when RUNNING began or the document last moved
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
        if self.unreachable_since is None:
            self.unreachable_since = now
            step.lines.append(f"{error}; following on (the job keeps running), for up to {self.rm_outage_timeout:g}s")
        elif now - self.unreachable_since > self.rm_outage_timeout:
            raise type(exc)(
                f"{error}, for {now - self.unreachable_since:.0f}s (rm_outage_timeout {self.rm_outage_timeout:g}s)"
            ) from exc
        return step

    def observe(self, report: AppReport, document: StateDocument | None, now: float) -> Step:
        """One look: ``document`` is the AM's state document, None when it could not be read."""
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
                step.result = JobResult(
                    self.app_id,
                    "KILLED",
                    "FAILED",
                    f"{RETRYABLE_MARK} still {report.state} after {self.startup_timeout:g}s (startup_timeout): "
                    "the queue has no room for the application master; killed",
                    report.tracking_url,
                )
            return step
        if report.state == "RUNNING":
            return self._running(report, document, now, step)
        # Ended. The final state document is the richest account; YARN's
        # diagnostics are the durable one.
        step.action = Action.DONE
        step.result = JobResult.from_report(report, self.document)
        return step

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
            step.result = JobResult(
                self.app_id,
                "KILLED",
                "FAILED",
                f"{RETRYABLE_MARK} the application master stopped publishing its state for {silent:.0f}s "
                "while YARN reports RUNNING (hung AM); killed",
                report.tracking_url,
                self.document,
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
