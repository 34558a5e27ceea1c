"""The quality gate's edges (``runtime/gate.py``) that mutation testing found unguarded.

Most tests drive :func:`gate.apply` on the fake HDFS as the operator and
``tony submit`` do: a re-judged rejected model, a record without a figure,
the third promotion (each version folder stays as it was published), a
published model judged again, a candidate without metadata, a ``model_dir``
spelled as a URL with a trailing slash. The rest pin what readers depend on:
the record's file format, the size limits on what is read, the words that
say which side of the published figure a model is.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime import gate, hdfs_io
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.messages import MAX_HISTORY_BYTES, GateResult, JobHistory, Progress
from airflow_provider_tony.runtime.spec import JobSpec, QualityGate
from tests.unit.support.gate import MODEL, OTHER_APP, export, model_bytes, spec
from tests.unit.support.hdfs import FakeHdfs
from tests.unit.support.operator import APP

RECORD = "/user/airflow/models/digits-published.json"
THIRD = "application_1700000000000_0043"


def _write_record(hdfs: FakeHdfs, metrics: dict[str, object]) -> None:
    record = gate.ModelRecord(OTHER_APP, 60, metrics, gate.version_dir(MODEL, OTHER_APP), 100.0)
    hdfs.write(RECORD, data=record.to_json(), overwrite=True)


def _published_bytes(hdfs: FakeHdfs) -> bytes:
    """The bytes of the model the test's own record (``RECORD``) names as published."""
    published = gate.read_record(hdfs, RECORD)
    assert published is not None, "nothing is published"
    return model_bytes(hdfs, published.model_dir)


def test_a_rejected_model_stays_rejected_when_judged_again_after_the_record_is_fixed(tmp_path: Path) -> None:
    """The refusal says "fix or remove the record"; a re-attached task judging again must not publish then."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    assert gate.apply(hdfs, spec(record=RECORD), OTHER_APP).passed
    _write_record(hdfs, {"val_accuracy": "0.9"})  # a hand-edited record: text, no figure
    export(hdfs, tmp_path, APP, 0.95)
    refused = gate.apply(hdfs, spec(record=RECORD), APP)
    assert not refused.passed and "has no numeric 'val_accuracy'" in refused.reason
    _write_record(hdfs, {"val_accuracy": 0.5})  # fixed: the rejected model would now pass
    again = gate.apply(hdfs, spec(record=RECORD), APP)
    assert not again.passed and again.model_dir == gate.rejected_dir(MODEL, APP)
    assert _published_bytes(hdfs) == OTHER_APP.encode(), "the published model stayed in place"
    assert model_bytes(hdfs, gate.rejected_dir(MODEL, APP)) == APP.encode(), "the rejected one stayed aside"
    assert hdfs.status(gate.version_dir(MODEL, APP), strict=False) is None, "the rejected one was never published"


def test_a_record_without_a_numeric_figure_is_no_first_model(tmp_path: Path) -> None:
    """A record that exists but holds no figure refuses, however good the candidate: it is not "no model yet"."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.9)
    assert gate.apply(hdfs, spec(record=RECORD), OTHER_APP).passed
    _write_record(hdfs, {"accuracy": 0.9})  # another metric's name only
    export(hdfs, tmp_path, APP, 0.1)
    verdict = gate.apply(hdfs, spec(record=RECORD), APP)
    assert not verdict.passed and verdict.previous is None
    assert RECORD in verdict.reason and "has no numeric 'val_accuracy'; fix or remove the record" in verdict.reason
    assert verdict.previous_application_id == OTHER_APP
    assert _published_bytes(hdfs) == OTHER_APP.encode(), "the worse model was not published"
    assert verdict.model_dir == gate.rejected_dir(MODEL, APP)


