"""Retention (``retention.py``) and ``tony gc``: the policy on planted old runs, no cluster.

HDFS is ``test_checkpoint``'s fake over a temporary folder, with HDFS's
``modificationTime``/``accessTime`` taken from the files' own times, so a
test plants an "old run" by setting a folder's mtime.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony import cli, retention
from airflow_provider_tony.retention import Item, Policy, plan
from airflow_provider_tony.runtime import gate
from tests.unit.support.retention import BASE, DAY, NOW, TimedHdfs, names, plant, planted


def test_by_age_removes_old_runs_copies_history_and_archives_but_never_a_model_or_a_newest_run(
    tmp_path: Path,
) -> None:
    hdfs = planted(tmp_path)
    removals = plan(retention.scan(hdfs, BASE), Policy(max_age_days=30), NOW)
    assert names(removals) == {
        "checkpoints/nightly/train/run1",
        "checkpoints/nightly/train/run3/ckpt-000000000010.damaged-1-0-7",
        "history/application_1_0001.json",
        "src/aaaa.tar.gz",
        "cache/tony_runtime-old.zip",
    }
    assert all("days" in why for _item, why in removals), "each removal says why"
    retention.remove(hdfs, removals)
    assert hdfs.status(f"{BASE}/checkpoints/nightly/train/run0/model/{gate.MODEL_METADATA}", strict=False)
    assert hdfs.status(f"{BASE}/checkpoints/nightly/evaluate/only", strict=False), "a task's newest run stays"
    assert hdfs.status(f"{BASE}/checkpoints/nightly/train/run3/ckpt-000000000020", strict=False)
    assert hdfs.status(f"{BASE}/checkpoints/nightly/train/run1", strict=False) is None
    assert plan(retention.scan(hdfs, BASE), Policy(max_age_days=30), NOW) == [], "nothing more to do"


def test_by_count_keeps_each_tasks_newest_runs_and_protected_paths(tmp_path: Path) -> None:
    hdfs = planted(tmp_path)
    assert names(plan(retention.scan(hdfs, BASE), Policy(keep_runs=1), NOW)) == {
        "checkpoints/nightly/train/run1",
        "checkpoints/nightly/train/run2",
    }, "run0 holds a model; evaluate has one run"
    protected = retention.scan(hdfs, BASE, protect=[f"hdfs://nn:8020{BASE}/checkpoints/nightly/train/run2/"])
    assert names(plan(protected, Policy(keep_runs=1), NOW)) == {"checkpoints/nightly/train/run1"}
    assert names(plan(retention.scan(hdfs, BASE), Policy(keep_runs=3), NOW)) == set()


def test_the_policy_alone() -> None:
    items = [
        Item("/r/new", "run", "t", NOW),
        Item("/r/old", "run", "t", NOW - 10 * DAY),
        Item("/r/old/ckpt-000000000001.damaged-x", "damaged", "/r/old", NOW - 10 * DAY),
        Item("/h/a.json", "history", "/h", NOW - 10 * DAY),
    ]
    removed = plan(items, Policy(max_age_days=5), NOW)
    assert [i.path for i, _ in removed] == ["/h/a.json", "/r/old"], "what is inside a removed folder is not listed"
    assert plan(items, Policy(max_age_days=11), NOW) == []
    assert plan([Item("/r/only", "run", "t", 0.0)], Policy(max_age_days=1, keep_runs=1), NOW) == []
    with pytest.raises(ValueError, match="keep at least"):
        Policy(keep_runs=0)
    assert retention._MODEL_METADATA == gate.MODEL_METADATA


class GcClient:
    def __init__(self, hdfs: TimedHdfs, running: tuple[str, ...] = ()) -> None:
        self._hdfs = hdfs
        self.base_path = BASE
        self.running = running
        self.asked: list[tuple[tuple[str, ...], bool]] = []

    def find_by_tags(self, tags: Any, *, active_only: bool = True) -> list[Any]:
        """The RM's answer for this user's active TonY applications (no tag asked: all of them)."""
        self.asked.append((tuple(tags), active_only))
        return [SimpleNamespace(app_id=app_id) for app_id in self.running]

    @property
    def webhdfs(self) -> TimedHdfs:
        return self._hdfs

    def ended_staging(self, *, max_age_s: float | None) -> list[tuple[str, str]]:
        """No staging folder of an ended application (yarn/staging.py's selection: test_staging.py)."""
        return []

    def __enter__(self) -> GcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_tony_gc_dry_run_lists_and_removes_nothing_then_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hdfs = planted(tmp_path)
    monkeypatch.setattr(cli, "_client", lambda: GcClient(hdfs))
    before = sorted(p for p in hdfs.root.rglob("*"))
    assert cli.main(["gc", "--max-age-days", "30", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would remove {BASE}/checkpoints/nightly/train/run1: unused for 40.0 days" in out
    assert "5 to remove" in out and sorted(hdfs.root.rglob("*")) == before, "a dry run removes nothing"
    assert cli.main(["gc", "--max-age-days", "30"]) == 0
    assert "5 removed" in capsys.readouterr().out
    assert hdfs.status(f"{BASE}/src/aaaa.tar.gz", strict=False) is None
    assert hdfs.status(f"{BASE}/cache/tony_runtime-old.zip", strict=False) is None
    assert hdfs.status(f"{BASE}/cache/launch-new.sh", strict=False), "a file jobs still use stays"
    assert cli.main(["gc"]) == cli.EXIT_ERROR, "no policy: refused"


def test_the_operator_prunes_its_own_tasks_older_runs_after_a_success(tmp_path: Path) -> None:
    from tests.unit.support.operator import operator, succeeded

    hdfs = TimedHdfs(tmp_path / "hdfs")
    runs = f"{BASE}/checkpoints/nightly/train"
    for run, age in (("scheduled__old", 40), ("scheduled__recent", 2)):
        plant(hdfs, f"{runs}/{run}/ckpt-000000000010/ckpt-10.index", age)
        plant(hdfs, f"{runs}/{run}", age, data=None)
    plant(hdfs, f"{BASE}/checkpoints/nightly/other/scheduled__old/x", 40)  # another task's: not this task's business
    op, hook, ctx = operator(succeeded(), deferrable=False)
    op.job["retention"] = {"keep_runs": 2}
    hook.webhdfs = lambda: hdfs
    plant(hdfs, f"{runs}/manual__1/ckpt-000000000060/ckpt-60.index", 0)  # this run's own folder (the newest)
    op.execute(ctx)
    assert sorted(p.name for p in (hdfs.root / runs.lstrip("/")).iterdir()) == ["manual__1", "scheduled__recent"]
    looks = [path for name, path in hdfs.calls if name == "list" and path == runs]
    assert len(looks) == 1, "pruned once, though the mixin asks for the result twice"
    assert (hdfs.root / f"{BASE}/checkpoints/nightly/other/scheduled__old/x".lstrip("/")).exists()


def test_tony_gc_prunes_old_tensorboard_events_folders_but_never_a_running_applications(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``<base_path>/tensorboard/<app>`` goes by age like a history file; the running job's stays.

    A running job's TensorBoard appends to an events file, which moves neither
    the folder's time nor the file's access time, so its folder can look as
    old as a finished one: only the RM's list of running applications tells them apart.
    """
    hdfs = TimedHdfs(tmp_path / "hdfs")
    events = f"{BASE}/tensorboard"
    for app, age in (("application_1_0001", 40), ("application_1_0002", 1), ("application_1_0003", 40)):
        plant(hdfs, f"{events}/{app}/events.out.tfevents.1.host", age)
        plant(hdfs, f"{events}/{app}", age, data=None)
    plant(hdfs, f"{events}/stray.txt", 40)  # not an application's folder: not retention's business
    gc_client = GcClient(hdfs, running=("application_1_0003",))
    monkeypatch.setattr(cli, "_client", lambda: gc_client)

    assert cli.main(["gc", "--max-age-days", "30", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"would remove {events}/application_1_0001: unused for 40.0 days" in out
    assert "application_1_0003" not in out and "application_1_0002" not in out and "stray" not in out
    assert "1 to remove" in out
    assert gc_client.asked == [((), True)], "asks the RM for every active application, once"
    assert (hdfs.root / events.lstrip("/") / "application_1_0001").exists(), "a dry run removes nothing"

    assert cli.main(["gc", "--max-age-days", "30", "--keep-runs", "1"]) == 0
    assert "1 removed" in capsys.readouterr().out
    left = sorted(p.name for p in (hdfs.root / events.lstrip("/")).iterdir())
    assert left == ["application_1_0002", "application_1_0003", "stray.txt"], "keep-runs counts runs, not events"
    items = retention.scan(hdfs, BASE, protect=[f"{events}/application_1_0003"])
    assert {i.path: i.protected for i in items} == {
        f"{events}/application_1_0002": "",
        f"{events}/application_1_0003": f"{events}/application_1_0003 is protected",
    }


# --------------------------------------------------------------------------- running applications (issue 35, point 8)
def _app_tags(dag: str, task: str, run: str, map_index: int = -1) -> list[str]:
    from airflow_provider_tony.operators.tony import _tag

    return ["tony", _tag("tony-dag", dag), _tag("tony-task", task), _tag("tony-run", run), _tag("tony-map", map_index)]


def test_active_folders_follow_the_operators_tags_and_fall_back_to_the_task_for_a_hashed_run() -> None:
    from airflow_provider_tony.operators.tony import _tag

    running = [
        _app_tags("Nightly", "train", "manual__2026-01-01T00:00:00+00:00"),
        _app_tags("nightly", "train", "backfill", map_index=3),
        ["tony", _tag("tony-dag", "nightly"), _tag("tony-task", "eval"), _tag("tony-run", "r" * 120), "tony-map:-1"],
        ["tony"],  # tony submit: no identity
    ]
    assert retention.active_folders(f"hdfs://nn:8020{BASE}", running) == [
        f"{BASE}/checkpoints/nightly/eval",
        f"{BASE}/checkpoints/nightly/train/backfill/map-3",
        f"{BASE}/checkpoints/nightly/train/manual__2026-01-01t00_00_00_00_00",
    ]


def test_a_running_older_run_beyond_keep_runs_is_kept(tmp_path: Path) -> None:
    """Before: the operator protected only its own run, so a still-running older run (a manual run, a
    backfill) beyond keep_runs lost its checkpoints; ``tony gc`` protected only TensorBoard folders."""
    hdfs = planted(tmp_path)
    active = retention.active_folders(BASE, [_app_tags("nightly", "train", "run1"), _app_tags("x", "y", "z")])
    items = retention.scan(hdfs, BASE, active=active)
    assert names(plan(items, Policy(keep_runs=1, max_age_days=30), NOW)) == {
        "checkpoints/nightly/train/run2",
        "checkpoints/nightly/train/run3/ckpt-000000000010.damaged-1-0-7",
        "history/application_1_0001.json",
        "src/aaaa.tar.gz",
        "cache/tony_runtime-old.zip",
    }, "run1 (40 days old, beyond keep_runs) is running: it stays"
    (run1,) = [i for i in items if i.path.endswith("/run1")]
    assert run1.protected == f"a running application uses {BASE}/checkpoints/nightly/train/run1"


def test_tony_gc_and_the_operator_protect_every_running_applications_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.unit.support.operator import operator, succeeded

    hdfs = planted(tmp_path)
    gc_client = GcClient(hdfs)
    gc_client.find_by_tags = lambda tags, active_only=True: [  # type: ignore[method-assign]
        SimpleNamespace(app_id="application_1_0009", tags=_app_tags("nightly", "train", "run1"))
    ]
    monkeypatch.setattr(cli, "_client", lambda: gc_client)
    assert cli.main(["gc", "--keep-runs", "1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "train/run2" in out and "train/run1" not in out, out

    runs = f"{BASE}/checkpoints/nightly/train"
    op, hook, ctx = operator(succeeded(), deferrable=False)
    op.job["retention"] = {"keep_runs": 1}
    hook.webhdfs = lambda: hdfs
    original = hook.find_by_tags
    hook.find_by_tags = lambda tags, active_only=True: (  # the cluster-wide list (no tags) holds a running run2
        [SimpleNamespace(tags=_app_tags("nightly", "train", "run2"))]
        if not tags
        else original(tags, active_only=active_only)
    )
    plant(hdfs, f"{runs}/manual__1/ckpt-000000000060/ckpt-60.index", 0)
    op.execute(ctx)
    left = sorted(p.name for p in (hdfs.root / runs.lstrip("/")).iterdir())
    assert "run2" in left and "run1" not in left, left


# --------------------------------------------------------------------------- staged files a running job localises
def _references(hdfs: TimedHdfs, app_id: str, paths: list[str]) -> None:
    """What the submitter writes beside the AM's files: every HDFS file YARN localises for ``app_id``."""
    hdfs.write(f"/user/airflow/.skein/{app_id}/{retention.REFERENCES_NAME}", data=retention.references_json(paths))


def test_a_staged_file_a_running_application_localises_stays_whatever_its_age(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A long job restarting a container on a new node localises its archives again: gc must not take them."""
    hdfs = planted(tmp_path)
    _references(hdfs, "application_1_0009", [f"hdfs://nn:8020{BASE}/src/aaaa.tar.gz", f"{BASE}/envs/bbbb.tar.gz"])
    monkeypatch.setattr(cli, "_client", lambda: GcClient(hdfs, running=("application_1_0009",)))
    assert cli.main(["gc", "--max-age-days", "30"]) == 0
    assert "4 removed" in capsys.readouterr().out
    assert hdfs.status(f"{BASE}/src/aaaa.tar.gz", strict=False), "the running job's source archive stayed"
    assert hdfs.status(f"{BASE}/cache/tony_runtime-old.zip", strict=False) is None, "what nobody names still goes"
    items = {i.path: i.protected for i in retention.scan(hdfs, BASE, referenced={f"{BASE}/src/aaaa.tar.gz"})}
    assert items[f"{BASE}/src/aaaa.tar.gz"] == "a running application localises it"
    assert items[f"{BASE}/envs/bbbb.tar.gz"] == ""


def test_a_running_application_without_references_keeps_every_staged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Submitted before references existed (or its file is not ours): what cannot be proven unused stays."""
    hdfs = planted(tmp_path)
    _references(hdfs, "application_1_0009", [f"{BASE}/envs/bbbb.tar.gz"])
    monkeypatch.setattr(cli, "_client", lambda: GcClient(hdfs, running=("application_1_0009", "application_1_0010")))
    assert cli.main(["gc", "--max-age-days", "30"]) == 0
    assert "3 removed" in capsys.readouterr().out, "runs, copies and history still go"
    assert hdfs.status(f"{BASE}/src/aaaa.tar.gz", strict=False)
    assert hdfs.status(f"{BASE}/cache/tony_runtime-old.zip", strict=False)


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (retention.references_json(["hdfs://nn:8020/a/b", "/c"]), {"/a/b", "/c"}),
        (b'{"version": 1, "paths": ["/a", 7]}', {"/a"}),
        (b'["/a"]', None),
        (b'{"paths": "/a"}', None),
        (b"not json", None),
        (b'{"paths": ["/a"], "x": "' + b"y" * retention.MAX_REFERENCES_BYTES + b'"}', None),
    ],
)
def test_a_references_file_is_read_only_when_it_is_ours(tmp_path: Path, content: bytes, found: set[str] | None) -> None:
    hdfs = TimedHdfs(tmp_path / "hdfs")
    hdfs.write(f"/user/airflow/.skein/app/{retention.REFERENCES_NAME}", data=content)
    assert retention.read_references(hdfs, "/user/airflow/.skein/app") == found
    assert retention.read_references(hdfs, "/user/airflow/.skein/none") is None
