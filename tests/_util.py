"""Small helpers shared by the tests: waiting on conditions, reading the RM."""

from __future__ import annotations

import contextlib
import functools
import json
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

if TYPE_CHECKING:
    from airflow_provider_tony.runtime.messages import StateDocument

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float, what: str, interval: float = 0.25) -> T:
    """Poll ``check`` until it returns something truthy; fail the test naming ``what``.

    Tests wait on conditions, never on fixed sleeps: the interval is only how
    often we look, the timeout is a failure bound, not an expected duration.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last value: {last!r})")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.load(resp)


def rm_apps(rm_url: str, states: str | None = None, tag: str | None = None) -> list[dict]:
    """Applications known to the ResourceManager (REST), optionally filtered."""
    query = []
    if states:
        query.append(f"states={states}")
    if tag:
        query.append(f"applicationTags={tag}")
    url = f"{rm_url}/ws/v1/cluster/apps" + ("?" + "&".join(query) if query else "")
    apps = (get_json(url).get("apps") or {}).get("app") or []
    return apps


def rm_app(rm_url: str, app_id: str) -> dict:
    return get_json(f"{rm_url}/ws/v1/cluster/apps/{app_id}")["app"]


OTHER_USER = "nobody"


def can_act_as_other_user() -> bool:
    """Whether this test process may run commands as a second local user (root with runuser)."""
    import os
    import shutil

    return os.geteuid() == 0 and shutil.which("runuser") is not None


def as_other_user(code: str, *args: str) -> None:
    """Run Python ``code`` (``sys.argv[1:]`` = ``args``) as another local user, ``nobody``.

    The system interpreter runs it with ``-I`` (no site, no environment), so
    the other user needs nothing of ours. Arguments travel as argv, never
    through a shell.
    """
    import subprocess

    done = subprocess.run(
        ["runuser", "-u", OTHER_USER, "--", "/usr/bin/python3", "-I", "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        raise AssertionError(f"as {OTHER_USER}: {done.stderr[-2000:]}")


def shared_tmp() -> Path:
    """A fresh world-writable, sticky directory like /tmp that the other user can reach."""
    import os
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="tony-shared-", dir="/tmp"))  # noqa: S108 - a second /tmp on purpose
    os.chmod(path, 0o1777)
    return path


def load_script(relative: str, name: str) -> Any:
    """A script of this repository (not a package module) loaded as module ``name``.

    Registered in ``sys.modules`` first: a dataclass in it looks its module up there.
    """
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _airflow_stack() -> Any:
    return load_script("devcluster/airflow_stack.py", "tony_airflow_stack")


#: Where the tripwire ``java`` of ``without_java`` lives, in every env it made.
JAVA_TRIPWIRE_ENV = "TONY_TEST_JAVA_TRIPWIRE"


def without_java(env: dict[str, str], tripwire_dir: Path) -> dict[str, str]:
    """``env`` with no JDK visible and a tripwire ``java`` (``devcluster/airflow_stack.py``'s)."""
    return {**_airflow_stack().without_java(env, tripwire_dir), JAVA_TRIPWIRE_ENV: str(tripwire_dir)}


def assert_no_java_started(env: dict[str, str]) -> None:
    """Fail when anything run with ``env`` (Airflow, ``tony``) tried to start ``java``."""
    if JAVA_TRIPWIRE_ENV not in env:  # an env not made by without_java: nothing to check
        return
    calls = _airflow_stack().java_calls(Path(env[JAVA_TRIPWIRE_ENV]))
    assert not calls, f"something on the Airflow side tried to run java (no JDK is needed there): {calls}"


@functools.lru_cache(maxsize=1)
def hide_jdks_prefix() -> tuple[str, ...]:
    """``devcluster/airflow_stack.py``'s (probed once per process): a prefix under which ``/usr/lib/jvm`` is empty."""
    return tuple(_airflow_stack().hide_jdks_prefix())


def run_tony_without_jdk(
    *args: str, tripwire_dir: Path, env: dict[str, str] | None = None, timeout: float = 600
) -> Any:
    """``python -m airflow_provider_tony ARGS`` as on an Airflow image without a JDK: no ``JAVA_HOME``,
    a tripwire ``java`` first on ``PATH`` and, where the kernel lets root make a private mount,
    nothing under ``/usr/lib/jvm`` at all. Fails the test if anything tried to run ``java``."""
    import os
    import subprocess
    import sys

    hidden = without_java(dict(os.environ if env is None else env), tripwire_dir)
    cmd = [*hide_jdks_prefix(), sys.executable, "-m", "airflow_provider_tony", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=hidden)
    assert_no_java_started(hidden)
    return out


@contextlib.contextmanager
def cpu_load(per_cpu: int = 1) -> Iterator[list[Any]]:
    """``per_cpu`` busy processes per CPU for the block: every core contended, as in CI.

    Plain ``python -c`` loops at normal priority, so that everything else
    (the AM, the executors, the daemons) waits its turn for a core; killed
    and reaped when the block ends, whatever happened in it.
    """
    import os
    import subprocess
    import sys

    hogs = [
        subprocess.Popen([sys.executable, "-I", "-c", "while True: pass"])
        for _ in range(per_cpu * (os.cpu_count() or 1))
    ]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait(timeout=30)


@contextlib.contextmanager
def serving(body: bytes, content_type: str | None = None) -> Iterator[int]:
    """A loopback HTTP server answering every GET with ``body`` for the block; its port.

    It stands in for a page elsewhere (another origin, an upstream server) and is shut down
    whatever happened in the block.
    """
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(200)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def step_of(doc: StateDocument | None, task_id: str) -> int:
    task = doc.task(task_id) if doc is not None else None
    return task.progress.step or 0 if task is not None and task.progress is not None else 0