def test_the_third_promotion_leaves_every_earlier_version_as_it_was(tmp_path: Path) -> None:
    """Each promotion adds one never-changing version folder and switches the pointer: nothing nested, nothing lost."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    apps = (OTHER_APP, APP, THIRD)
    for app, accuracy in zip(apps, (0.8, 0.85, 0.9), strict=True):
        export(hdfs, tmp_path, app, accuracy)
        verdict = gate.apply(hdfs, spec(), app)
        assert verdict.passed and verdict.model_dir == gate.version_dir(MODEL, app), verdict.reason
        assert model_bytes(hdfs) == app.encode()
    for app in apps:
        assert model_bytes(hdfs, gate.version_dir(MODEL, app)) == app.encode()
        assert hdfs.tree(gate.version_dir(MODEL, app)).keys() == {"saved_model.pb", gate.MODEL_METADATA}
    pointer = gate.read_record(hdfs, gate.record_path(spec()))
    assert pointer is not None and pointer.application_id == THIRD


# --------------------------------------------------------------------------- judging again, odd candidates


def test_judging_a_published_model_again_reports_its_publication(tmp_path: Path) -> None:
    """A re-attached task (a worker restart) judges again: the verdict must still name the published folder,
    the figure and the gate, since the XCom, the asset event and the log are built from it."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, APP, 0.3)
    first = gate.apply(hdfs, spec(mode="min"), APP)
    again = gate.apply(hdfs, spec(mode="min"), APP)
    assert (again.passed, again.metric, again.mode, again.value) == (True, "val_accuracy", "min", 0.3)
    assert again.model_dir == first.model_dir == gate.version_dir(MODEL, APP)
    assert again.reason == "already published by this application"
    # A pointer written without model_dir (by hand, or by an older release) still names the version folder.
    pointer = gate.record_path(spec())
    hdfs.write(pointer, data=gate.ModelRecord(APP, 60, {"val_accuracy": 0.3}).to_json(), overwrite=True)
    assert gate.apply(hdfs, spec(mode="min"), APP).model_dir == gate.version_dir(MODEL, APP)


def test_a_verdict_names_the_gate_and_a_first_model_has_no_previous_one(tmp_path: Path) -> None:
    """The verdict is what the XCom and the job page show: the gate's metric and mode, and for a first model
    no previous folder or application (not some placeholder a DAG would try to read)."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, OTHER_APP, 0.3)
    first = gate.apply(hdfs, spec(mode="min"), OTHER_APP)
    assert first.passed and (first.metric, first.mode) == ("val_accuracy", "min")
    assert (first.previous, first.previous_model_dir, first.previous_application_id) == (None, "", "")
    pointer = gate.published_record(hdfs, spec())
    assert pointer is not None and pointer.step == 60, "the published record keeps the step the model was made at"
    export(hdfs, tmp_path, APP, 0.4)
    worse = gate.apply(hdfs, spec(mode="min"), APP)
    assert not worse.passed and (worse.metric, worse.mode) == ("val_accuracy", "min")


def test_no_model_is_a_failed_verdict_of_this_gate(tmp_path: Path) -> None:
    hdfs = FakeHdfs(tmp_path / "hdfs")
    nothing = gate.apply(hdfs, spec(mode="min"), APP)
    assert (nothing.passed, nothing.metric, nothing.mode) == (False, "val_accuracy", "min")


def test_a_candidate_without_its_metadata_is_set_aside_not_published(tmp_path: Path) -> None:
    """A model folder without ``tony-model.json`` (the script wrote the folder some other way) has no figure:
    it fails like a model that reported none, and is kept aside for a person to look at."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    candidate = gate.candidate_dir(MODEL, APP)
    hdfs.write(f"{candidate}/saved_model.pb", data=APP.encode())
    verdict = gate.apply(hdfs, spec(), APP)
    assert not verdict.passed and "reported no numeric 'val_accuracy'" in verdict.reason
    assert verdict.model_dir == gate.rejected_dir(MODEL, APP)
    assert model_bytes(hdfs, gate.rejected_dir(MODEL, APP)) == APP.encode()


def test_a_candidate_whose_metadata_lacks_the_application_is_published_under_this_one(tmp_path: Path) -> None:
    """The pointer must name the application that published, or judging it again would not recognise its own
    publication (and would judge the model against itself)."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    candidate = gate.candidate_dir(MODEL, APP)
    hdfs.write(f"{candidate}/saved_model.pb", data=APP.encode())
    anonymous = gate.ModelRecord("", 60, {"val_accuracy": 0.9})
    hdfs.write(f"{candidate}/{gate.MODEL_METADATA}", data=anonymous.to_json())
    assert gate.apply(hdfs, spec(), APP).passed
    pointer = gate.published_record(hdfs, spec())
    assert pointer is not None and pointer.application_id == APP
    assert gate.apply(hdfs, spec(), APP).reason == "already published by this application"


def test_a_publication_is_stamped_with_the_time_it_happened(tmp_path: Path) -> None:
    """Without ``now`` (as the operator and ``tony submit`` call it) the record says when it was published."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, APP, 0.9)
    before = time.time()
    assert gate.apply(hdfs, spec(), APP).passed
    pointer = gate.published_record(hdfs, spec())
    assert pointer is not None and pointer.published_at is not None
    assert before <= pointer.published_at <= time.time()


