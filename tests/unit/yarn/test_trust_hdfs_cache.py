"""Cached uploads on HDFS are reused only when they are provably ours (issue 27, point 11).

``<base_path>/envs`` and ``<base_path>/src`` hold uploads named by their content
hash; before, any file of that name was reused, whoever wrote it, and it then
ran in every container of the job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.yarn.client import TonyClient

BASE = "/user/alice/tony"


class FakeHdfs:
    """WebHDFS ``status`` and the calls ``publish`` makes, over a dict of paths."""

    def __init__(self, entries: dict[str, dict[str, Any]]) -> None:
        self.entries = entries
        self.uploads: list[str] = []

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        return self.entries.get(path.rstrip("/") or "/")

    def makedirs(self, path: str) -> None:
        pass

    def upload(self, remote: str, local: str, **kwargs: Any) -> None:
        self.uploads.append(remote)
        self.entries[remote] = _file("alice", "644", Path(local).stat().st_size)

    def rename(self, src: str, dst: str) -> None:
        self.entries[dst] = self.entries.pop(src)

    def delete(self, path: str, recursive: bool = False) -> bool:
        return self.entries.pop(path, None) is not None


def _dir(owner: str, perm: str) -> dict[str, Any]:
    return {"type": "DIRECTORY", "owner": owner, "permission": perm, "length": 0}


def _file(owner: str, perm: str, length: int) -> dict[str, Any]:
    return {"type": "FILE", "owner": owner, "permission": perm, "length": length}


def _tree(envs_perm: str = "755", envs_owner: str = "alice", user_perm: str = "755") -> dict[str, dict[str, Any]]:
    return {
        "/": _dir("hdfs", "755"),
        "/user": _dir("hdfs", user_perm),
        "/user/alice": _dir("alice", "755"),
        BASE: _dir("alice", "755"),
        f"{BASE}/envs": _dir(envs_owner, envs_perm),
    }


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "env.tar.gz"
    path.write_bytes(b"our environment")
    return path


def _client(monkeypatch: pytest.MonkeyPatch, fake: FakeHdfs) -> TonyClient:
    client = TonyClient(rm_url="http://rm:8088", webhdfs_url="http://nn:9870", webhdfs_user="alice", base_path=BASE)
    monkeypatch.setattr(client, "hdfs", lambda: fake)
    monkeypatch.setattr(TonyClient, "webhdfs", property(lambda self: fake))
    monkeypatch.setattr(client, "default_fs", lambda: "hdfs://nn:8020")
    return client


def _remote(archive: Path) -> str:
    import hashlib

    return f"{BASE}/envs/{hashlib.sha256(archive.read_bytes()).hexdigest()[:24]}.tar.gz"


def test_our_own_cached_environment_is_reused(monkeypatch, archive: Path) -> None:
    fake = FakeHdfs(_tree() | {_remote(archive): _file("alice", "644", archive.stat().st_size)})
    assert _client(monkeypatch, fake).stage_archive(str(archive)) == f"hdfs://nn:8020{_remote(archive)}"
    assert fake.uploads == []


@pytest.mark.parametrize(
    "planted",
    [_file("mallory", "644", 15), _file("alice", "666", 15), _file("alice", "644", 999)],
    ids=["another-owner", "writable-by-others", "wrong-size"],
)
def test_a_cached_environment_that_is_not_provably_ours_is_uploaded_again(monkeypatch, archive, planted) -> None:
    """Before: any file under the hash's name was reused (mallory's would have run in every container)."""
    fake = FakeHdfs(_tree() | {_remote(archive): planted})
    _client(monkeypatch, fake).stage_archive(str(archive))
    assert len(fake.uploads) == 1 and fake.entries[_remote(archive)]["owner"] == "alice"


@pytest.mark.parametrize(
    "tree",
    [_tree(envs_perm="777"), _tree(envs_owner="mallory"), _tree(user_perm="777")],
    ids=["envs-writable-by-others", "envs-of-another-user", "an-ancestor-world-writable-without-sticky"],
)
def test_a_cache_folder_others_can_write_to_is_refused(monkeypatch, archive, tree) -> None:
    fake = FakeHdfs(tree | {_remote(archive): _file("alice", "644", archive.stat().st_size)})
    with pytest.raises(ClusterError, match="go-w|sticky"):
        _client(monkeypatch, fake).stage_archive(str(archive))
    assert fake.uploads == []


def test_a_sticky_world_writable_ancestor_like_tmp_is_fine(monkeypatch, archive) -> None:
    fake = FakeHdfs(_tree(user_perm="1777") | {_remote(archive): _file("alice", "644", archive.stat().st_size)})
    _client(monkeypatch, fake).stage_archive(str(archive))
    assert fake.uploads == []


class WritingHdfs(FakeHdfs):
    """Also ``write`` (the small-file cache), recording each write's permission."""

    def __init__(self, entries: dict[str, dict[str, Any]]) -> None:
        super().__init__(entries)
        self.writes: list[tuple[str, str | None]] = []

    def write(self, path: str, data: bytes, overwrite: bool = False, permission: str | None = None) -> None:
        self.writes.append((path, permission))
        self.entries[path] = _file("alice", permission or "644", len(data))

    def rename(self, src: str, dst: str) -> None:
        if dst not in self.entries:  # WebHDFS refuses to rename onto an existing file
            super().rename(src, dst)


def _data_client(monkeypatch: pytest.MonkeyPatch, fake: FakeHdfs) -> TonyClient:
    return _client(monkeypatch, fake)


def _cached_name(data: bytes, name: str, suffix: str) -> str:
    import hashlib

    return f"{BASE}/cache/{name}-{hashlib.sha256(data).hexdigest()[:24]}{suffix}"


