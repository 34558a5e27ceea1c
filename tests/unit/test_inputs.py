"""HDFS inputs (``runtime/inputs.py``, ``yarn/checks.check_inputs``): listing, dealing, staging.

The WebHDFS client is a small in-memory stand-in for the three calls the module makes
(``status``, ``list``, ``read``): the logic under test is pure; the real cluster's
answers are tested in tests/integration/test_inputs.py.
"""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime import inputs
from airflow_provider_tony.runtime.errors import InputMissing, SpecError, TonyError
from airflow_provider_tony.runtime.inputs import InputFile, deal, list_input, shard_of
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.checks import check_inputs


class FakeHdfs:
    """Files by absolute path; folders are implied by the paths below them."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def _dirs(self) -> set[str]:
        out = {"/"}
        for path in self.files:
            parts = path.split("/")[1:-1]
            out |= {"/" + "/".join(parts[: i + 1]) for i in range(len(parts))}
        return out

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        if path in self.files:
            return {"type": "FILE", "length": len(self.files[path])}
        if path in self._dirs():
            return {"type": "DIRECTORY", "length": 0}
        return None

    def list(self, path: str, status: bool = False) -> list[Any]:
        prefix = path.rstrip("/") + "/"
        names = sorted({p[len(prefix) :].split("/")[0] for p in [*self.files, *self._dirs()] if p.startswith(prefix)})
        return [(n, self.status(prefix + n)) for n in names] if status else names

    @contextlib.contextmanager
    def read(self, path: str, chunk_size: int = 0) -> Iterator[Iterator[bytes]]:
        data = self.files[path]
        yield iter([data[i : i + 3] for i in range(0, len(data), 3)] or [b""])


PARTITION = {
    "/data/d/dt=1/part-0": b"a" * 10,
    "/data/d/dt=1/part-1": b"b" * 7,
    "/data/d/dt=1/sub/part-2": b"c" * 5,
    "/data/d/dt=1/_SUCCESS": b"",
    "/data/d/dt=1/.part-0.crc": b"x",
    "/data/d/dt=1/_tmp/part-9": b"z" * 3,
    "/data/d/dt=2/part-0": b"d" * 4,
    "/data/d/dt=3/part-0": b"",
}


def _spec(path: str = "/data/d/dt=1", workers: int = 2, **item: Any) -> JobSpec:
    return JobSpec.from_dict(
        {
            "roles": {"worker": {"instances": workers, "module": "m"}, "ps": {"module": "m"}},
            "inputs": {"d": {"path": path, **item}},
        }
    )


# --------------------------------------------------------------------------- listing
def test_folder_lists_its_files_recursively_without_markers_or_hidden_ones() -> None:
    got = list_input(FakeHdfs(PARTITION), "hdfs://nn:8020/data/d/dt=1")
    assert [(f.hdfs, f.size, f.rel) for f in got] == [
        ("/data/d/dt=1/part-0", 10, "part-0"),
        ("/data/d/dt=1/part-1", 7, "part-1"),
        ("/data/d/dt=1/sub/part-2", 5, "sub/part-2"),
    ]


def test_glob_matches_in_any_component_and_names_files_below_its_fixed_head() -> None:
    got = list_input(FakeHdfs(PARTITION), "/data/d/dt=[12]/part-*")
    assert [(f.hdfs, f.rel) for f in got] == [
        ("/data/d/dt=1/part-0", "dt=1/part-0"),
        ("/data/d/dt=1/part-1", "dt=1/part-1"),
        ("/data/d/dt=2/part-0", "dt=2/part-0"),
    ]


def test_a_glob_skips_hidden_names_unless_it_spells_them() -> None:
    assert [f.rel for f in list_input(FakeHdfs(PARTITION), "/data/d/dt=1/*")] == ["part-0", "part-1", "sub/part-2"]
    assert [f.rel for f in list_input(FakeHdfs(PARTITION), "/data/d/dt=1/_t*/*")] == ["_tmp/part-9"]


def test_a_single_file_keeps_its_own_name() -> None:
    assert [(f.hdfs, f.rel) for f in list_input(FakeHdfs(PARTITION), "/data/d/dt=2/part-0")] == [
        ("/data/d/dt=2/part-0", "part-0")
    ]


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("/data/d/dt=9", "/data/d/dt=9 does not exist or holds no files on HDFS"),
        ("/data/d/dt=9*/part-*", "/data/d/dt=9*/part-* matched nothing on HDFS"),
        ("/data/d/dt=3", "/data/d/dt=3 holds only empty files on HDFS (1 of them)"),
        ("/data/d/dt=1/_tmp/*.x", "matched nothing"),
    ],
)
def test_missing_or_empty_input_names_the_path(path: str, text: str) -> None:
    with pytest.raises(InputMissing) as err:
        list_input(FakeHdfs(PARTITION), path, "inputs.d.path")
    assert text in str(err.value)
    assert err.value.field == "inputs.d.path" and err.value.path == path


# --------------------------------------------------------------------------- dealing
def _files(sizes: list[int]) -> list[InputFile]:
    return [InputFile(f"/p/f{i:03d}", s, f"f{i:03d}") for i, s in enumerate(sizes)]


@pytest.mark.parametrize("seed", range(25))
def test_deal_is_disjoint_covering_balanced_and_deterministic(seed: int) -> None:
    rng = random.Random(seed)
    items = _files([rng.choice([0, 1, 5, 100, rng.randint(1, 10_000)]) for _ in range(rng.randint(1, 40))])
    shards = rng.randint(1, 6)
    got = deal(items, shards)
    assert len(got) == shards
    flat = [f for shard in got for f in shard]
    assert sorted(flat, key=lambda f: f.hdfs) == sorted(items, key=lambda f: f.hdfs)  # each file exactly once
    assert got == deal(list(reversed(items)), shards)  # the order of the listing does not matter
    loads = [sum(f.size for f in shard) for shard in got]
    assert max(loads) - min(loads) <= max(f.size for f in items)
    assert all(shard == sorted(shard, key=lambda f: f.hdfs) for shard in got)
    if len(items) >= shards:  # count ties go to the emptier shard: nobody is left without a file
        assert all(got)


def test_deal_equal_files_round_robin() -> None:
    got = deal(_files([4] * 5), 2)
    assert [[f.rel for f in s] for s in got] == [["f000", "f002", "f004"], ["f001", "f003"]]


def test_shard_of_follows_the_receiving_tasks() -> None:
    listed = list_input(FakeHdfs(PARTITION), "/data/d/dt=1")
    spec = _spec(sharding="shard", roles=["worker"])
    mine = [shard_of(spec, "d", listed, t) for t in ("worker:0", "worker:1", "ps:0")]
    assert [(s, n) for _, s, n in mine] == [(0, 2), (1, 2), (-1, 2)]
    assert mine[2][0] == []
    assert {f.hdfs for f in mine[0][0]} | {f.hdfs for f in mine[1][0]} == {f.hdfs for f in listed}
    assert not {f.hdfs for f in mine[0][0]} & {f.hdfs for f in mine[1][0]}
    everything = shard_of(_spec(), "d", listed, "worker:1")  # default: all, to the tracked roles
    assert everything == (listed, 0, 1)
    assert _spec().input_tasks("d") == ["worker:0", "worker:1"]  # ps is untracked by default


# --------------------------------------------------------------------------- the check before submit
@pytest.mark.parametrize("retryable", [True, False])
def test_check_inputs_missing_partition_is_retryable_as_the_field_says(retryable: bool) -> None:
    with pytest.raises(InputMissing) as err:
        check_inputs(_spec("/data/d/dt=2026-12-01", retryable_if_missing=retryable), FakeHdfs(PARTITION))
    assert err.value.retryable is retryable
    assert str(err.value).startswith("inputs.d.path: /data/d/dt=2026-12-01 does not exist")
    assert "nothing was submitted" in str(err.value)
    assert ("retryable: the next one looks again" in str(err.value)) is retryable


def test_check_inputs_refuses_fewer_files_than_shards_and_returns_the_listing() -> None:
    with pytest.raises(SpecError, match=r"inputs.d.sharding: /data/d/dt=2 holds 1 file\(s\) but 2 tasks"):
        check_inputs(_spec("/data/d/dt=2", sharding="shard"), FakeHdfs(PARTITION))
    listed = check_inputs(_spec("/data/d/dt=2"), FakeHdfs(PARTITION))  # 'all': one file is enough
    assert inputs.seen_env(listed) == {inputs.ENV_INPUTS_SEEN: "d=1:4"}  # no quotes: YARN's launch script


# --------------------------------------------------------------------------- staging in the container
def test_stage_inputs_copies_each_tasks_shard_and_writes_its_manifest(tmp_path: Path) -> None:
    hdfs = FakeHdfs(PARTITION)
    spec = _spec(sharding="shard")
    seen = inputs.seen_env(check_inputs(spec, hdfs))
    events: list[str] = []
    reports = []
    for task in ("worker:0", "worker:1"):
        workdir = tmp_path / task.replace(":", "-")
        env, staged = inputs.stage_inputs(hdfs, spec, task, workdir, seen, events.append)
        assert env == {
            "TONY_INPUT_D_DIR": str(workdir / "inputs" / "d"),
            "TONY_INPUT_D_MANIFEST": str(workdir / "inputs" / "d.manifest.json"),
        }
        doc = json.loads(Path(env["TONY_INPUT_D_MANIFEST"]).read_text())
        assert (doc["task_id"], doc["num_shards"], doc["sharding"]) == (task, 2, "shard")
        local = inputs.files("d", env)
        for entry, path in zip(doc["files"], local, strict=True):
            assert Path(path).read_bytes() == PARTITION[entry["hdfs"]]
            assert entry["size"] == len(PARTITION[entry["hdfs"]])
        assert not list((workdir / "inputs" / "d").rglob(".*.part"))  # no temporary name left behind
        assert staged[0].files == len(doc["files"]) and staged[0].bytes == doc["total_bytes"]
        reports.append({f["hdfs"] for f in doc["files"]})
    assert reports[0] | reports[1] == {"/data/d/dt=1/part-0", "/data/d/dt=1/part-1", "/data/d/dt=1/sub/part-2"}
    assert not reports[0] & reports[1]
    assert any("worker:1 staging input d (shard 2/2)" in e for e in events)
    assert any(e.startswith("worker:0 staged input d: ") and "MiB/s" in e for e in events)


def test_stage_inputs_refuses_a_partition_that_changed_after_submit(tmp_path: Path) -> None:
    hdfs = FakeHdfs(dict(PARTITION))
    spec = _spec(sharding="shard")
    seen = inputs.seen_env(check_inputs(spec, hdfs))
    hdfs.files["/data/d/dt=1/part-3"] = b"late"
    with pytest.raises(TonyError, match=r"input 'd' changed after submit: 3 files, 22 bytes .* 4 files, 26 bytes"):
        inputs.stage_inputs(hdfs, spec, "worker:0", tmp_path, seen, lambda _: None)


def test_stage_inputs_refuses_a_file_shorter_than_listed(tmp_path: Path) -> None:
    hdfs = FakeHdfs(dict(PARTITION))
    real_read = hdfs.read

    @contextlib.contextmanager
    def short(path: str, chunk_size: int = 0) -> Iterator[Iterator[bytes]]:
        with real_read(path, chunk_size) as chunks:
            yield iter(list(chunks)[:-1])

    hdfs.read = short  # type: ignore[method-assign]
    with pytest.raises(TonyError, match="read 9 bytes, HDFS listed 10"):
        inputs.stage_inputs(hdfs, _spec(), "worker:0", tmp_path, {}, lambda _: None)


def test_a_task_of_a_role_without_the_input_stages_nothing(tmp_path: Path) -> None:
    env, staged = inputs.stage_inputs(FakeHdfs(PARTITION), _spec(roles=["worker"]), "ps:0", tmp_path, {}, print)
    assert env == {} and staged == [] and not (tmp_path / "inputs").exists()


def test_files_names_the_variable_when_the_input_is_not_there() -> None:
    with pytest.raises(KeyError, match=r"\$TONY_INPUT_CLICKS_MANIFEST is not set"):
        inputs.files("clicks", {})


# --------------------------------------------------------------------------- the executor's phase
def test_the_executor_phase_turns_a_staging_failure_into_a_retryable_exit_before_the_script(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from airflow_provider_tony.runtime import executor
    from airflow_provider_tony.runtime.messages import ExitRecord

    app = SimpleNamespace(kv={})
    spec = _spec(roles=["worker"])

    def task(role: str, index: int, generation: int) -> executor.Task:
        return executor.Task(
            app=app, spec=spec, env={}, role=role, index=index, generation=generation, workdir=tmp_path
        )

    assert executor.stage_inputs(task("ps", 0, 0)) == {}  # not a receiver
    assert app.kv == {}
    assert executor.stage_inputs(task("worker", 1, 2)) is None  # no WebHDFS URL
    record = ExitRecord.from_json(app.kv["tony/exit/worker:1"])
    assert (record.exit_code, record.generation) == (75, 2)
    assert record.stderr_tail == [
        "staging the job's inputs failed: the job has inputs but no WebHDFS URL to read them with"
    ]


def test_staging_events_reach_the_airflow_log(tmp_path: Path) -> None:
    """The staging phase reports through the executor's events, which the AM keeps as artefacts
    (what the follower logs and the XCom result lists)."""
    from types import SimpleNamespace

    from airflow_provider_tony.runtime import executor
    from airflow_provider_tony.runtime.messages import EventRecord

    app = SimpleNamespace(kv={})
    hdfs = FakeHdfs(PARTITION)
    inputs.stage_inputs(
        hdfs, _spec(), "worker:1", tmp_path, {}, lambda msg: executor.report_event(app, "worker:1", msg)
    )
    records = [EventRecord.from_json(v) for v in app.kv.values()]
    assert [r.message.split(":")[1].split("(")[0].strip() for r in records] == ["1 staging input d", "1 staged input d"]
    assert all(r.artefact for r in records)


# --------------------------------------------------------------------------- at scale (issue 35, point 9)
class CountingHdfs(FakeHdfs):
    """Counts each WebHDFS call by operation (GETFILESTATUS, LISTSTATUS), as the NameNode would see them."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__(files)
        self.calls: dict[str, int] = {"GETFILESTATUS": 0, "LISTSTATUS": 0}
        self._dir_cache = super()._dirs()

    def _dirs(self) -> set[str]:
        return self._dir_cache

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        self.calls["GETFILESTATUS"] += 1
        return super().status(path, strict)

    def list(self, path: str, status: bool = False) -> list[Any]:
        self.calls["LISTSTATUS"] += 1
        prefix = path.rstrip("/") + "/"
        names = sorted({p[len(prefix) :].split("/")[0] for p in self.files if p.startswith(prefix)})
        if not status:
            return names
        return [(n, FakeHdfs.status(self, prefix + n)) for n in names]


