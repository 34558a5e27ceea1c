"""Publishing a model on the real HDFS: renames that are checked, two gates at once, a crash mid-publish.

Only HDFS is needed (the gate runs on the submitting side after the job), so
these tests export candidates the way the executor does (a folder with the
model and its ``tony-model.json``) and call the real ``gate.apply`` through
the provider's own WebHDFS client, with no YARN application.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hdfs import InsecureClient

from airflow_provider_tony.runtime import gate, hdfs_io
from airflow_provider_tony.runtime.errors import RenameFailed
from airflow_provider_tony.runtime.messages import Progress
from airflow_provider_tony.runtime.spec import JobSpec

pytestmark = pytest.mark.cluster

APP_P, APP_A, APP_B = (f"application_1700000000000_{n:04d}" for n in (1, 2, 3))


@pytest.fixture
def base(tony_client: Any) -> Iterator[str]:
    folder = f"/tmp/pytest-publish-{uuid.uuid4().hex[:8]}"
    tony_client.webhdfs.makedirs(folder)
    yield folder
    tony_client.webhdfs.delete(folder, recursive=True)


def _spec(model_dir: str) -> JobSpec:
    return JobSpec.from_dict(
        {
            "roles": {"worker": {"command": ["true"]}},
            "checkpoint": {"model_dir": model_dir},
            "quality_gate": {"metric": "val_accuracy", "mode": "max"},
        }
    )


def _export(fs: Any, model_dir: str, app_id: str, accuracy: float) -> None:
    """What a gated job's executor leaves: the model and its metadata in the candidate folder."""
    candidate = gate.candidate_dir(model_dir, app_id)
    fs.write(f"{candidate}/saved_model.pb", data=app_id.encode(), overwrite=True)
    record = gate.model_record(app_id, Progress(step=10, metrics={"val_accuracy": accuracy}), model_dir)
    fs.write(f"{candidate}/{gate.MODEL_METADATA}", data=record.to_json(), overwrite=True)


def _published_bytes(fs: Any, spec: JobSpec) -> tuple[str, bytes]:
    record = gate.published_record(fs, spec)
    assert record is not None, "nothing is published"
    with fs.read(f"{record.model_dir}/saved_model.pb") as reader:
        return record.application_id, reader.read()


def test_renames_are_checked_and_never_land_inside_a_folder(cluster: Any, tony_client: Any, base: str) -> None:
    """What HDFS answers, through both clients: a plain RENAME of a missing source says false (an error
    now, naming both paths); rename2 refuses an existing destination instead of nesting into it."""
    fs = tony_client.webhdfs
    for path in ("a", "b"):
        fs.write(f"{base}/{path}/f", data=path.encode())
    fs.write(f"{base}/p1", data=b"one")
    fs.write(f"{base}/p2", data=b"two")
    with pytest.raises(RenameFailed, match=f"{base}/missing to {base}/elsewhere"):
        fs.rename(f"{base}/missing", f"{base}/elsewhere")
    clients = [fs, InsecureClient(cluster.webhdfs_url, user=cluster.user)]
    for client in clients:
        with pytest.raises(RenameFailed, match=f"{base}/a to {base}/b"):
            hdfs_io.move(client, f"{base}/a", f"{base}/b")
        assert fs.list(f"{base}/b") == ["f"], "nothing nested inside the existing folder"
        with pytest.raises(RenameFailed, match="missing"):
            hdfs_io.move(client, f"{base}/missing", f"{base}/c")
    hdfs_io.move(clients[1], f"{base}/p1", f"{base}/p2", overwrite=True)
    with fs.read(f"{base}/p2") as reader:
        assert reader.read() == b"one", "a file is replaced in one rename"
    assert fs.status(f"{base}/p1", strict=False) is None


