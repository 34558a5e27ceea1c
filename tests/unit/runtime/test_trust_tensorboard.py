"""TensorBoard is reachable only through the ResourceManager's proxy (issue 27, point 9).

TensorBoard has no authentication; it used to listen on every interface
(``--bind_all``), so anyone on the network could read a job's TensorBoard
whatever YARN's view ACLs said. Now it listens on loopback and a guard
forwards the reserved port for the AM's host (skein's UI proxies from there)
and loopback only.
"""

from __future__ import annotations

import sys
import threading
import types
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import tensorboard as tb
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.transport import encode_spec
from tests._util import serving


@pytest.fixture
def upstream() -> Iterator[int]:
    """A loopback HTTP server standing in for TensorBoard."""
    with serving(b"tensorboard") as port:
        yield port


def test_the_ams_host_and_loopback_are_allowed() -> None:
    def resolve(host: str, port: object) -> list[tuple]:
        assert host == "am-node.example.com"
        return [(2, 1, 6, "", ("10.0.0.7", 0)), (10, 1, 6, "", ("fd00::7", 0, 0, 0))]

    assert tb.allowed_peers("am-node.example.com:41234", resolve) == {"127.0.0.1", "::1", "10.0.0.7", "fd00::7"}
    assert tb.allowed_peers(None, resolve) == {"127.0.0.1", "::1"}


def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as resp:
        return resp.read().decode()


def test_the_guard_forwards_for_allowed_peers_only(upstream: int) -> None:
    ok = tb.PeerGuard(0, upstream, frozenset({"127.0.0.1"}))
    ok.start()
    refused = tb.PeerGuard(0, upstream, frozenset({"10.255.255.1"}))
    refused.start()
    try:
        assert _get(ok.port) == "tensorboard"
        assert _get(ok.port) == "tensorboard", "one connection after another"
        with pytest.raises(OSError):  # closed without an answer
            _get(refused.port)
    finally:
        ok.close()
        refused.close()


def test_tensorboard_itself_listens_on_loopback_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: ``--bind_all`` on the reserved port, reachable from the whole network."""
    seen: dict[str, Any] = {}

    class FakeBoard:
        def __init__(self, server_class: Any = None) -> None:
            seen["server_class"] = server_class

        def configure(self, argv: list) -> None:
            seen["argv"] = argv

        def main(self) -> None:
            seen["guard"] = [t for t in threading.enumerate() if type(t).__name__ == "PeerGuard"]

    fake = types.ModuleType("tensorboard")
    fake.program = types.SimpleNamespace(TensorBoard=FakeBoard)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tensorboard", fake)
    spec = JobSpec.from_dict({"roles": {"worker": {"command": ["true"]}}})
    monkeypatch.setenv(C.ENV_JOB_SPEC, encode_spec(spec))
    monkeypatch.setenv(C.ENV_TENSORBOARD_DIR, str(tmp_path / "tb"))
    monkeypatch.setenv(C.ENV_PORT, "0")
    assert tb.main() == 0
    argv = seen["argv"]
    assert "--bind_all" not in argv and argv[argv.index("--host") + 1] == "127.0.0.1"
    assert seen["guard"], "the reserved port is served by the guard"
    assert seen["server_class"] is not None, "the page is wrapped by get_only"
    for guard in seen["guard"]:
        guard.close()


def _call(app: Any, method: str = "GET", path: str = "/", query: str = "") -> tuple[str, bytes]:
    status: list[str] = []
    body = app(
        {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query},
        lambda s, headers: status.append(s),
    )
    return status[0], b"".join(body)


def test_the_first_page_load_goes_to_tensorboards_get_only_scalars_view() -> None:
    """Through YARN's proxy (405 for POST, 500 for a quote in a query) only the Scalars view in
    TensorBoard's Colab mode gets its data: the first load of the page asks for it."""

    def board(environ: dict, start_response: Any) -> list[bytes]:
        start_response("200 OK", [])
        return [b"tensorboard"]

    app = tb.get_only(board)
    status, body = _call(app)
    assert status == "200 OK" and b"q.set('tensorboardColab', 'true')" in body and b"'#scalars'" in body
    for call in ({"query": "tensorboardColab=true"}, {"method": "POST"}, {"path": "/data/runs"}):
        assert _call(app, **call) == ("200 OK", b"tensorboard"), call