@pytest.mark.parametrize(
    ("path", "most_calls"),
    [("/data/big/part-*", 2), ("/data/big", 2), ("/data/b*/part-*", 3)],
    ids=["glob", "folder", "glob-in-two-components"],
)
def test_listing_costs_one_call_per_folder_not_one_per_file(path: str, most_calls: int) -> None:
    """Before: a glob matching 20,000 files cost 20,001 calls (a GETFILESTATUS per match), on the
    submitting side and again in every task."""
    files = {f"/data/big/part-{i:05d}": b"x" for i in range(20_000)}
    fake = CountingHdfs(files)
    got = list_input(fake, path)
    assert len(got) == 20_000 and sum(f.size for f in got) == 20_000
    assert sum(fake.calls.values()) <= most_calls, fake.calls


def _disk(monkeypatch: pytest.MonkeyPatch, free: int, total: int = 10_000) -> None:
    import shutil

    usage = shutil._ntuple_diskusage(total, total - free, free)  # type: ignore[attr-defined]
    monkeypatch.setattr(inputs.shutil, "disk_usage", lambda path: usage)


def test_a_share_larger_than_the_cap_is_refused_before_submit_naming_the_field() -> None:
    from airflow_provider_tony.runtime.errors import InputTooLarge

    spec = _spec(sharding="shard", max_bytes_per_task=11)
    with pytest.raises(InputTooLarge, match=r"inputs\.d\.max_bytes_per_task: worker:1 would stage 12 bytes"):
        check_inputs(spec, FakeHdfs(PARTITION))  # 22 bytes dealt over 2 workers: 10 and 7 + 5 (whole files)
    assert check_inputs(_spec(sharding="shard", max_bytes_per_task=12), FakeHdfs(PARTITION))


