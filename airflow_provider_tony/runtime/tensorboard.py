"""The ``tensorboard`` role: serve the chief's event files, pulled from HDFS while the job runs.

The events travel through ``<checkpoint.dir>/tensorboard`` when the job has a
checkpoint folder, else through ``<base_path>/tensorboard/<application id>``
(``checkpoint.events_remote``): the chief writes them under
``$TONY_TENSORBOARD_DIR`` and its executor mirrors that folder every few
seconds and once more when the script ends.

Declare it as ``tensorboard: {module: airflow_provider_tony.runtime.tensorboard}``;
it is reached on the port its executor reserved (``$TONY_PORT``), which the AM
registers as a page of skein's web UI, so people reach it through the
ResourceManager's proxy and its ACLs (the operator's "TensorBoard" link).
Needs the ``tensorboard`` package in the job's Python environment.

TensorBoard has no authentication of its own, so it listens on loopback
only, and :class:`PeerGuard` forwards the reserved port to it for the AM's
host alone (where skein's UI runs behind the RM's proxy) and for this node's
loopback: a browser elsewhere on the network reaches it only through the
proxy, where YARN's view ACLs apply.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import hdfs_io, namenodes
from airflow_provider_tony.runtime.checkpoint import DirSync, events_remote
from airflow_provider_tony.runtime.transport import decode_spec

log = logging.getLogger("tony.tensorboard")

LOOPBACK = "127.0.0.1"


def allowed_peers(am_address: str | None, resolve: Callable[..., Iterable[Any]] = socket.getaddrinfo) -> frozenset[str]:
    """The addresses that may connect: loopback and every address of the AM's host.

    ``am_address`` is skein's ``SKEIN_APPMASTER_ADDRESS`` (``host:port``); skein's
    web UI, which proxies the page, runs in the AM's container.
    """
    allowed = {LOOPBACK, "::1"}
    host = (am_address or "").rsplit(":", 1)[0].strip("[]")
    if host:
        try:
            allowed |= {str(info[4][0]) for info in resolve(host, None)}
        except OSError as exc:
            log.warning("cannot resolve the AM's host %r (%s): TensorBoard answers loopback only", host, exc)
    return frozenset(allowed)


class PeerGuard(threading.Thread):
    """Forward ``port`` (all interfaces) to ``target`` on loopback for ``allowed`` peers only."""

    def __init__(self, port: int, target: int, allowed: frozenset[str]) -> None:
        super().__init__(name="tony-tensorboard-guard", daemon=True)
        self.target = target
        self.allowed = allowed
        self.server = socket.create_server(("", port))

    @property
    def port(self) -> int:
        return int(self.server.getsockname()[1])

    def run(self) -> None:
        while True:
            try:
                conn, peer = self.server.accept()
            except OSError:  # closed
                return
            if peer[0] not in self.allowed:
                log.warning("refused a connection to TensorBoard from %s: only the AM's host reaches it", peer[0])
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            upstream = socket.create_connection((LOOPBACK, self.target), timeout=30)
        except OSError:
            conn.close()
            return
        upstream.settimeout(None)
        back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
        back.start()
        _pump(conn, upstream)
        back.join()

    def close(self) -> None:
        self.server.close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src`` to ``dst`` until EOF, then close both directions' write side."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


COLAB_FLAG = "tensorboardColab"


# The browser, not the server, must carry the flag: skein's UI follows an HTTP redirect itself and
# hands the browser the page under the old URL, where TensorBoard's code does not see the flag.
_TO_GET_ONLY = (
    b'<!doctype html><meta charset="utf-8"><title>TensorBoard</title><script>'
    b"var q = new URLSearchParams(location.search); q.set('" + COLAB_FLAG.encode() + b"', 'true');"
    b"location.replace('?' + q.toString() + (location.hash || '#scalars'));</script>"
)


def get_only(app: Callable[..., Any]) -> Callable[..., Any]:
    """Send a browser opening TensorBoard's page to its GET-only mode (``?tensorboardColab=true``).

    People reach TensorBoard through the ResourceManager's web proxy, which
    answers every method but GET with 405, and answers 500 to a query holding
    a quote (it decodes the query and cannot rebuild the URI). TensorBoard's
    default Time Series dashboard fetches its scalars with POST, or in its
    Colab mode with GET and a JSON query: through the proxy its charts stay
    empty either way. Its Scalars dashboard in Colab mode asks with plain GETs
    (``scalars?run=train&tag=epoch_loss``), which pass. The page's first load
    replaces its own URL by one with the flag and, unless another dashboard
    was asked for, ``#scalars`` (relative: it stays under the proxy's URL).
    """

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if (
            environ.get("REQUEST_METHOD") == "GET"
            and environ.get("PATH_INFO", "/") in ("", "/", "/index.html")
            and f"{COLAB_FLAG}=" not in environ.get("QUERY_STRING", "")
        ):
            headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(_TO_GET_ONLY)))]
            start_response("200 OK", headers + [("Cache-Control", "no-store")])
            return [_TO_GET_ONLY]
        return app(environ, start_response)

    return wrapped


def _free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def main() -> int:
    spec = decode_spec(os.environ[C.ENV_JOB_SPEC])
    logdir = Path(os.environ[C.ENV_TENSORBOARD_DIR])
    logdir.mkdir(parents=True, exist_ok=True)
    events = events_remote(spec, os.environ.get(C.ENV_EVENTS_DIR), os.environ.get(C.ENV_SKEIN_APPLICATION_ID, ""))
    # Under checkpoint.dir, on its NameNode (runtime/namenodes.py); else under base_path, on the default one.
    clients = hdfs_io.Clients()
    client = namenodes.pick(clients, spec.checkpoint.dir or events) if events and clients.default() else None
    if client is not None and events is not None:
        DirSync(client, logdir, events, interval=5.0, push=False).start()
    else:
        print("TensorBoard has no events folder on HDFS to read (no WebHDFS address): it shows nothing", flush=True)
    from tensorboard import program

    inner = _free_loopback_port()
    guard = PeerGuard(int(os.environ[C.ENV_PORT]), inner, allowed_peers(os.environ.get("SKEIN_APPMASTER_ADDRESS")))
    guard.start()
    board = program.TensorBoard(server_class=lambda app, flags: program.WerkzeugServer(get_only(app), flags))
    board.configure(
        argv=[None, "--logdir", str(logdir), "--host", LOOPBACK, "--port", str(inner), "--reload_interval", "5"]
    )
    print(f"TensorBoard serving {logdir} on port {guard.port} (the AM's host only)", flush=True)
    board.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
