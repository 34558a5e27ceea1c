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
from hdfs.util import HdfsError

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import inputs
from airflow_provider_tony.runtime.errors import InputMissing, InputTooLarge, SpecError, TonyError
from airflow_provider_tony.runtime.inputs import InputFile, deal, list_input, shard_of
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn.checks import check_inputs


class FakeHdfs:
    """Files by absolute path; folders are implied by the paths below them.

    Answers as HdfsCLI's client does: ``status`` raises for a missing path unless ``strict=False``,
    ``list`` raises for a missing path or a file, and ``read`` records the chunk size asked for.
    """

    piece = 3  # bytes per chunk read: small, so that a short read can drop a few bytes

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.chunk_sizes: list[int | None] = []

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
        if strict:
            raise HdfsError(f"File does not exist: {path}")
        return None

    def list(self, path: str, status: bool = False) -> list[Any]:
        if path not in self._dirs():
            raise HdfsError(f"{path!r} is not a directory.")
        prefix = path.rstrip("/") + "/"
        names = sorted(
            {p[len(prefix) :].split("/")[0] for p in [*self.files, *self._dirs()] if p.startswith(prefix)} - {""}
        )
        return [(n, self.status(prefix + n, strict=False)) for n in names] if status else names

    @contextlib.contextmanager
    def read(self, path: str, chunk_size: int = 0) -> Iterator[Iterator[bytes]]:
        self.chunk_sizes.append(chunk_size)
        data, piece = self.files[path], self.piece
        yield iter([data[i : i + piece] for i in range(0, len(data), piece)] or [b""])


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
        ("/data/nope/*", "/data/nope/* matched nothing on HDFS"),  # a glob below a missing folder
        ("/data/d/dt=2/part-0/*", "matched nothing"),  # a glob below a file: nothing to list there
        ("/data/d/dt=3/part-0", "holds only empty files on HDFS (1 of them)"),  # an empty file named by its path
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
    assert inputs.seen_env(listed) == {C.ENV_INPUTS_SEEN: "d=1:4"}  # no quotes: YARN's launch script


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

    def task(role: str, index: int, generation: int) -> executor.ContainerTask:
        return executor.ContainerTask(
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
    task = executor.ContainerTask(app=app, spec=_spec(), env={}, role="worker", index=0, generation=0, workdir=tmp_path)
    assert executor.stage_inputs(task) is None
    record = ExitRecord.from_json(app.kv["tony/exit/worker:0"])
    assert "inputs.d.max_bytes_per_task" in record.stderr_tail[0] and "filled its disk" in record.stderr_tail[0]
    assert not failure.classify_exit(record.exit_code, record.stderr_tail).retryable
    assert not (tmp_path / inputs.INPUTS_DIR / "d").exists(), "the partial copy is removed"


def test_max_bytes_per_task_must_be_a_positive_number() -> None:
    for bad in (0, -1, "10GB", True, 1.5):
        with pytest.raises(SpecError, match=r"inputs\.d\.max_bytes_per_task"):
            _spec(max_bytes_per_task=bad)


# --------------------------------------------------------------------------- listing: edges of the path rules
def test_list_input_names_its_default_field() -> None:
    """A caller that names no field still gets an error that says which setting to fix."""
    with pytest.raises(InputMissing) as err:
        list_input(FakeHdfs(PARTITION), "/data/nope")
    assert err.value.field == "inputs"


def test_a_plain_component_after_a_glob_is_looked_up_below_every_match() -> None:
    got = list_input(FakeHdfs(PARTITION), "/data/d/dt=*/part-0")
    assert [(f.hdfs, f.size, f.rel) for f in got] == [
        ("/data/d/dt=1/part-0", 10, "dt=1/part-0"),
        ("/data/d/dt=2/part-0", 4, "dt=2/part-0"),
        ("/data/d/dt=3/part-0", 0, "dt=3/part-0"),
    ]


@pytest.mark.parametrize("path", ["/g/*/part-0", "/g/*/part-*"])
def test_a_glob_match_that_is_a_file_or_lacks_the_rest_does_not_hide_later_matches(path: str) -> None:
    """``a`` (a file) and ``b`` (no part-0) come first in path order; ``c`` must still be found."""
    hdfs = FakeHdfs({"/g/a": b"x", "/g/b/other": b"y", "/g/c/part-0": b"zz"})
    assert [(f.hdfs, f.rel) for f in list_input(hdfs, path)] == [("/g/c/part-0", "c/part-0")]


@pytest.mark.parametrize("location", ["/", "hdfs://nn:8020", "hdfs://nn:8020/", "/*"])
def test_the_root_folder_lists_everything_with_single_slashes(location: str) -> None:
    hdfs = FakeHdfs({"/a": b"x", "/d/b": b"yy"})
    assert [(f.hdfs, f.size, f.rel) for f in list_input(hdfs, location)] == [("/a", 1, "a"), ("/d/b", 2, "d/b")]


def test_names_ending_in_x_or_a_slash_keep_their_path() -> None:
    """The trailing-slash rule strips slashes only (a folder named BOX is not BO)."""
    hdfs = FakeHdfs({"/data/BOX/part-0": b"abc", "/data/MAX": b"xy"})
    assert [(f.hdfs, f.rel) for f in list_input(hdfs, "/data/BOX")] == [("/data/BOX/part-0", "part-0")]
    assert [(f.hdfs, f.rel) for f in list_input(hdfs, "/data/MAX")] == [("/data/MAX", "MAX")]
    assert [(f.hdfs, f.rel) for f in list_input(hdfs, "/data/MAX/")] == [("/data/MAX", "MAX")]


def test_a_folder_holding_one_file_names_it_relative_to_the_folder() -> None:
    """Only a file given by its own path is named after its folder's parent; a folder's one file is not."""
    assert [f.rel for f in list_input(FakeHdfs(PARTITION), "/data/d/dt=2")] == ["part-0"]


# --------------------------------------------------------------------------- dealing: the documented rule
def test_deal_gives_the_largest_file_first_so_the_shards_balance() -> None:
    """The module's promise: largest file first to the least-loaded task. Dealt smallest first,
    four 1-byte files and one 4-byte file split 6/2 (the big file lands on a loaded shard);
    largest first they split 4/4."""
    got = deal(_files([1, 1, 1, 1, 4]), 2)
    assert [[f.rel for f in shard] for shard in got] == [["f004"], ["f000", "f001", "f002", "f003"]]
    assert [sum(f.size for f in shard) for shard in got] == [4, 4]


def test_deal_refuses_zero_shards_saying_why() -> None:
    with pytest.raises(ValueError, match="0 shards: deal needs at least one"):
        deal(_files([1]), 0)


# --------------------------------------------------------------------------- the checks' messages name the fix
def test_shard_needs_a_file_per_task_and_no_more() -> None:
    """As many files as tasks is enough (one each); one fewer is refused, naming the tasks and the way out."""
    assert check_inputs(_spec(workers=3, sharding="shard"), FakeHdfs(PARTITION))  # 3 files, 3 tasks
    with pytest.raises(SpecError) as err:
        check_inputs(_spec(workers=4, sharding="shard"), FakeHdfs(PARTITION))
    assert str(err.value).endswith(
        "holds 3 file(s) but 4 tasks (worker:0, worker:1, worker:2, worker:3) share it under 'shard';"
        " write at least one file per task, or use sharding 'all'"
    )


def test_the_cap_refusal_names_the_ways_out() -> None:
    with pytest.raises(InputTooLarge) as err:
        check_inputs(_spec(sharding="shard", max_bytes_per_task=11), FakeHdfs(PARTITION))
    assert "raise the cap, shard the input across more tasks (sharding: shard), or read fewer files" in str(err.value)


def _two_inputs(**b: Any) -> JobSpec:
    return JobSpec.from_dict(
        {
            "roles": {"worker": {"instances": 2, "module": "m"}, "ps": {"module": "m"}},
            "inputs": {"a": {"path": "/data/d/dt=1"}, "b": {"path": "/data/d/dt=2", **b}},
        }
    )


def test_the_disk_check_names_every_input_the_task_stages_and_the_ways_out(tmp_path: Path, monkeypatch) -> None:
    _disk(monkeypatch, free=1_025)  # room for 25 bytes; a (22) and b (4) need 26
    with pytest.raises(InputTooLarge) as err:
        inputs.stage_inputs(FakeHdfs(PARTITION), _two_inputs(), "worker:0", tmp_path, {}, lambda m: None)
    assert err.value.field == "inputs.a.max_bytes_per_task"
    assert "worker:0 would stage 26 bytes of inputs (a, b) onto" in str(err.value)
    assert (
        "give the role nodes with more disk, shard the input across more tasks, or set a max_bytes_per_task that fits"
        in str(err.value)
    )


def test_the_cap_checked_in_the_task_names_the_input_and_the_task(tmp_path: Path, monkeypatch) -> None:
    _disk(monkeypatch, free=10_000)
    with pytest.raises(InputTooLarge) as err:
        inputs.stage_inputs(FakeHdfs(PARTITION), _two_inputs(max_bytes_per_task=3), "worker:1", tmp_path, {}, print)
    assert str(err.value).startswith(
        "inputs.b.max_bytes_per_task: worker:1 would stage 4 bytes of input 'b', more than the cap of 3"
    )


def test_what_the_submitting_side_saw_travels_for_every_input(tmp_path: Path) -> None:
    """Two inputs in one variable: each task checks each input against its own counts."""
    hdfs = FakeHdfs(dict(PARTITION))
    spec = _two_inputs()
    seen = inputs.seen_env(check_inputs(spec, hdfs))
    assert seen == {C.ENV_INPUTS_SEEN: "a=3:22,b=1:4"}
    env, _ = inputs.stage_inputs(hdfs, spec, "worker:0", tmp_path / "ok", seen, lambda m: None)
    assert set(env) == {"TONY_INPUT_A_DIR", "TONY_INPUT_A_MANIFEST", "TONY_INPUT_B_DIR", "TONY_INPUT_B_MANIFEST"}
    hdfs.files["/data/d/dt=2/part-1"] = b"late"
    with pytest.raises(TonyError) as err:
        inputs.stage_inputs(hdfs, spec, "worker:0", tmp_path / "changed", seen, lambda m: None)
    assert "input 'b' changed after submit: 1 files, 4 bytes were listed then, 2 files, 8 bytes now" in str(err.value)
    assert "so this try stops (the next one lists it again)" in str(err.value)


# --------------------------------------------------------------------------- staging: edges
def test_an_input_for_another_role_does_not_stop_the_next_one(tmp_path: Path) -> None:
    spec = JobSpec.from_dict(
        {
            "roles": {"worker": {"module": "m"}, "ps": {"module": "m"}},
            "inputs": {"a": {"path": "/data/d/dt=1", "roles": ["ps"]}, "b": {"path": "/data/d/dt=2"}},
        }
    )
    env, staged = inputs.stage_inputs(FakeHdfs(PARTITION), spec, "worker:0", tmp_path, {}, lambda m: None)
    assert set(env) == {"TONY_INPUT_B_DIR", "TONY_INPUT_B_MANIFEST"} and [s.name for s in staged] == ["b"]


def test_a_missing_input_in_the_task_names_its_field(tmp_path: Path) -> None:
    with pytest.raises(InputMissing) as err:
        inputs.stage_inputs(FakeHdfs(PARTITION), _spec("/data/d/dt=9"), "worker:0", tmp_path, {}, lambda m: None)
    assert err.value.field == "inputs.d.path"


def test_staging_makes_every_folder_it_needs_and_reads_in_bounded_chunks(tmp_path: Path) -> None:
    """A work directory not made yet, files two folders deep; and each read asks for chunks: HdfsCLI's
    chunk_size=0 hands back the raw response, iterated by lines, so a TFRecord file without newlines
    would be read into memory whole."""
    hdfs = FakeHdfs({"/data/deep/a/b/part-0": b"abc", "/data/deep/c": b"de"})
    workdir = tmp_path / "not" / "made"
    env, _ = inputs.stage_inputs(hdfs, _spec("/data/deep"), "worker:0", workdir, {}, lambda m: None)
    assert (workdir / "inputs" / "d" / "a" / "b" / "part-0").read_bytes() == b"abc"
    assert sorted(inputs.files("d", env)) == [str(workdir / "inputs" / "d" / p) for p in ("a/b/part-0", "c")]
    assert hdfs.chunk_sizes and all(isinstance(c, int) and 0 < c <= 1 << 20 for c in hdfs.chunk_sizes)


def test_staging_again_over_an_earlier_try_replaces_its_files(tmp_path: Path) -> None:
    """A task staged again in the same work directory (the folders are there) copies over them."""
    hdfs = FakeHdfs(dict(PARTITION))
    inputs.stage_inputs(hdfs, _spec(), "worker:0", tmp_path, {}, lambda m: None)
    hdfs.files["/data/d/dt=1/part-0"] = b"A" * 10
    env, staged = inputs.stage_inputs(hdfs, _spec(), "worker:0", tmp_path, {}, lambda m: None)
    assert (tmp_path / "inputs" / "d" / "part-0").read_bytes() == b"A" * 10 and staged[0].files == 3


def test_a_disk_full_before_the_inputs_folder_exists_is_still_the_full_disk_error(tmp_path: Path, monkeypatch) -> None:
    """The clean-up after ENOSPC must not fail on a folder that was never made and hide the real error."""
    import errno

    def full(client: Any, items: list[InputFile], root: Path, progress: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(inputs, "_copy_all", full)
    with pytest.raises(InputTooLarge) as err:
        inputs.stage_inputs(FakeHdfs(PARTITION), _spec(), "worker:0", tmp_path, {}, lambda m: None)
    assert "filled its disk staging input 'd' (22 bytes)" in str(err.value)
    assert (
        "the staged files were removed and the job is not retried (a retry would fill the disk again); "
        "set a max_bytes_per_task that fits the nodes' disks, or shard the input across more tasks"
    ) in str(err.value)


def test_files_reads_the_manifest_named_in_the_environment(tmp_path: Path, monkeypatch) -> None:
    """Scripts call ``inputs.files("d")`` with no env: it reads the process's own variables."""
    env, _ = inputs.stage_inputs(FakeHdfs(PARTITION), _spec(), "worker:0", tmp_path, {}, lambda m: None)
    monkeypatch.setenv("TONY_INPUT_D_MANIFEST", env["TONY_INPUT_D_MANIFEST"])
    assert inputs.files("d") == [str(tmp_path / "inputs" / "d" / p) for p in ("part-0", "part-1", "sub/part-2")]


# --------------------------------------------------------------------------- staging: what the task reports
class Clock:
    """inputs' clock: each reading ``step`` seconds after the last, from 100."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 100.0 - step, step

    def monotonic(self) -> float:
        self.now += self.step
        return self.now


MIB = 1 << 20
BIG = {f"/m/part-{i}": bytes([65 + i]) * MIB for i in range(3)}  # three 1 MiB files


@pytest.mark.parametrize(
    ("step", "seconds", "rate", "progress"),
    [
        # readings: listing 100-101, staging from 101 (the listing counts), progress set up 103,
        # three files at 104-106, done at 107: 6 s, 3 MiB, 0.5 MiB/s; no report before 5 s have passed
        (1.0, 6.0, "0.5", []),
        (0.125, 0.75, "4.0", []),  # under a second still has a rate
        (0.0, 0.0, "0.0", []),  # no measurable time: no rate, no division by zero
        # a reading every 5 s: a report after each file (the default every=5.0 reached exactly), none at the end
        (5.0, 30.0, "0.1", ["1/3 files, 1.0/3.0 MiB", "2/3 files, 2.0/3.0 MiB"]),
    ],
)
def test_staging_reports_its_sizes_progress_rate_and_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: float, seconds: float, rate: str, progress: list[str]
) -> None:
    """What the Airflow log shows while a task stages, what stage_inputs returns, and the manifest a script reads."""
    from types import SimpleNamespace

    monkeypatch.setattr(inputs, "time", SimpleNamespace(monotonic=Clock(step).monotonic))
    monkeypatch.setattr(inputs, "PARALLEL_READS", 1)  # files in path order, so the progress counts are fixed
    hdfs = FakeHdfs(BIG)
    hdfs.piece = 1 << 16
    events: list[str] = []
    env, staged = inputs.stage_inputs(hdfs, _spec("/m"), "worker:0", tmp_path, {}, events.append)
    root, path = tmp_path / "inputs" / "d", tmp_path / "inputs" / "d.manifest.json"
    assert events == [
        "worker:0 staging input d (every file): 3 files, 3.0 MiB",
        *[f"worker:0 staging input d: {p}" for p in progress],
        f"worker:0 staged input d: 3 files, 3.0 MiB in {seconds:.2f}s ({rate} MiB/s)",
    ]
    assert staged == [inputs.StagedInput("d", root, path, 3, 3 * MIB, seconds)]
    assert env == {"TONY_INPUT_D_DIR": str(root), "TONY_INPUT_D_MANIFEST": str(path)}
    assert json.loads(path.read_text()) == {
        "name": "d",
        "source": "/m",
        "sharding": "all",
        "task_id": "worker:0",
        "shard": 0,
        "num_shards": 1,
        "dir": str(root),
        "total_bytes": 3 * MIB,
        "files": [{"path": f"part-{i}", "hdfs": f"/m/part-{i}", "size": MIB} for i in range(3)],
    }


def test_a_sharded_manifest_says_which_shard(tmp_path: Path) -> None:
    hdfs = FakeHdfs(PARTITION)
    inputs.stage_inputs(hdfs, _spec(sharding="shard"), "worker:1", tmp_path, {}, lambda m: None)
    doc = json.loads((tmp_path / "inputs" / "d.manifest.json").read_text())
    assert (doc["name"], doc["source"], doc["shard"], doc["num_shards"]) == ("d", "/data/d/dt=1", 1, 2)
    assert [f["path"] for f in doc["files"]] == ["part-1", "sub/part-2"]  # 10 | 7 + 5: largest first