def test_a_task_checks_its_free_disk_before_copying_anything(tmp_path: Path, monkeypatch) -> None:
    from airflow_provider_tony.runtime.errors import InputTooLarge

    _disk(monkeypatch, free=1_020)  # 10,000 bytes of disk, 1,000 kept free: room for 20
    with pytest.raises(InputTooLarge, match=r"inputs\.d\.max_bytes_per_task: worker:0 would stage 22 bytes"):
        inputs.stage_inputs(FakeHdfs(PARTITION), _spec(), "worker:0", tmp_path, {}, on_event=lambda m: None)
    assert not (tmp_path / inputs.INPUTS_DIR).exists(), "nothing was copied"
    _disk(monkeypatch, free=1_022)
    inputs.stage_inputs(FakeHdfs(PARTITION), _spec(), "worker:0", tmp_path, {}, on_event=lambda m: None)
    with pytest.raises(InputTooLarge, match="more than the cap of 20"):
        inputs.stage_inputs(
            FakeHdfs(PARTITION), _spec(max_bytes_per_task=20), "worker:1", tmp_path, {}, on_event=lambda m: None
        )


def test_a_full_disk_while_staging_is_not_retryable_and_names_the_field(tmp_path: Path, monkeypatch) -> None:
    """Before: ENOSPC was exit 75, retryable, so every retry filled the node's disk again."""
    import errno
    from types import SimpleNamespace

    from airflow_provider_tony.runtime import executor, failure, hdfs_io
    from airflow_provider_tony.runtime.messages import ExitRecord

    def full(client: Any, item: InputFile, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(inputs, "_copy", full)
    monkeypatch.setattr(hdfs_io, "client_from_env", lambda env, kv=None: FakeHdfs(PARTITION))
    app = SimpleNamespace(kv={})
    task = executor.Task(app=app, spec=_spec(), env={}, role="worker", index=0, generation=0, workdir=tmp_path)
    assert executor.stage_inputs(task) is None
    record = ExitRecord.from_json(app.kv["tony/exit/worker:0"])
    assert "inputs.d.max_bytes_per_task" in record.stderr_tail[0] and "filled its disk" in record.stderr_tail[0]
    assert not failure.classify_exit(record.exit_code, record.stderr_tail).retryable
    assert not (tmp_path / inputs.INPUTS_DIR / "d").exists(), "the partial copy is removed"


def test_max_bytes_per_task_must_be_a_positive_number() -> None:
    for bad in (0, -1, "10GB", True, 1.5):
        with pytest.raises(SpecError, match=r"inputs\.d\.max_bytes_per_task"):
            _spec(max_bytes_per_task=bad)
