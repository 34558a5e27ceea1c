"""Fresh HDFS delegation tokens for jobs that outlive the token's maximum lifetime.

Why: the HDFS token YARN gives an application is renewed by the
ResourceManager, but only up to its maximum lifetime
(``dfs.namenode.delegation.token.max-lifetime``: 7 days by default, often one
day in companies). After that date every WebHDFS call of the job's
containers is refused, so a job of days stops uploading checkpoints. As
Spark's and Flink's application masters do, the AM then needs a keytab: with
``kerberos.refresh_tokens`` the submitter ships the connection's keytab to
the AM container only (never to task containers), and the AM

* logs in from it into a private in-memory ticket cache, asks WebHDFS for a
  new token (``GETDELEGATIONTOKEN``, SPNEGO) with itself as renewer, and
  renews it once (``RENEWDELEGATIONTOKEN``), which makes WebHDFS tell when
  the token expires unless renewed again;
* writes it (a :class:`~airflow_provider_tony.runtime.messages.DelegationToken`)
  to a file of mode 0600 in the job user's staging folder on HDFS
  (``~/.skein/<app>/tony-hdfs-token-<seq>``, written under a temporary name,
  then renamed) and puts only a pointer to it
  (:class:`~airflow_provider_tony.runtime.messages.TokenPointer`) in the
  key-value store: skein's web UI lists that store's values to anyone with view
  rights on the application (``<rm>/proxy/<app>/kv``), and a token there would
  be the job user's HDFS access for each of them;
* obtains the next one after :data:`REFRESH_RATIO` of the time left before
  the earlier of that expiry and the token's maximum date (read from the
  token's own identifier), like Spark's ``renewalRatio``. With Hadoop's
  defaults (renew interval 1 day) that is one token every 18 hours.

The executors' WebHDFS client asks :class:`TokenSource` for its token on
every request: the application's own token (from the container's token file)
until the AM publishes one, then the newest published, read from the file the
pointer names with the token the executor holds (:class:`TokenFileReader`). When the token in use
has passed its end and no fresher one came (the keytab no longer logs in,
the KDC or NameNode is down), requests fail with a message naming the cause;
the checkpoint uploader retries them, and if no token comes within the job's
``checkpoint.upload_failure_window`` the task fails as retryable (exit 75 /
stopped by the executor), so Airflow retries it with a new application and
new tokens.

Tokens and the keytab are secrets: nothing here logs a token, and the
keytab's location is never printed. The pure parts (identifier dates, the
schedule, the token source) are tested without a cluster.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import ClusterError, KeytabCopyLeft, SpecError, TokenFileError
from airflow_provider_tony.runtime.hadoop_tokens import Token, _Reader
from airflow_provider_tony.runtime.messages import DelegationToken, EventRecord, TokenPointer

log = logging.getLogger("tony.tokens")

#: Share of the time left before a token's end after which the AM obtains the next one (Spark's default too).
REFRESH_RATIO = 0.75
#: Never refresh more often than this, whatever a (misconfigured) cluster says.
MIN_REFRESH_S = 5.0
#: Backoff after a failed refresh: the first retry after this, doubling up to RETRY_MAX_S.
RETRY_FIRST_S = 5.0
RETRY_MAX_S = 300.0
#: When WebHDFS tells neither an expiry nor a maximum date, refresh this often.
FALLBACK_REFRESH_S = 3600.0
#: How often an executor looks for a newer published token (its poller thread, and on a WebHDFS call).
EXECUTOR_POLL_S = 10.0


# ---------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class TokenDates:
    """``issueDate`` and ``maxDate`` of a delegation token, in seconds since the epoch."""

    issued: float
    max_date: float


def identifier_dates(identifier: bytes) -> TokenDates | None:
    """The dates in an HDFS delegation token's identifier, or None if it is not one we can read.

    ``AbstractDelegationTokenIdentifier.write``: a version byte (0), owner,
    renewer and real user as ``Text``, then ``issueDate`` and ``maxDate`` as
    variable-length longs (milliseconds), then the sequence and key numbers.
    """
    try:
        reader = _Reader(identifier)
        if reader.take(1) != b"\x00":
            return None
        for _ in range(3):
            reader.text()
        issued, max_date = reader.vint(), reader.vint()
    except (TokenFileError, UnicodeDecodeError):
        return None
    if not 0 < issued <= max_date:
        return None
    return TokenDates(issued / 1000.0, max_date / 1000.0)


def token_end(expires: float | None, max_date: float | None) -> float | None:
    """When a token stops working if nobody renews it: the earlier of its expiry and its maximum date."""
    known = [t for t in (expires, max_date) if t is not None]
    return min(known) if known else None


def next_refresh(now: float, expires: float | None, max_date: float | None, ratio: float = REFRESH_RATIO) -> float:
    """When to obtain the next token after one was obtained at ``now`` (all seconds since the epoch)."""
    end = token_end(expires, max_date)
    if end is None:
        return now + FALLBACK_REFRESH_S
    return now + max(MIN_REFRESH_S, ratio * (end - now))


def retry_delay(failures: int) -> float:
    """Seconds before the next try after ``failures`` failed refreshes in a row (1, 2, ...)."""
    return float(min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** max(0, failures - 1)))


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class TokenSource:
    """The delegation token an executor's WebHDFS client sends: swapped when the AM publishes a newer one.

    ``initial`` is the application's own token (renewed by the ResourceManager
    until its maximum date); ``refreshing`` says the job asked the AM for fresh
    tokens (only the error message depends on it); ``fetch`` reads the AM's latest
    :class:`DelegationToken` message (raw bytes, None when there is none). It
    is called on demand, at most every ``poll_s`` seconds, and whenever the
    token in use is at its end. ``clock`` is wall-clock time (token dates are
    wall-clock dates). Thread-safe: the checkpoint and TensorBoard syncs
    share one client.
    """

    def __init__(
        self,
        initial: Token,
        fetch: Callable[[], bytes | None] | None = None,
        *,
        refreshing: bool = False,
        poll_s: float = EXECUTOR_POLL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._refreshing = refreshing and fetch is not None
        self._url_string = initial.url_string()
        dates = identifier_dates(initial.identifier)
        self._end = dates.max_date if dates is not None else None
        # The application's own token, renewed by the ResourceManager up to its maximum date: what the
        # next token's file is read with when the one in use has passed its end between two polls.
        self._own = (self._url_string, self._end)
        self._seq = -1  # the application's own token: any published one is newer
        self._fetch = fetch
        self._poll_s = poll_s
        self._clock = clock
        self._last_poll: float | None = None
        self._lock = threading.Lock()

    @property
    def seq(self) -> int:
        """The published token in use (-1: the application's own)."""
        return self._seq

    @property
    def in_use(self) -> str:
        """The token to read the next token's file with, without looking for a newer one: the one sent
        now, or the application's own when that one has passed its end and the own one has not."""
        end, (own, own_end) = self._end, self._own
        now = self._clock()
        if end is not None and now >= end and (own_end is None or now < own_end):
            return own
        return self._url_string

    def poll(self) -> None:
        """Look for a newer published token now (what :meth:`start_polling`'s thread calls)."""
        if self._fetch is None:
            return
        with self._lock:
            self._last_poll = self._clock()
            self._take(self._fetch())

    def start_polling(self, interval: float = EXECUTOR_POLL_S) -> threading.Thread | None:
        """A daemon thread that polls every ``interval`` seconds, whether or not the job makes WebHDFS calls.

        A token from the AM is renewed once, so it ends a quarter of its lifetime
        after the AM publishes the next one; the next one's file must be read
        with a token that still works, and a task that uploads rarely would
        otherwise look only after its token had died. None without ``fetch``.
        """
        if self._fetch is None:
            return None

        def run() -> None:
            while not stop.wait(interval):
                try:
                    self.poll()
                except Exception as exc:  # noqa: BLE001 - the next poll tries again
                    log.warning("looking for a fresh HDFS token failed: %s", type(exc).__name__)

        stop = threading.Event()
        thread = threading.Thread(target=run, name="tony-token-poll", daemon=True)
        thread.start()
        return thread

    @property
    def end(self) -> float | None:
        """When the token in use stops working if no newer one comes (None: unknown)."""
        return self._end

    def current(self) -> str:
        """The token to send, as its URL string; raises ``ClusterError`` when it is past its end."""
        with self._lock:
            now = self._clock()
            expired = self._end is not None and now >= self._end
            due = self._last_poll is None or now - self._last_poll >= self._poll_s
            if self._fetch is not None and (due or expired):
                self._last_poll = now
                self._take(self._fetch())
                expired = self._end is not None and now >= self._end
            if expired:
                assert self._end is not None
                raise ClusterError(
                    f"the job's HDFS delegation token stopped working at {_utc(self._end)} "
                    + (
                        "and the application master has published no fresh one: see the AM's log for "
                        "why it could not obtain one from the keytab"
                        if self._refreshing
                        else "(the end of its maximum lifetime, dfs.namenode.delegation.token.max-lifetime): "
                        "set kerberos.refresh_tokens in the job so the AM obtains fresh tokens from the "
                        "connection's keytab"
                    )
                )
            return self._url_string

    def _take(self, raw: bytes | None) -> None:
        if raw is None:
            return
        try:
            msg = DelegationToken.from_json(raw)
            if msg.seq <= self._seq or not msg.token:
                return
            Token.from_url_string(msg.token)  # a token string that does not parse is never sent
        except (SpecError, TokenFileError) as exc:
            log.warning("ignoring the published HDFS token: %s", exc)
            return
        self._url_string, self._seq = msg.token, msg.seq
        self._end = token_end(msg.expires, msg.max_date)
        log.info(
            "using HDFS delegation token %d from the AM (valid until %s)",
            msg.seq,
            _utc(self._end) if self._end is not None else "unknown",
        )


MAX_TOKEN_FILE_BYTES = 64 * 1024  # a DelegationToken message is a few hundred bytes


class TokenFileReader:
    """A :class:`TokenSource`'s ``fetch`` for a refreshing job: the pointer from the store, then its file.

    ``get`` reads the key-value store's :data:`~constants.KV_TOKEN_POINTER`;
    ``read(path)`` returns the token file's bytes (over WebHDFS, with the token
    the executor sends now). A pointer already taken is not read again; a
    malformed pointer or a failed read is logged (without the token) and tried
    again at the next poll.
    """

    def __init__(self, get: Callable[[str], bytes | None], read: Callable[[str], bytes]) -> None:
        self._get = get
        self._read = read
        self._taken = -1

    def __call__(self) -> bytes | None:
        raw = self._get(C.KV_TOKEN_POINTER)
        if raw is None:
            return None
        try:
            pointer = TokenPointer.from_json(raw, max_bytes=MAX_TOKEN_FILE_BYTES)
        except SpecError as exc:
            log.warning("ignoring the AM's token pointer: %s", exc)
            return None
        if pointer.seq <= self._taken:
            return None
        try:
            data = self._read(pointer.path)
        except Exception as exc:  # noqa: BLE001 - the token in use goes on; the next poll tries again
            from airflow_provider_tony.runtime.webhdfs_token import redact

            text = redact(f"{type(exc).__name__}: {exc}")
            log.warning("could not read the AM's HDFS token %d: %s", pointer.seq, text)
            return None
        self._taken = pointer.seq
        return data


def read_token_file(url: str, using: str, path: str) -> bytes:
    """The token file at ``path`` over WebHDFS, authenticated with the token string ``using``."""
    from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

    client = DelegationTokenClient(url, Token.from_url_string(using))
    with client.read(path, length=MAX_TOKEN_FILE_BYTES) as reader:
        return bytes(reader.read())


# ---------------------------------------------------------------- the AM's side


def keytab_principal(env: dict[str, str] | None = None) -> tuple[str, str] | None:
    """(keytab file in the AM's working directory, principal) when the job ships a keytab, else None."""
    env = dict(os.environ) if env is None else env
    principal = env.get(C.ENV_AM_PRINCIPAL)
    if not principal:
        return None
    return os.path.join(os.getcwd(), C.AM_KEYTAB_ALIAS), principal


class WebHdfsTokens:
    """Obtains one HDFS delegation token over WebHDFS with SPNEGO, logged in from a keytab.

    Each call logs in afresh into a private in-memory ticket cache, so an
    expired ticket-granting ticket is never a problem and nothing is written
    to disk. Errors are ``ClusterError`` without the token in their text.
    """

    def __init__(self, url: str, principal: str, keytab: str, timeout: float = 30.0) -> None:
        # Every NameNode of an HA nameservice (comma-separated): a standby's answer moves on.
        self.url = url.rstrip("/")
        self.principal = principal
        self._keytab = keytab  # never logged
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"WebHdfsTokens({self.url!r}, principal={self.principal!r})"

    def _session(self) -> Any:
        import gssapi
        import requests
        from requests_gssapi import OPTIONAL, HTTPSPNEGOAuth

        try:
            creds = gssapi.Credentials(
                name=gssapi.Name(self.principal, gssapi.NameType.kerberos_principal),
                usage="initiate",
                store={"client_keytab": self._keytab, "ccache": f"MEMORY:tony-am-{uuid.uuid4().hex}"},
            )
            creds.lifetime  # noqa: B018 - the KDC exchange happens here, so its error is reported here
        except gssapi.exceptions.GSSError as exc:
            detail = str(exc).strip().replace("\n", " ")
            raise ClusterError(f"Kerberos login as {self.principal} from the job's keytab failed: {detail}") from None
        session = requests.Session()
        session.auth = HTTPSPNEGOAuth(creds=creds, mutual_authentication=OPTIONAL)
        return session

    def _call(self, session: Any, method: str, params: dict[str, str], what: str) -> Any:
        import requests

        from airflow_provider_tony.runtime.webhdfs_failover import NameNodes, split_urls
        from airflow_provider_tony.runtime.webhdfs_token import redact

        urls = split_urls(self.url)
        namenodes = NameNodes(urls, patience=60.0 if len(urls) > 1 else 0.0)
        try:
            resp = namenodes.send(
                lambda base: session.request(method, f"{base}/webhdfs/v1/", params=params, timeout=self.timeout),
                params["op"],
            )
        except requests.RequestException as exc:
            raise ClusterError(redact(f"WebHDFS {what} failed: {type(exc).__name__}: {exc}")) from None
        if resp.status_code != 200:
            raise ClusterError(redact(f"WebHDFS {what} answered HTTP {resp.status_code}: {resp.text[:300]}"))
        try:
            return resp.json()
        except ValueError:
            raise ClusterError(f"WebHDFS {what} answered HTTP 200 with no JSON") from None

    def obtain(self) -> DelegationToken:
        """A fresh token with its dates; ``seq`` is left for the caller."""
        session = self._session()
        try:
            got = self._call(session, "GET", {"op": "GETDELEGATIONTOKEN"}, "GETDELEGATIONTOKEN")
            url_string = str(((got or {}).get("Token") or {}).get("urlString") or "")
            if not url_string:
                raise ClusterError("WebHDFS GETDELEGATIONTOKEN answered without a token")
            token = Token.from_url_string(url_string)
            renewed = self._call(
                session, "PUT", {"op": "RENEWDELEGATIONTOKEN", "token": url_string}, "RENEWDELEGATIONTOKEN"
            )
        finally:
            session.close()
        expires = renewed.get("long") if isinstance(renewed, dict) else None
        dates = identifier_dates(token.identifier)
        return DelegationToken(
            token=url_string,
            issued=dates.issued if dates else time.time(),
            expires=expires / 1000.0 if isinstance(expires, (int, float)) and expires > 0 else None,
            max_date=dates.max_date if dates else None,
        )


class TokenRefresher(threading.Thread):
    """The AM's thread that keeps a fresh HDFS token published for the executors.

    ``obtain`` returns a new token message; ``publish`` hands it over
    (:class:`TokenFileWriter`); ``event`` adds a line to the job's events (dates and
    counts only, never the token). The first token is obtained at once, so a
    keytab that does not log in shows in the events at the start of the job,
    not days later.
    """

    def __init__(
        self,
        obtain: Callable[[], DelegationToken],
        publish: Callable[[DelegationToken], None],
        event: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(name="tony-token-refresh", daemon=True)
        self.obtain = obtain
        self.publish = publish
        self.event = event
        self.clock = clock
        self.stop_event = threading.Event()
        self.refreshed = 0  # tokens published so far
        self.latest: DelegationToken | None = None  # the newest one published (the AM's own WebHDFS calls use it)
        self.failures = 0  # failed tries in a row

    def refresh_once(self) -> float:
        """Obtain and publish one token; the seconds to wait before the next try."""
        try:
            msg = self.obtain()
            msg.seq = self.refreshed
            self.publish(msg)
        except Exception as exc:  # noqa: BLE001 - a failed refresh is retried; the job goes on meanwhile
            self.failures += 1
            delay = retry_delay(self.failures)
            from airflow_provider_tony.runtime.webhdfs_token import redact

            text = redact(f"{type(exc).__name__}: {exc}")
            log.warning("could not obtain a fresh HDFS delegation token (try %d): %s", self.failures, text)
            if self.failures == 1 or self.failures % 10 == 0:
                self.event(f"AM could not refresh the HDFS delegation token (try {self.failures}): {text}")
            return delay
        self.failures = 0
        self.refreshed += 1
        self.latest = msg
        now = self.clock()
        due = next_refresh(now, msg.expires, msg.max_date)
        end = token_end(msg.expires, msg.max_date)
        text = (
            f"AM refreshed the HDFS delegation token from the keytab ({self.refreshed}): "
            f"valid until {_utc(end) if end is not None else 'an unknown date'}, next refresh at {_utc(due)}"
        )
        log.info("%s", text)
        self.event(text)
        return due - now

    def run(self) -> None:
        delay = 0.0
        while not self.stop_event.wait(delay):
            delay = self.refresh_once()

    def stop(self) -> None:
        self.stop_event.set()

    def client(self, url: str) -> Any | None:
        """A WebHDFS client with the newest published token (None before the first): past the
        application's own token's maximum date, the AM's last calls (history, cleanup) need it."""
        latest = self.latest
        return None if latest is None else _token_client(url)(latest.token)


def remove_staged_copies(client: Any, app_id: str, keytab: str) -> int:
    """Delete the copy of the keytab that skein staged on HDFS for this application; how many were deleted.

    skein uploads every local file of an application under
    ``~/.skein/<application id>/`` on HDFS (mode 0600) for YARN to localise,
    and leaves the folder there when the application ends. Once the AM's
    container holds the keytab, that copy only widens who can read it: the
    job's task containers carry the same user's HDFS token, and the folder
    outlives the job. It is found by content (its name on HDFS repeats the
    submitting machine's file name, which we do not pass around).
    """
    with open(keytab, "rb") as fh:
        data = fh.read()
    removed = 0
    for folder, _dirs, files in client.walk(f".skein/{app_id}"):
        for name in files:
            path = f"{folder}/{name}"
            if client.status(path)["length"] != len(data):
                continue
            with client.read(path) as reader:
                same = reader.read() == data
            if same and client.delete(path):
                removed += 1
    return removed


class TokenFileWriter:
    """The AM's ``publish``: each token into a 0600 file of the staging folder, then the pointer in the store.

    ``client_for(token)`` is a WebHDFS client authenticated with that token
    string (the fresh token itself: the application's own may be past its
    end); ``folder`` is the staging folder's absolute path; ``put`` writes a
    key of the store. The file is written under a temporary name and renamed,
    so an executor never reads half a token; the file two tokens back is
    deleted (the one before stays for an executor still reading it).
    """

    def __init__(self, client_for: Callable[[str], Any], folder: str, put: Callable[[str, bytes], None]) -> None:
        self.client_for = client_for
        self.folder = folder.rstrip("/")
        self.put = put

    def path(self, seq: int) -> str:
        return f"{self.folder}/{C.TOKEN_FILE_PREFIX}{seq}"

    def __call__(self, msg: DelegationToken) -> None:
        client = self.client_for(msg.token)
        final = self.path(msg.seq)
        tmp = f"{final}.tmp"
        client.write(tmp, msg.to_json(), overwrite=True, permission="600")
        client.rename(tmp, final)
        self.put(C.KV_TOKEN_POINTER, TokenPointer(path=final, seq=msg.seq).to_json())
        if msg.seq >= 2:
            try:
                client.delete(self.path(msg.seq - 2))
            except Exception as exc:  # noqa: BLE001 - the staging folder goes at the end anyway
                log.warning("could not delete an earlier token file: %s", type(exc).__name__)


def _token_client(url: str) -> Callable[[str], Any]:
    def client_for(token: str) -> Any:
        from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

        return DelegationTokenClient(url, Token.from_url_string(token))

    return client_for


def start_for_am(
    app: Any,
    env: dict[str, str] | None = None,
    hdfs: Any = None,
    connect: Callable[..., Any] | None = None,
) -> TokenRefresher | None:
    """The AM's hook: start a refresher when the job shipped a keytab, else do nothing (None).

    Before it returns (so before the AM publishes the cluster spec and any
    task runs user code) the keytab's staged copy on HDFS is deleted with
    ``hdfs``, or with the client ``connect(env, kv=app.kv)`` makes (the AM passes
    ``hdfs_io.client_from_env``, which itself builds on this module: taken as an
    argument, not imported, so the two modules do not import each other); when that fails it raises
    :class:`KeytabCopyLeft` and the AM ends the job before handing out the
    cluster spec: a copy left readable by every container of the job is worse
    than a failed try.
    """
    env = dict(os.environ) if env is None else env
    found = keytab_principal(env)
    url = env.get(C.ENV_WEBHDFS_URL)
    if found is None or not url:
        return None
    keytab, principal = found
    if not os.path.isfile(keytab):
        log.error("kerberos.refresh_tokens is on but the AM container has no keytab; tokens are not refreshed")
        return None
    tokens = WebHdfsTokens(url, principal, keytab)

    def event(text: str) -> None:
        app.kv[f"{C.KV_EVENT_PREFIX}am/{time.time():.6f}"] = EventRecord(message=text).to_json()

    app_id = env.get(C.ENV_SKEIN_APPLICATION_ID, "")
    if not app_id:
        log.error("kerberos.refresh_tokens is on but the AM does not know its application id; tokens are not refreshed")
        return None
    if hdfs is None and connect is None:
        raise TypeError("start_for_am needs the AM's WebHDFS client (hdfs) or how to make it (connect)")
    try:
        if hdfs is None and connect is not None:  # one of them is given: checked above
            hdfs = connect(env, kv=app.kv)
        removed = remove_staged_copies(hdfs, app_id, keytab)
        folder = str(hdfs.resolve(f".skein/{app_id}"))
    except Exception as exc:  # noqa: BLE001 - every failure here leaves the copy
        from airflow_provider_tony.runtime.webhdfs_token import redact

        text = redact(f"{type(exc).__name__}: {exc}")
        log.error("could not remove the keytab's staged copy from HDFS: %s", text)
        event(f"AM could not remove the keytab's staged copy from HDFS (delete ~/.skein/{app_id}): {text}")
        raise KeytabCopyLeft(
            f"the application master could not remove the keytab's staged copy from HDFS ({text}); the job "
            f"was stopped before any of its code ran: delete ~/.skein/{app_id} on HDFS, then run the job again"
        ) from None
    event("AM removed the keytab's staged copy from HDFS" if removed else "AM found no staged copy of the keytab")

    def put(key: str, value: bytes) -> None:
        app.kv[key] = value

    refresher = TokenRefresher(tokens.obtain, TokenFileWriter(_token_client(url), folder, put), event)
    refresher.start()
    log.info("refreshing the job's HDFS delegation token as %s", principal)
    return refresher