def test_a_model_dir_spelled_as_a_url_with_a_trailing_slash_publishes_beside_it(tmp_path: Path) -> None:
    """``hdfs://nn:8020/.../TFX/`` and ``/.../TFX`` are one folder: the candidate, the versions, the lock and the
    rejected copy sit beside it (a name ending in X keeps it), and nothing is created at the folder itself."""
    hdfs = FakeHdfs(tmp_path / "hdfs")
    tfx = "/user/airflow/models/TFX"
    url = f"hdfs://nn:8020{tfx}/"
    assert gate.candidate_dir(url, APP) == f"{tfx}.candidate-{APP}"
    assert gate.rejected_dir(url, APP) == f"{tfx}.rejected-{APP}"
    assert gate.versions_dir(url) == f"{tfx}.versions"
    assert gate.lock_path(url) == f"{tfx}.lock"
    job = JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"model_dir": url},
            "quality_gate": {"metric": "val_accuracy"},
        }
    )
    candidate = gate.candidate_dir(url, APP)
    hdfs.write(f"{candidate}/saved_model.pb", data=APP.encode())
    hdfs.write(f"{candidate}/{gate.MODEL_METADATA}", data=gate.ModelRecord(APP, 1, {"val_accuracy": 0.9}).to_json())
    verdict = gate.apply(hdfs, job, APP)
    assert verdict.passed and verdict.model_dir == f"{tfx}.versions/{APP}", verdict.reason
    assert hdfs.status(tfx, strict=False) is None, "no folder appears at model_dir itself"
    assert hdfs.status(f"{tfx}.lock", strict=False) is None, "the lock is released"


# --------------------------------------------------------------------------- the judgement's words


@pytest.mark.parametrize(
    ("mode", "value", "previous", "words"),
    [
        ("max", 0.9, 0.8, "at least"),
        ("max", 0.7, 0.8, "below"),
        ("min", 0.3, 0.4, "at most"),
        ("min", 0.5, 0.4, "above"),
    ],
)
def test_the_reason_says_which_side_of_the_published_figure_the_model_is(
    mode: str, value: float, previous: float, words: str
) -> None:
    """The reason is the task's failure message and the page's line: "below" for a worse model under ``max``
    is the whole point of it, so the relation word is pinned for each mode and outcome."""
    _ok, reason = gate.judge(QualityGate(metric="m", mode=mode), value, previous)
    assert f"m={value:g} is {words} the published model's {previous:g} ({mode} is better)" in reason


@pytest.mark.parametrize("mode", ["max", "min"])
def test_a_tie_is_not_a_pass_by_tolerance(mode: str) -> None:
    """A tie is "at least as good": it passes on its own, and must not ask a person to approve it."""
    rule = QualityGate(metric="m", mode=mode, tolerance=0.1)
    assert gate.judge(rule, 0.8, 0.8)[0] is True
    assert gate.within_tolerance(rule, 0.8, 0.8) is False


# --------------------------------------------------------------------------- the record's file format


def test_a_record_comes_back_as_written_in_stable_readable_json() -> None:
    """The pointer is where readers take the published model from, and people read it with ``hdfs dfs -cat``:
    every field survives the round trip, the format is versioned, and one record is always the same bytes."""
    record = gate.ModelRecord(APP, 60, {"val_accuracy": 0.9, "loss": 0.1}, gate.version_dir(MODEL, APP), 100.5)
    raw = record.to_json()
    assert gate.ModelRecord.from_json(raw) == record
    assert json.loads(raw)["format"] == 1
    same = gate.ModelRecord(APP, 60, {"loss": 0.1, "val_accuracy": 0.9}, record.model_dir, 100.5)
    assert same.to_json() == raw, "the metrics' order does not change the bytes"
    assert len(raw.decode().splitlines()) > 6, "one field a line, for a person reading it"


def test_a_record_missing_or_mistyping_fields_reads_as_unknown() -> None:
    """A hand-written or older record: absent fields are empty, and a step or time of the wrong type is none
    (not a text step a reader would compare as a number)."""
    assert gate.ModelRecord.from_json(b"{}") == gate.ModelRecord("", None, {}, "", None)
    for step in ("60", True, 1.5):
        assert gate.ModelRecord.from_json(json.dumps({"step": step}).encode()).step is None, step  # type: ignore[union-attr]
    assert gate.ModelRecord.from_json(b'{"published_at": "yesterday"}').published_at is None  # type: ignore[union-attr]


