"""The typed messages between executors, the AM and clients (``runtime/messages.py``).

Round trips use a non-default value for every field, so a field dropped by a
converter cannot hide behind its default; the compatibility rules (unknown keys
ignored, missing keys defaulted, a required field refused) are tested one by one.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import progress as progress_api
from airflow_provider_tony.runtime.am import ApplicationMaster
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.messages import (
    STATE_DOCUMENT_VERSION,
    ClusterDocument,
    Drain,
    Drained,
    EarlyStop,
    EventRecord,
    ExitRecord,
    Failure,
    Heartbeat,
    Message,
    Progress,
    Registration,
    RestartRecord,
    Slot,
    StateDocument,
    TaskState,
    TaskSummary,
    Usage,
)
from airflow_provider_tony.runtime.spec import JobSpec

PROGRESS = Progress(step=120, epoch=3, total_steps=400, time=1.7e9, metrics={"loss": 0.25, "note": "x"})
USAGE = Usage(
    samples=9,
    seconds=16.0,
    peak_rss_bytes=300 << 20,
    cpu_seconds=12.5,
    peak_cpu_cores=1.5,
    mean_cpu_cores=0.8,
    peak_gpu_util=45.0,
    mean_gpu_util=30.0,
    peak_gpu_memory_bytes=2 << 30,
    gpus_seen=1,
    requested_memory_mib=2048,
    requested_vcores=2,
    requested_gpus=1,
    notes=["peak memory 300 MiB, under half of the 2048 MiB requested"],
)
SUMMARY = TaskSummary(
    state="FAILED",
    role="worker",
    index=1,
    tracked=False,
    host="node1",
    port=4000,
    container_id="container_1_0001_01_000003",
    gpus=["0", "1"],
    seconds_since_heartbeat=1.5,
    exit_code=137,
    progress=PROGRESS,
    stderr_tail=["Killed"],
    message="lost",
    restored_step=100,
    usage=USAGE,
)
RESTART = RestartRecord(
    attempt=2,
    failed_task="worker:1",
    reason="worker:1 lost",
    host="127.0.0.3",
    at=12.5,
    at_wall=1.7e9,
    last_step=47,
    resumed_step=40,
    resumed_at=30.0,
    drained_step=50,
    drain_seconds=1.5,
    moved={"worker:1": "127.0.0.3"},
    cause="lost",
    consequences=["worker:0", "worker:2"],
)
FAILURE = Failure(
    kind="out_of_memory",
    retryable=True,
    task_id="worker:1",
    exit_code=137,
    message="worker:1 out of memory",
    consequences=["worker:0"],
    peak_mib=982,
    requested_mib=512,
    fix_field="roles.worker.memory",
)
FULL: list[Message] = [
    PROGRESS,
    Registration(
        host="node1",
        port=4000,
        pid=77,
        container_id="container_1",
        gpus_local=["0", "1"],
        gpus_pinned=["1"],
        generation=2,
        nm_http_port=8042,
    ),
    USAGE,
    Heartbeat(
        seq=9,
        time=1.7e9,
        user_started=True,
        restored_step=100,
        progress=PROGRESS,
        generation=2,
        points=[PROGRESS],
        usage=USAGE,
    ),
    ExitRecord(
        exit_code=3,
        stderr_tail=["Traceback", "ValueError"],
        time=1.7e9,
        progress=PROGRESS,
        generation=2,
        points=[PROGRESS],
        usage=USAGE,
        checkpoint_step=100,
    ),
    EventRecord(message="worker:0 uploaded checkpoint 120", artefact=True),
    ClusterDocument(
        addresses={"worker:0": "node1:4000"}, gpus={"worker:0": ["0"]}, num_tasks={"worker": 1}, generation=2
    ),
    Slot(task_id="worker:1", generation=3),
    Drain(generation=2),
    Drained(generation=2, step=50, complete=False, error="HDFS unreachable", last_step=57),
    RESTART,
    FAILURE,
    SUMMARY,
    EarlyStop(step=40, metric="loss", value=0.9, median=0.25, finished_trials=3),
    StateDocument(
        application_id="application_1_0001",
        app_state="FAILED",
        am_heartbeat=1.7e9,
        seq=12,
        elapsed=30.5,
        final=True,
        diagnostics="worker:1 lost",
        retryable=True,
        failure=FAILURE,
        progress=0.5,
        tasks={"worker:1": SUMMARY},
        events=["e1", "a1"],
        artefacts=["a1"],
        timeline={"verdict": 30.0},
        am_started_wall=1.6e9,
        generation=1,
        restarts=[RESTART],
        early_stopped=EarlyStop(step=40, metric="loss", value=0.9, median=0.25, finished_trials=3),
        version=STATE_DOCUMENT_VERSION - 1,  # an older layout: a newer one is refused on read
    ),
]


@pytest.mark.parametrize("message", FULL, ids=lambda m: type(m).__name__)
def test_every_field_survives_the_store(message: Message) -> None:
    defaults = (
        type(message).from_dict({"host": "h", "port": 1}) if isinstance(message, Registration) else type(message)()
    )
    for f in dataclasses.fields(message):  # type: ignore[arg-type]
        assert getattr(message, f.name) != getattr(defaults, f.name), f"{f.name} is left at its default"
    assert type(message).from_json(message.to_json()) == message


def test_unknown_keys_from_a_newer_writer_are_ignored_and_missing_ones_defaulted() -> None:
    beat = Heartbeat.from_dict({"seq": 3, "gpu_util": 0.9, "progress": {"step": 5, "loss_scale": 2}})
    assert beat == Heartbeat(seq=3, progress=Progress(step=5))
    old = StateDocument.from_dict({"application_id": "a", "seq": 2, "tasks": {"worker:0": {"state": "RUNNING"}}})
    assert old.version == 1 and old.final is False and old.tasks["worker:0"].progress is None


def test_a_message_missing_a_required_field_or_not_json_is_refused_with_its_name() -> None:
    with pytest.raises(SpecError, match="Registration message is incomplete"):
        Registration.from_dict({"host": "node1"})
    with pytest.raises(SpecError, match="ExitRecord: not JSON"):
        ExitRecord.from_json(b'{"exit_code": 1, "stderr')
    with pytest.raises(SpecError, match="tasks.worker:0: 'RUNNING' is a str, not a mapping"):
        StateDocument.from_dict({"tasks": {"worker:0": "RUNNING"}})


def test_task_states_compare_with_the_strings_a_document_carries() -> None:
    summary = TaskSummary(state=TaskState.LOST)
    assert summary.state == "LOST" and summary.failed
    assert StateDocument.from_json(StateDocument(tasks={"t": summary}).to_json()).tasks["t"].state == TaskState.LOST
    assert not TaskSummary(state="KILLED").failed


def test_a_training_scripts_report_reaches_the_executor_as_progress(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "progress.json"
    assert progress_api.read(path) is None
    monkeypatch.setenv(C.ENV_PROGRESS_FILE, str(path))
    assert progress_api.report(step=7, epoch=1, total_steps=70, loss=float("nan"), accuracy=0.5)
    read = progress_api.read(path)
    assert read is not None and (read.step, read.epoch, read.total_steps) == (7, 1, 70)
    assert read.metrics == {"loss": "nan", "accuracy": 0.5}
    assert read.fraction() == pytest.approx(0.1)


def test_the_am_skips_a_corrupt_record_and_applies_the_rest() -> None:
    spec = JobSpec.from_dict({"name": "t", "roles": {"worker": {"instances": 2, "command": ["true"]}}})
    store = {
        C.kv_register("worker:0"): Registration(host="h0", port=1).to_json(),
        C.kv_register("worker:1"): b'{"host": "h1", "po',
        C.kv_exit("worker:0"): ExitRecord(exit_code=0, progress=Progress(step=3)).to_json(),
    }
    am = ApplicationMaster(SimpleNamespace(kv=SimpleNamespace(get_prefix=lambda prefix: dict(store))), spec, "app")
    am.read_store(1.0)
    assert am.tracker.tasks["worker:0"].state is TaskState.SUCCEEDED
    assert am.tracker.tasks["worker:0"].progress == Progress(step=3)
    assert am.tracker.tasks["worker:1"].state is TaskState.PENDING


def test_the_am_lists_the_events_marked_artefact_apart_and_the_rest_only_as_events() -> None:
    spec = JobSpec.from_dict({"name": "t", "roles": {"worker": {"command": ["true"]}}})
    uploaded, refreshed = "worker:0 uploaded checkpoint step 20", "AM refreshed the checkpoint dir's token"
    store = {
        f"{C.KV_EVENT_PREFIX}worker:0/1.0": EventRecord(message=uploaded, artefact=True).to_json(),
        f"{C.KV_EVENT_PREFIX}am/2.0": EventRecord(message=refreshed).to_json(),
    }
    app = SimpleNamespace(kv=_DeletableKv(store))
    am = ApplicationMaster(app, spec, "app")
    am.read_store(1.0)
    doc = am.tracker.document(1.0, 1.0, 1, "app")
    assert set(doc.events) >= {uploaded, refreshed}
    assert doc.artefacts == [uploaded] == doc.artefact_events(), "chosen by the mark, not by the word 'checkpoint'"


class _DeletableKv:
    """The key-value store as far as ``read_store`` uses it: read by prefix, delete what was read."""

    def __init__(self, store: dict[str, bytes]) -> None:
        self.store = dict(store)

    def get_prefix(self, prefix: str) -> dict[str, bytes]:
        return {k: v for k, v in self.store.items() if k.startswith(prefix)}

    def __delitem__(self, key: str) -> None:
        self.store.pop(key, None)
