"""``runtime/nm_probe.py`` against a real local HTTP server standing in for a NodeManager's REST API."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from airflow_provider_tony.runtime import nm_probe
from airflow_provider_tony.runtime.messages import Registration

ANSWERS: dict[str, tuple[int, bytes]] = {
    "container_1_0001_01_000002": (200, json.dumps({"container": {"state": "RUNNING"}}).encode()),
    "container_1_0001_01_000003": (200, json.dumps({"container": {"state": "KILLING"}}).encode()),
    "container_1_0001_01_000004": (200, json.dumps({"container": {"state": "DONE"}}).encode()),
    "container_1_0001_01_000005": (404, b'{"RemoteException":{"exception":"NotFoundException"}}'),
    "container_1_0001_01_000006": (401, b"Authentication required"),
    "container_1_0001_01_000007": (200, b"<html>not json</html>"),
}


class _NodeManager(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        container = self.path.rsplit("/", 1)[-1]
        code, body = ANSWERS.get(container, (404, b"{}"))
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def nm_port() -> Iterator[int]:
    server = HTTPServer(("127.0.0.1", 0), _NodeManager)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    "container, ended",
    [
        ("container_1_0001_01_000002", False),  # running: a frozen executor, its node alive
        ("container_1_0001_01_000003", True),  # YARN is killing it
        ("container_1_0001_01_000004", True),
        ("container_1_0001_01_000005", True),  # reported to the RM and forgotten
        ("container_1_0001_01_000006", False),  # a Kerberized web UI's refusal: no word either way
        ("container_1_0001_01_000007", False),
    ],
)
def test_the_nodemanagers_answer_says_whether_the_container_ended(nm_port: int, container: str, ended: bool) -> None:
    assert nm_probe.container_ended("127.0.0.1", nm_port, container) is ended


def test_no_nodemanager_or_no_address_says_nothing_ended() -> None:
    with socket.socket() as sock:  # a port nothing listens on: the node is gone
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    assert nm_probe.container_ended("127.0.0.1", closed, "container_1_0001_01_000004") is False
    assert nm_probe.container_ended("127.0.0.1", None, "container_1_0001_01_000004") is False
    assert nm_probe.container_ended(None, 8042, "container_1_0001_01_000004") is False


def test_the_registration_carries_the_nodemanagers_web_port() -> None:
    doc = Registration(host="h", port=1, nm_http_port="8042").to_dict()  # type: ignore[arg-type]
    assert Registration.from_dict(doc).nm_http_port == 8042
    assert Registration.from_dict(Registration(host="h", port=1).to_dict()).nm_http_port is None