def test_the_executors_record_carries_the_last_report_and_the_target() -> None:
    record = gate.model_record(APP, Progress(step=7, metrics={"val_accuracy": 0.93}), MODEL)
    assert (record.application_id, record.step, record.metrics, record.model_dir) == (
        APP,
        7,
        {"val_accuracy": 0.93},
        MODEL,
    )
    nothing = gate.model_record(APP, None)  # the script never reported
    assert (nothing.step, nothing.metrics, nothing.model_dir) == (None, {}, "")


# --------------------------------------------------------------------------- what is read, and how much


class _Endless:
    """A file that never ends: ``read(n)`` gives n bytes; reading it to its end would never return."""

    def read(self, size: int | None = None) -> bytes:
        assert isinstance(size, int) and size >= 0, "read to the end of an endless file"
        return b" " * size


class MemoryHdfs:
    """``status``/``read``/``write`` over a dict; a ``None`` file is endless (a runaway writer's)."""

    def __init__(self, files: dict[str, bytes | None]) -> None:
        self.files = files

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        return {"type": "FILE"} if path in self.files else None

    @contextmanager
    def read(self, path: str) -> Iterator[Any]:
        data = self.files[path]
        yield _Endless() if data is None else io.BytesIO(data)

    def write(self, path: str, data: bytes, overwrite: bool = False) -> None:
        self.files[path] = data


def _padded(doc: dict[str, Any], size: int) -> bytes:
    """``doc`` as JSON of exactly ``size`` bytes (the padding is a field's text, so a cut-off copy is no JSON)."""
    doc = {**doc, "padding": ""}
    doc["padding"] = "x" * (size - len(json.dumps(doc)))
    raw = json.dumps(doc).encode()
    assert len(raw) == size
    return raw


def test_a_record_up_to_the_limit_is_read_and_an_endless_one_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit keeps a stray huge file from being pulled into memory, and a record of the limit's size still
    counts (the limit is a maximum, not one byte less)."""
    monkeypatch.setattr(hdfs_io.time, "sleep", lambda seconds: None)  # a failed read is retried: no waiting
    record = gate.ModelRecord(APP, 60, {"val_accuracy": 0.9})
    full = _padded(json.loads(record.to_json()), gate.MAX_RECORD_BYTES)
    hdfs = MemoryHdfs({"/full.json": full, "/endless.json": None})
    assert gate.read_record(hdfs, "/full.json") == record
    assert gate.read_record(hdfs, "/endless.json") is None


def test_the_verdict_goes_into_every_history_up_to_the_limit_and_skips_missing_ones() -> None:
    """A missing history (the AM could not write it) does not stop the others; a history of the limit's size is
    annotated; an endless one is refused without being read whole."""
    verdict = GateResult(metric="val_accuracy", value=0.5, previous=0.9, model_dir="/m.rejected", reason="worse")
    big = _padded(json.loads(JobHistory(name="digits").to_json()), MAX_HISTORY_BYTES)
    hdfs = MemoryHdfs({"/h/big.json": big, "/h/endless.json": None})
    assert gate.annotate_history(hdfs, ["/h/nowhere.json", "/h/big.json"], verdict) == ["/h/big.json"]
    stored = JobHistory.from_json(hdfs.files["/h/big.json"] or b"")
    assert stored.gate == verdict and stored.name == "digits"
    with pytest.raises(SpecError, match="more than the"):
        gate.annotate_history(hdfs, ["/h/endless.json"], verdict)


def test_a_flaky_namenode_is_asked_again_and_the_log_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A transient NameNode error does not decide the verdict; the warning says which path was asked about."""
    monkeypatch.setattr(hdfs_io.time, "sleep", lambda seconds: None)
    hdfs = FakeHdfs(tmp_path / "hdfs")
    export(hdfs, tmp_path, APP, 0.9)
    meta = f"{gate.candidate_dir(MODEL, APP)}/{gate.MODEL_METADATA}"
    hdfs.fail_times = {"status": 1, "read": 1}
    with caplog.at_level(logging.WARNING, logger="tony.hdfs"):
        found = gate.read_record(hdfs, meta)
        hdfs.fail_times = {"status": 1}
        where = gate.where_is(hdfs, MODEL, APP)
    assert found is not None and found.figure("val_accuracy") == 0.9
    assert where == gate.candidate_dir(MODEL, APP)
    said = caplog.text
    assert f"status {meta} failed" in said and f"read {meta} failed" in said
    assert f"status {gate.version_dir(MODEL, APP)} failed" in said