class Interleaved:
    """A WebHDFS client that lets the test hold one gate between its steps while another runs."""

    def __init__(self, fs: Any, *, pause_at_move: threading.Event | None = None, model_dir: str = "") -> None:
        self.fs, self.pause, self.lock = fs, pause_at_move, gate.lock_path(model_dir)
        self.at_move = threading.Event()
        self.lock_refused = threading.Event()
        self.crash_on_pointer = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fs, name)

    def _step(self) -> None:
        self.at_move.set()
        if self.pause is not None:
            assert self.pause.wait(120), "the other gate never got as far as the lock"
            self.pause = None

    def rename(self, src: str, dst: str) -> None:
        self._step()
        self.fs.rename(src, dst)

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        self._step()
        if overwrite and self.crash_on_pointer:
            self.crash_on_pointer = False
            raise RuntimeError(f"worker died before renaming {src} to {dst}")
        self.fs.move(src, dst, overwrite=overwrite)

    def write(self, path: str, *args: Any, **kwargs: Any) -> None:
        try:
            self.fs.write(path, *args, **kwargs)
        except Exception:
            if path == self.lock:
                self.lock_refused.set()
            raise


def test_two_gates_at_once_publish_one_model_judged_against_the_other(tony_client: Any, base: str) -> None:
    """Issue 35, point 5: two runs' gates interleaved (A paused between its steps while B judges).
    Before, both compared with the same published model and both published; the model folder held one
    run's weights, the record named the other, and a model was nested inside another."""
    fs = tony_client.webhdfs
    model_dir = f"{base}/models/digits"
    spec = _spec(model_dir)
    _export(fs, model_dir, APP_P, 0.8)
    assert gate.apply(fs, spec, APP_P).passed
    _export(fs, model_dir, APP_A, 0.9)
    _export(fs, model_dir, APP_B, 0.85)
    b_waits = threading.Event()
    a = Interleaved(fs, pause_at_move=b_waits, model_dir=model_dir)
    b = Interleaved(fs, model_dir=model_dir)
    verdicts: dict[str, Any] = {}

    def run(name: str, client: Interleaved, app_id: str) -> None:
        try:
            verdicts[name] = gate.apply(client, spec, app_id)
        except Exception as exc:  # noqa: BLE001 - reported by the assertions below
            verdicts[name] = exc
        finally:
            if name == "B":
                b_waits.set()

    thread_a = threading.Thread(target=run, args=("A", a, APP_A))
    thread_a.start()
    assert a.at_move.wait(120), "gate A never reached its first rename"
    thread_b = threading.Thread(target=run, args=("B", b, APP_B))
    thread_b.start()
    assert b.lock_refused.wait(120) or "B" in verdicts
    b_waits.set()
    thread_a.join(300)
    thread_b.join(300)
    va, vb = verdicts["A"], verdicts["B"]
    assert not isinstance(va, Exception) and not isinstance(vb, Exception), verdicts
    assert va.passed and (va.value, va.previous) == (0.9, 0.8), va
    assert not vb.passed and (vb.value, vb.previous) == (0.85, 0.9), "B is judged against A's published model"
    assert _published_bytes(fs, spec) == (APP_A, APP_A.encode()), "the pointer and the weights agree"
    assert fs.list(gate.version_dir(model_dir, APP_A)) == sorted(["saved_model.pb", gate.MODEL_METADATA])
    assert vb.model_dir == gate.rejected_dir(model_dir, APP_B) and fs.status(vb.model_dir, strict=False)
    assert fs.status(gate.lock_path(model_dir), strict=False) is None, "the lock is released"

    # A crash between the version's move and the pointer's switch: the last good model stays published.
    app_c = "application_1700000000000_0004"
    _export(fs, model_dir, app_c, 0.95)
    c = Interleaved(fs, model_dir=model_dir)
    c.crash_on_pointer = True
    with pytest.raises(RenameFailed, match="worker died"):
        gate.apply(c, spec, app_c)
    assert _published_bytes(fs, spec) == (APP_A, APP_A.encode()), "between the steps A's model is still published"
    retry = gate.apply(fs, spec, app_c)
    assert retry.passed and (retry.value, retry.previous, retry.previous_application_id) == (0.95, 0.9, APP_A)
    assert _published_bytes(fs, spec) == (app_c, app_c.encode())
