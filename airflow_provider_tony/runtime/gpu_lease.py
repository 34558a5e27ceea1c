"""GPU sets that never overlap across applications on one node.

The application master divides a node's GPUs among the tasks of *its* job
(:func:`~airflow_provider_tony.runtime.gpu.assign_gpus`), but two jobs whose
containers land on the same node know nothing of each other and would both
hand out GPU 0. YARN itself pins devices only when the NodeManager runs the
LinuxContainerExecutor with cgroups (or the NVIDIA runtime); then its choice
is visible in ``NVIDIA_VISIBLE_DEVICES`` or in the NodeManager's REST view of
``yarn.io/gpu`` (:func:`yarn_assigned_gpus`), and we take it.

Otherwise each executor takes a *lease* per GPU: an exclusive ``flock`` on
``<lease dir>/gpu-<index>.lock``, a node-local file shared by every
container on the node. The executor holds the leases for the container's
life and passes the descriptors to the training process, so a GPU stays
leased while either lives; when both are gone, whatever killed them, the
kernel drops the locks: a crashed or killed container can never leave a GPU
taken. Leases are all-or-nothing (a task that cannot get all it wants
releases what it took and waits), so two jobs each holding half of what they
need can never block each other forever. The wait is bounded; then the task
fails with a message naming who holds the GPUs.

Pure choice logic is apart from the file locking, and the clock and sleep
are injectable, so both are testable without a GPU.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import GpuLeaseError

#: Where leases live unless ``TONY_GPU_LEASE_DIR`` says otherwise. It must be
#: on the node (not in a container's own directory) and shared by every
#: container there, whichever application or user runs it.
DEFAULT_LEASE_ROOT = "/tmp/tony-gpu-leases"  # noqa: S108 - a shared, sticky, node-wide dir on purpose
#: How often a waiting task looks again for free GPUs.
LEASE_POLL_S = 1.0
#: The NodeManager's REST view of its GPUs and which container holds which.
NM_GPU_RESOURCE_PATH = "/ws/v1/node/resources/yarn.io%2Fgpu"


def _device_key(device: str) -> tuple[int, int, str]:
    if device.isdigit() and device.isascii():
        return (0, int(device), "")
    return (1, 0, device)


def choose_devices(devices: Iterable[str], wanted: int, busy: Iterable[str]) -> list[str] | None:
    """The ``wanted`` lowest free devices, or ``None`` when fewer are free.

    Pure: ``busy`` is what other containers hold now. ``wanted`` 0 gives ``[]``.
    """
    if wanted < 0:
        raise GpuLeaseError(f"a task cannot want {wanted} GPUs; the count must be >= 0")
    taken = set(busy)
    free = [d for d in sorted(dict.fromkeys(devices), key=_device_key) if d not in taken]
    return free[:wanted] if len(free) >= wanted else None


def lease_dir(env: dict[str, str], host: str) -> Path:
    """The node's lease directory; per NodeManager host so that NodeManagers
    sharing one machine (a test cluster) keep separate GPU sets."""
    root = env.get(C.ENV_GPU_LEASE_DIR) or DEFAULT_LEASE_ROOT
    safe_host = "".join(c if c.isalnum() or c in "-._" else "_" for c in host) or "node"
    return Path(root) / safe_host


def check_lease_dir(path: Path, euid: int | None = None) -> None:
    """Refuse a lease directory another user could tamper with.

    Every lock file lives in it, so whoever may delete or swap them may take a
    GPU that another task holds. A directory (no symlink) owned by us or by
    root is trusted; if others may write to it, only with the sticky bit (then
    nobody removes another user's lock file, as in /tmp).
    """
    me = os.geteuid() if euid is None else euid
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise GpuLeaseError(f"the GPU lease directory {path} is a symlink or not a directory; remove it")
    if st.st_uid not in (me, 0):
        raise GpuLeaseError(
            f"the GPU lease directory {path} belongs to uid {st.st_uid}, neither this user ({me}) nor root, "
            "so its owner could delete the lock files of other users' tasks; remove it, or have the node's "
            f"admin create it as root with mode 1777 (or point {C.ENV_GPU_LEASE_DIR} at such a directory)"
        )
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        raise GpuLeaseError(
            f"the GPU lease directory {path} has mode {oct(st.st_mode & 0o7777)}: writable by others without "
            "the sticky bit, anyone could delete another task's lock file; chmod it 1777 or 0755"
        )


def _make_shared_dir(path: Path) -> None:
    """Create ``path`` so that every user's containers may add lock files (like /tmp);
    refuse an existing one (or a parent of ours) another user could tamper with."""
    for part in [*reversed(path.parents), path]:
        if part.exists():
            continue
        try:
            part.mkdir()
            part.chmod(0o1777)
        except FileExistsError:
            pass
    root = path.parent
    for part in (root, path):
        check_lease_dir(part)


class GpuLeases:
    """Exclusive, crash-safe leases on a node's GPUs, held by this process.

    ``owner`` is written into each lease file so a task that has to wait (or
    fail) can say who holds the GPUs; it is diagnostics only, the lock is
    the truth.
    """

    def __init__(self, directory: Path, owner: str) -> None:
        self.directory = directory
        self.owner = owner
        self._held: dict[str, int] = {}

    @property
    def devices(self) -> list[str]:
        return sorted(self._held, key=_device_key)

    @property
    def fds(self) -> list[int]:
        """Descriptors to pass to a child that must keep the leases alive."""
        return list(self._held.values())

    def _path(self, device: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in device)
        return self.directory / f"gpu-{safe}.lock"

    def _open(self, device: str) -> int:
        """Open (creating if need be) the device's lease file, usable by every user.

        An existing file is opened without ``O_CREAT``: Linux refuses an
        ``O_CREAT`` open of another user's file in a sticky world-writable
        directory (``fs.protected_regular``), which the lease directory is.
        """
        path = self._path(device)
        while True:
            try:
                return self._checked(path, os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK))
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # a symlink: we would truncate and write its target
                    raise GpuLeaseError(
                        f"the GPU lease file {path} is a symlink; someone planted it: remove it"
                    ) from None
                raise
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
            except FileExistsError:
                continue  # another container created it just now: open theirs
            os.fchmod(fd, 0o666)  # not the umask's 0644: other users' containers lease it too
            return fd

    @staticmethod
    def _checked(path: Path, fd: int) -> int:
        """``fd`` if it is a regular file (a FIFO or device planted under the name is refused)."""
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise GpuLeaseError(f"the GPU lease file {path} is not a regular file; remove it")
        return fd

    def _try_one(self, device: str) -> bool:
        fd = self._open(device)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{self.owner}\n".encode(), 0)
        self._held[device] = fd
        return True

    def try_acquire(self, devices: Sequence[str], wanted: int) -> list[str] | None:
        """All ``wanted`` leases at once, lowest free devices first, or none.

        Returns the leased devices, or ``None`` (holding nothing) when fewer
        than ``wanted`` are free now.
        """
        if self._held:
            raise GpuLeaseError(f"this process already holds GPU leases {self.devices}; release them first")
        _make_shared_dir(self.directory)
        for device in sorted(dict.fromkeys(devices), key=_device_key):
            if len(self._held) == wanted:
                break
            self._try_one(device)
        if len(self._held) < wanted:
            self.release()
            return None
        return self.devices

    def holders(self, devices: Sequence[str]) -> dict[str, str]:
        """Who holds each of ``devices`` that is leased now (by its lease file)."""
        held: dict[str, str] = {}
        for device in devices:
            if device in self._held:
                continue
            path = self._path(device)
            if not path.exists():
                continue
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                held[device] = "an unreadable lease file"
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except OSError:
                    held[device] = _owner_text(os.pread(fd, 256, 0)) or "another process"
                else:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        return held

    def acquire(
        self,
        devices: Sequence[str],
        wanted: int,
        timeout: float,
        on_wait: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[str]:
        """Wait up to ``timeout`` seconds for ``wanted`` GPUs among ``devices``.

        Fails at once when the node does not have that many GPUs at all, and
        after ``timeout`` when they stayed taken; never shares a GPU.
        """
        if wanted == 0:
            return []
        if len(set(devices)) < wanted:
            raise GpuLeaseError(
                f"this node has {len(set(devices))} GPU(s) {sorted(set(devices), key=_device_key)} but the task "
                f"wants {wanted}; lower the role's gpus, or check that YARN and nvidia-smi agree on the node's GPUs"
            )
        deadline = clock() + timeout
        told = False
        while True:
            got = self.try_acquire(devices, wanted)
            if got is not None:
                return got
            busy = self.holders(devices)
            message = (
                f"{len(busy)} of this node's {len(set(devices))} GPUs are leased by other containers "
                f"({_describe(busy)}); this task wants {wanted}"
            )
            if clock() >= deadline:
                raise GpuLeaseError(
                    f"{message}, and they stayed taken for {timeout:g}s; YARN placed more GPU containers on the "
                    "node than it has free GPUs (is another GPU workload running outside YARN?), so the task "
                    "fails rather than share a GPU"
                )
            if on_wait is not None and not told:
                on_wait(f"{message}; waiting up to {timeout:g}s")
                told = True
            sleep(min(LEASE_POLL_S, max(0.0, deadline - clock())))

    def release(self) -> None:
        for fd in self._held.values():
            os.close(fd)  # closing the last descriptor drops the lock
        self._held.clear()


def _owner_text(raw: bytes) -> str:
    """A lease file's owner line as diagnostics: printable, one line, short (another user writes it)."""
    text = raw.decode(errors="replace").strip()
    return "".join(c if c.isprintable() else "?" for c in text)[:120]


def _describe(holders: dict[str, str]) -> str:
    return ", ".join(f"GPU {d}: {who}" for d, who in sorted(holders.items(), key=lambda i: _device_key(i[0])))


def parse_nm_gpu_resource(doc: dict[str, Any], container_id: str) -> list[str] | None:
    """The GPU indices the NodeManager assigned to ``container_id``, from its REST view.

    ``None`` when it assigned none to this container: under the
    DefaultContainerExecutor the NodeManager counts GPUs but never assigns
    devices, and the caller then takes leases itself.
    """
    assigned = doc.get("assignedGpuDevices") or []
    if isinstance(assigned, dict):  # Jersey renders a one-element list as the element
        assigned = [assigned]
    mine = [
        str(d.get("index"))
        for d in assigned
        if isinstance(d, dict) and d.get("containerId") == container_id and d.get("index") is not None
    ]
    return sorted(dict.fromkeys(mine), key=_device_key) or None


def yarn_assigned_gpus(
    nm_http_address: str | None, container_id: str | None, fetch: Callable[[str], dict[str, Any]] | None = None
) -> list[str] | None:
    """Ask the NodeManager which GPUs YARN pinned to this container, if any.

    Any failure (no address, an older NodeManager without the endpoint, a
    timeout) means "not known", never an error: leases are the fallback.
    """
    if not nm_http_address or not container_id:
        return None
    url = f"http://{nm_http_address}{NM_GPU_RESOURCE_PATH}"

    def _get(u: str) -> dict[str, Any]:
        req = urllib.request.Request(u, headers={"Accept": "application/json"})  # noqa: S310 - http:// built above
        with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310 - the node's own NodeManager
            data = json.load(resp)
        return data if isinstance(data, dict) else {}

    try:
        doc = (fetch or _get)(url)
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return parse_nm_gpu_resource(doc, container_id)
