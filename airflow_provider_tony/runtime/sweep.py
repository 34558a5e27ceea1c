"""The AM's side of ``early_stopping``: the sweep folder's curves read, the trial judged, its own curve written.

The rule itself is ``runtime/median_stop.py``; this is its input and output,
kept apart so the AM loop stays thin. The sweep folder is shared by trials of
other users' jobs, any of whose containers may write it, so reading it is
bounded (how many names are looked at, how many files and bytes read per look)
and anything that is not a curve of this rule is ignored. A file is read once:
a finished trial's curve is written under a temporary dot-name and renamed into
place, so a ``<application id>.json`` is complete when it is seen. HDFS trouble
never fails the job: the trial then runs on unjudged, as without the rule.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable
from typing import Any

from airflow_provider_tony.runtime import hdfs_io
from airflow_provider_tony.runtime.median_stop import MAX_CURVE_BYTES, Curve, Rule, curve_document, decide, parse_curve
from airflow_provider_tony.runtime.messages import EarlyStop, Progress
from airflow_provider_tony.runtime.messages_base import finite_number
from airflow_provider_tony.runtime.namenodes import pick
from airflow_provider_tony.runtime.spec_data import EarlyStopping

log = logging.getLogger("tony.sweep")

#: Seconds between two looks at the sweep folder: new finished trials are rare, each look is a NameNode call.
READ_EVERY_S = 5.0
#: Names of the folder looked at per look (sorted): a folder flooded with names costs one bounded listing.
MAX_NAMES = 1000
#: Curves kept: each finished trial's one file.
MAX_CURVES = 500
#: New files read per look; the rest wait for the next look, so one look never blocks the AM for long.
MAX_READS_PER_LOOK = 20


def curve_name(app_id: str) -> str:
    """A finished trial's file in the sweep folder."""
    return f"{app_id}.json"


class SweepWatch:
    """One trial's view of its sweep: the finished trials' curves, the steps judged, where its curve goes.

    :param spec: the job's ``early_stopping`` (enabled).
    :param app_id: this trial's application id (its own file is never read as a finished trial's).
    :param clients: the AM's WebHDFS client, or a ``namenodes.Router`` that picks the sweep's NameNode.
    """

    def __init__(self, spec: EarlyStopping, app_id: str, clients: Callable[[], Any | None]) -> None:
        assert spec.metric is not None and spec.sweep is not None  # EarlyStopping.validate, when enabled
        self.rule = Rule(spec.metric, spec.mode, spec.min_finished, spec.grace_steps)
        self.location = spec.sweep
        self.folder = hdfs_io.hdfs_path(spec.sweep)
        self.app_id = app_id
        self.clients = clients
        self.curves: dict[str, Curve] = {}  # file name -> a finished trial's curve
        self.looked_at: set[str] = set()  # names read once (a curve or not): never read again
        self.last_look: float | None = None
        self.judged_step = -1  # the newest step judged
        self.failures = 0

    def _client(self) -> Any | None:
        client = self.clients()
        return None if client is None else pick(client, self.location)

    def due(self, now: float) -> bool:
        return self.last_look is None or now - self.last_look >= READ_EVERY_S

    def look(self, now: float) -> None:
        """Read the folder's new curve files (bounded); an HDFS error is logged, the curves kept stay."""
        self.last_look = now
        try:
            client = self._client()
            if client is None:
                return
            self._read_new(client)
            self.failures = 0
        except Exception as exc:  # noqa: BLE001 - the rule is advice: training goes on without it
            self.failures += 1
            if self.failures == 1 or self.failures % 60 == 0:
                log.warning("could not read the sweep folder %s (%d in a row): %s", self.folder, self.failures, exc)

    def _read_new(self, client: Any) -> None:
        if not client.status(self.folder, strict=False):
            return
        listing = client.list(self.folder, status=True)
        names = sorted(
            (name, status)
            for name, status in listing
            if isinstance(name, str) and name.endswith(".json") and not name.startswith((".", "_"))
        )[:MAX_NAMES]
        reads = 0
        for name, status in names:
            if name in self.looked_at or name == curve_name(self.app_id) or len(self.curves) >= MAX_CURVES:
                continue
            if reads >= MAX_READS_PER_LOOK:
                break
            self.looked_at.add(name)
            if not isinstance(status, dict):
                continue
            length = status.get("length")
            if status.get("type") != "FILE" or not isinstance(length, int) or length > MAX_CURVE_BYTES:
                continue
            reads += 1
            with client.read(posixpath.join(self.folder, name), length=MAX_CURVE_BYTES + 1) as reader:
                raw = reader.read(MAX_CURVE_BYTES + 1)
            curve = parse_curve(raw, self.rule)
            if curve is None:
                log.info("ignoring %s in the sweep folder: not a curve of %s", name, self.rule.metric)
                continue
            self.curves[name] = curve

    def judge(self, points: list[Progress]) -> EarlyStop | None:
        """The stop, at the first step reported since the last call that is worse than the median; else None.

        Nothing is judged before the folder was read once (a step judged is never judged again).
        """
        if self.last_look is None:
            return None
        curves = list(self.curves.values())
        for point in sorted((p for p in points if p.step is not None), key=lambda p: p.step or 0):
            step = point.step
            assert step is not None
            if step <= self.judged_step:
                continue
            self.judged_step = step
            value = finite_number(point.metrics.get(self.rule.metric))
            if value is None:
                continue
            stop = decide(self.rule, step, value, curves)
            if stop is not None:
                return stop
        return None

    def record(self, curve: Curve) -> str:
        """Write this finished trial's curve as ``<sweep>/<application id>.json``: a temporary name, then a rename.

        Returns the path written; raises when HDFS refuses (the caller logs it).
        """
        client = self._client()
        if client is None:
            raise RuntimeError("the application master has no WebHDFS client")
        final = posixpath.join(self.folder, curve_name(self.app_id))
        tmp = posixpath.join(self.folder, f".{curve_name(self.app_id)}.tmp")  # a dot-name: readers skip it
        hdfs_io.replace_file(client, final, curve_document(self.app_id, self.rule, curve), tmp)
        return final


__all__ = ["MAX_CURVES", "MAX_NAMES", "MAX_READS_PER_LOOK", "READ_EVERY_S", "SweepWatch", "curve_name"]
