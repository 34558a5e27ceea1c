"""The AM's small HTTP server: the state document, the metric history and the job page.

It runs in a daemon thread of the AM process and is registered with skein's
web UI (``ApplicationClient.ui.add_page``), so the ResourceManager's web proxy
reaches it at ``<tracking URL><proxy prefix>/<route>/`` (see ``page_url``), a
URL the submitting side knows as soon as it has the application id. Followers
read it with plain HTTP clients: no skein driver (a JVM) is needed to follow.

Routes (relative, so they work behind any proxy prefix):

==========  ====  ==================================================
``/``        GET  the job page (HTML)
``state``    GET  the newest state document (JSON, ``StateDocument``)
``history``  GET  state + metric history (JSON, ``JobHistory``)
``ack``      GET  a client has read the final state: the AM may stop
==========  ====  ==================================================

``ack`` is a GET although it changes something: the ResourceManager's web
proxy in front of skein's web UI answers any other method with HTTP 405. It
is harmless to repeat (it only shortens the AM's wait for a reader), and it
counts only once the published document holds the verdict: before that, any
process that reaches the port (on the AM's host, or through the proxy) could
otherwise end the AM's wait for a reader early (HTTP 409).

Every answer carries ``X-Content-Type-Options: nosniff`` and a
Content-Security-Policy that allows no script, no fetch and no embedding:
the page shows what training code wrote (escaped), and should an escape ever
be missed, the browser still runs nothing.

The AM hands the server the state document's bytes (``publish``); the
history is built on request under the AM's history lock, which its loop holds
only to append a point. Standard library only, like the rest of ``runtime/``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["PAGE_POLICY", "PAGE_ROUTE", "PROXY_PREFIX", "JobWebServer", "page_url"]

log = logging.getLogger("tony.web")

#: The route segment the AM registers with skein's web UI.
PAGE_ROUTE = "tony"
#: skein's web UI serves registered pages under this path (``WebUI.proxy_prefix`` in skein 0.8.2).
PROXY_PREFIX = "/pages"


def page_url(tracking_url: str, route: str = PAGE_ROUTE) -> str:
    """The job page through the ResourceManager's proxy, from the application's tracking URL.

    ``tracking_url`` is ``<rm>/proxy/<app_id>/`` (what the RM reports for a
    running skein application); the page is ``<rm>/proxy/<app_id>/pages/tony/``.
    """
    return f"{tracking_url.rstrip('/')}{PROXY_PREFIX}/{route}/"


# The page is for skein's web UI (in the AM container, on this host) to proxy,
# behind the ResourceManager's proxy and its authentication; nothing else needs
# to reach the port, so it is not opened to the network.
LOOPBACK = "127.0.0.1"

#: The page needs its inline style and data: images, nothing else: no script, no fetch, no form.
#: Who may frame it is the server's to add (the Airflow UI's view of a task allows its own origin).
PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
#: The AM's own answers: the page policy, and no frame at all.
CONTENT_SECURITY_POLICY = f"{PAGE_POLICY}; frame-ancestors 'none'"


class JobWebServer:
    """Serves what the AM last published; ``acknowledged`` is set by a client's GET of ``ack``.

    :param render: builds the page's HTML at request time (heartbeat ages are relative to the
        moment of viewing).
    :param history: the ``JobHistory`` as JSON, asked for only when someone reads it: it is the
        larger document, so the AM does not serialise it on every publication.
    """

    def __init__(
        self,
        render: Callable[[], str],
        history: Callable[[], bytes],
        *,
        host: str = LOOPBACK,
        port: int = 0,
    ) -> None:
        self.render = render
        self.history = history
        self.state_json = b"{}"
        self.final = False  # the published document holds the verdict: ``ack`` counts from then on
        self.acknowledged = threading.Event()
        server = self
        self._httpd = ThreadingHTTPServer((host, port), _handler(server))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="tony-web", daemon=True)

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    def start(self) -> JobWebServer:
        self._thread.start()
        return self

    def publish(self, state_json: bytes, *, final: bool = False) -> None:
        """Replace the state document served (one reference: a reader sees a whole document);
        ``final`` says it holds the verdict (only then is an ``ack`` accepted)."""
        self.state_json = state_json
        self.final = final

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _handler(server: JobWebServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "tony-am"

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            route = self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
            if route in ("", PAGE_ROUTE):
                try:
                    body = server.render().encode()
                except Exception as exc:
                    log.exception("rendering the job page failed")
                    self._send(500, f"could not render the page: {type(exc).__name__}".encode(), "text/plain")
                    return
                self._send(200, body, "text/html; charset=utf-8")
            elif route in ("state", "state.json"):
                self._send(200, server.state_json, "application/json")
            elif route in ("history", "history.json"):
                self._send(200, server.history(), "application/json")
            elif route == "ack":
                if not server.final:
                    self._send(409, b"no verdict yet: nothing to acknowledge", "text/plain")
                    return
                server.acknowledged.set()
                self._send(200, b"ok", "text/plain")
            else:
                self._send(404, b"not found: try state, history or the page itself", "text/plain")

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    return Handler


def now() -> float:
    return time.time()