def test_a_private_small_file_is_written_0600_once_and_reused(monkeypatch) -> None:
    fake = WritingHdfs({**_tree(), f"{BASE}/cache": _dir("alice", "755")})
    client = _data_client(monkeypatch, fake)
    key = b"-----BEGIN PRIVATE KEY-----"
    remote = client.cache.data(key, "skein-key", ".pem", True)
    assert remote == _cached_name(key, "skein-key", ".pem")
    (written,) = fake.writes
    assert written[1] == "600" and written[0].startswith(f"{remote}.tmp-"), "0600 from the first byte"
    assert fake.entries[remote]["permission"] == "600" and not any(".tmp-" in p for p in fake.entries)
    assert client.cache.data(key, "skein-key", ".pem", True) == remote
    assert len(fake.writes) == 1, "the second submit reuses it"


@pytest.mark.parametrize("perm", ["640", "604"])
def test_a_cached_key_others_may_read_is_written_again(monkeypatch, perm: str) -> None:
    key = b"-----BEGIN PRIVATE KEY-----"
    remote = _cached_name(key, "skein-key", ".pem")
    fake = WritingHdfs({**_tree(), f"{BASE}/cache": _dir("alice", "755"), remote: _file("alice", perm, len(key))})
    client = _data_client(monkeypatch, fake)
    assert client.cache.data(key, "skein-key", ".pem", True) == remote
    assert len(fake.writes) == 1 and fake.entries[remote]["permission"] == "600"


def test_a_public_small_file_may_be_read_by_others_but_not_written(monkeypatch) -> None:
    script = b"exec python -m executor\n"
    remote = _cached_name(script, "launch", ".sh")
    fake = WritingHdfs({**_tree(), f"{BASE}/cache": _dir("alice", "755"), remote: _file("alice", "644", len(script))})
    client = _data_client(monkeypatch, fake)
    assert client.cache.data(script, "launch", ".sh", False) == remote
    assert fake.writes == [], "our 0644 script is reused"
    fake.entries[remote] = _file("mallory", "644", len(script))
    client2 = _data_client(monkeypatch, fake)
    client2.cache.data(script, "launch", ".sh", False)
    assert fake.writes and fake.entries[remote]["owner"] == "alice", "someone else's file is replaced"


def test_a_copy_a_racing_submit_published_first_is_kept_not_replaced(monkeypatch) -> None:
    """Two first submits at once: the one whose rename loses leaves the winner's copy as it is
    (a job may already have taken its modification time: YARN refuses a file that changed)."""
    script = b"exec python -m executor\n"
    remote = _cached_name(script, "launch", ".sh")
    fake = WritingHdfs({**_tree(), f"{BASE}/cache": _dir("alice", "755")})
    racer = {**_file("alice", "644", len(script)), "modificationTime": 1}

    def write_while_the_racer_wins(path: str, data: bytes, overwrite: bool = False, permission: str | None = None):
        WritingHdfs.write(fake, path, data, overwrite, permission)
        fake.entries[remote] = dict(racer)  # published between our check and our rename

    fake.write = write_while_the_racer_wins  # type: ignore[method-assign]
    deleted: list[str] = []
    real_delete = fake.delete
    fake.delete = lambda path, recursive=False: deleted.append(path) or real_delete(path, recursive)  # type: ignore[method-assign]
    client = _data_client(monkeypatch, fake)
    assert client.cache.data(script, "launch", ".sh", False) == remote
    assert fake.entries[remote] == racer, "the winner's copy is untouched"
    assert remote not in deleted and not any(".tmp-" in p for p in fake.entries), "ours went, theirs stayed"


def test_a_cached_file_that_is_not_ours_is_replaced(monkeypatch, archive: Path) -> None:
    remote = _remote(archive)
    fake = WritingHdfs({**_tree(), remote: _file("mallory", "644", archive.stat().st_size)})
    client = _client(monkeypatch, fake)
    client.stage_archive(str(archive))
    assert fake.entries[remote]["owner"] == "alice" and fake.uploads and not any(".tmp-" in p for p in fake.entries)


@pytest.mark.parametrize("before", ["absent", "not-ours"])
def test_a_racing_submits_copy_published_between_the_two_looks_is_not_deleted(monkeypatch, before: str) -> None:
    """Issue 35, point 6: the first look judged the name absent (or someone else's copy), then a racing
    submit published its good copy; before, ``_put_once`` looked again and deleted whatever was there
    now, so that submit's job failed to localise a file that had vanished."""
    script = b"exec python -m executor\n"
    remote = _cached_name(script, "launch", ".sh")
    planted = {} if before == "absent" else {remote: {**_file("mallory", "644", len(script)), "modificationTime": 5}}
    fake = WritingHdfs({**_tree(), f"{BASE}/cache": _dir("alice", "755"), **planted})
    racer = {**_file("alice", "644", len(script)), "modificationTime": 7}
    looks = 0
    real_status = fake.status

    def status_while_the_racer_publishes(path: str, strict: bool = True) -> dict[str, Any] | None:
        nonlocal looks
        answer = real_status(path, strict)
        if path == remote:
            looks += 1
            if looks == 1:  # our first look is answered; the racer's rename lands right after it
                fake.entries[remote] = dict(racer)
        return answer

    fake.status = status_while_the_racer_publishes  # type: ignore[method-assign]
    deleted: list[str] = []
    real_delete = fake.delete
    fake.delete = lambda path, recursive=False: deleted.append(path) or real_delete(path, recursive)  # type: ignore[method-assign]
    assert _data_client(monkeypatch, fake).cache.data(script, "launch", ".sh", False) == remote
    assert remote not in deleted, "the racer's good copy was deleted"
    assert fake.entries[remote] == racer and not any(".tmp-" in p for p in fake.entries)
