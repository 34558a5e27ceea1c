"""Files the submitting side and the executors reuse from a shared machine's disk.

Airflow workers, edge nodes and NodeManager hosts are shared: another local
user can create files first under a name we would use. These tests play that
user (``nobody``, through ``runuser``) and plant a runtime zip, a symlink and
a lease directory; the provider must neither ship, write through nor trust them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from airflow_provider_tony.yarn import appspec
from tests._util import as_other_user, can_act_as_other_user, shared_tmp

pytestmark = pytest.mark.skipif(not can_act_as_other_user(), reason="needs root and runuser to act as a second user")

PLANT = """
import os, sys
directory, name, content = sys.argv[1], sys.argv[2], sys.argv[3]
if not os.path.isdir(directory):
    os.makedirs(directory)
    os.chmod(directory, 0o777)
with open(os.path.join(directory, name), "w") as fh:
    fh.write(content)
"""

LINK = """
import os, sys
directory, name, target = sys.argv[1], sys.argv[2], sys.argv[3]
if not os.path.isdir(directory):
    os.makedirs(directory)
    os.chmod(directory, 0o777)
os.symlink(target, os.path.join(directory, name))
"""


@pytest.fixture
def systmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private stand-in for /tmp (world-writable, sticky) that the other user can reach."""
    path = shared_tmp()
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    monkeypatch.setattr(appspec, "_FALLBACK_DIR", None, raising=False)
    yield path
    shutil.rmtree(path)


def _old_and_new_names(tmp: Path) -> list[tuple[Path, str]]:
    """Every (directory, file name) where today's or yesterday's code keeps the zip."""
    digest = hashlib.sha256(appspec.runtime_zip_bytes()).hexdigest()
    return [
        (tmp / f"tony-runtime-{digest[:16]}", "tony_runtime.zip"),  # the layout before this fix
        (tmp / f"tony-{os.geteuid()}", f"tony_runtime-{digest[:16]}.zip"),
    ]


def _assert_private_and_genuine(path: Path) -> None:
    assert path.read_bytes() == appspec.runtime_zip_bytes(), "a planted zip would run in the AM and every executor"
    st = path.parent.lstat()
    assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o700, oct(st.st_mode)
    assert path.lstat().st_uid == os.geteuid() and not path.is_symlink()


def test_a_zip_planted_by_another_user_is_never_shipped(systmp: Path) -> None:
    for directory, name in _old_and_new_names(systmp):
        as_other_user(PLANT, str(directory), name, "import os; os.system('id')  # planted")
    _assert_private_and_genuine(appspec.runtime_zip_path())


def test_a_symlink_planted_by_another_user_is_not_written_through(tmp_path: Path, systmp: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for directory, name in _old_and_new_names(systmp):
        for planted in sorted({name, "tony_runtime.tmp", Path(name).with_suffix(".tmp").name}):
            as_other_user(LINK, str(directory), planted, str(victim))
    path = appspec.runtime_zip_path()
    assert victim.read_text() == "precious"
    _assert_private_and_genuine(path)
    assert appspec.runtime_zip_path() == path, "the private fallback directory serves the whole process"


def test_our_own_directory_is_reused_only_when_private_and_the_zip_only_when_its_hash_matches(systmp: Path) -> None:
    first = appspec.runtime_zip_path()
    assert first.parent == systmp / f"tony-{os.geteuid()}"
    first.write_bytes(b"corrupted or altered")
    assert appspec.runtime_zip_path() == first and first.read_bytes() == appspec.runtime_zip_bytes()
    first.parent.chmod(0o755)  # loosened by someone: no longer private
    moved = appspec.runtime_zip_path()
    assert moved.parent != first.parent
    _assert_private_and_genuine(moved)


# ---------------------------------------------------------------- GPU leases (runtime/gpu_lease.py)

FOUR = ["0", "1", "2", "3"]


def test_a_lease_directory_made_by_another_user_is_refused(tmp_path: Path) -> None:
    from airflow_provider_tony.runtime.errors import GpuLeaseError
    from airflow_provider_tony.runtime.gpu_lease import GpuLeases

    shared = shared_tmp()
    try:
        host = shared / "tony-gpu-leases" / "node1"
        as_other_user(PLANT, str(host), "gpu-9.lock", "nobody")  # owns both levels, mode 0777
        with pytest.raises(GpuLeaseError, match="belongs to uid"):
            GpuLeases(host, "me").try_acquire(FOUR, 1)
    finally:
        shutil.rmtree(shared)


def test_a_loose_lease_directory_of_ours_is_refused(tmp_path: Path) -> None:
    from airflow_provider_tony.runtime.errors import GpuLeaseError
    from airflow_provider_tony.runtime.gpu_lease import GpuLeases

    host = tmp_path / "leases" / "node1"
    host.mkdir(parents=True)
    host.chmod(0o777)  # others may delete our lock files: no sticky bit
    with pytest.raises(GpuLeaseError, match="sticky"):
        GpuLeases(host, "me").try_acquire(FOUR, 1)


def test_a_lease_file_planted_as_a_symlink_is_not_truncated_through(tmp_path: Path) -> None:
    from airflow_provider_tony.runtime.errors import GpuLeaseError
    from airflow_provider_tony.runtime.gpu_lease import GpuLeases

    shared = shared_tmp()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    try:
        host = shared / "node1"
        host.mkdir()
        host.chmod(0o1777)  # as the provider makes it: ours, sticky
        as_other_user(LINK, str(host), "gpu-0.lock", str(victim))
        with pytest.raises(GpuLeaseError, match="symlink"):
            GpuLeases(host, "me").try_acquire(FOUR, 1)
        assert victim.read_text() == "precious"
        assert GpuLeases(host, "me").holders(FOUR) == {"0": "an unreadable lease file"}
    finally:
        shutil.rmtree(shared)
