"""WebHDFS with the application's delegation token, for containers on a Kerberized cluster.

Containers never hold a keytab. YARN hands the application the HDFS token the
submitter obtained (skein asks for one with the ResourceManager as renewer,
and the ResourceManager keeps renewing it until the application ends or the
token reaches its maximum lifetime; ``kerberos.refresh_tokens`` has the AM
obtain fresh ones from a keytab shipped to it alone), and
WebHDFS accepts it as the ``delegation`` query parameter.

The token string is a secret: requests puts it in URLs, and a connection
error's message quotes the URL, so every transport error leaves this client
with the token cut out of its message and without its chained cause.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import requests
from hdfs import Client, HdfsError

from airflow_provider_tony.runtime.errors import ClusterError
from airflow_provider_tony.runtime.hadoop_tokens import Token
from airflow_provider_tony.runtime.webhdfs_failover import WebHdfsFailover

if TYPE_CHECKING:
    from airflow_provider_tony.runtime.token_refresh import TokenSource

# ``token=`` is how RENEWDELEGATIONTOKEN / CANCELDELEGATIONTOKEN take one. A token's URL string is
# URL-safe base64 (``-``, ``_``, perhaps ``%``-escaped), so a bracket or comma after it is the message's own.
_DELEGATION = re.compile(r"(\b(?:delegation|token)=)[^&\s'\"()<>\[\],;]+")


def redact(text: str) -> str:
    """``delegation=<token>`` -> ``delegation=***`` (and ``token=<token>`` -> ``token=***``) anywhere in ``text``."""
    return _DELEGATION.sub(r"\1***", text)


class DelegationTokenClient(WebHdfsFailover, Client):  # type: ignore[misc] # hdfs ships no type hints
    """An ``hdfs.Client`` that authenticates every request with a delegation token.

    ``token`` is one fixed token, or a :class:`TokenSource` asked on every
    request (the AM may publish a fresher one while the job runs). ``url`` may
    name every NameNode of an HA nameservice (comma-separated): calls fail over
    (``runtime/webhdfs_failover.py``, below this class's ``_request``, so it sees
    the transport errors before they are redacted here).
    """

    def __init__(self, url: str, token: Token | TokenSource, **kwargs: Any) -> None:
        super().__init__(url, session=requests.Session(), **kwargs)
        self._source = token if not isinstance(token, Token) else None
        self._token = token.url_string() if isinstance(token, Token) else ""

    def token(self) -> str:
        """The token for the next request; ``HdfsError`` when it is past its end and none fresher came."""
        if self._source is None:
            return self._token
        try:
            return self._source.current()
        except ClusterError as exc:
            raise HdfsError(str(exc)) from None

    def __repr__(self) -> str:
        return f"DelegationTokenClient({self.url!r})"

    def _request(self, method: str, url: str, **kwargs: Any) -> Any:
        # A DataNode redirect already carries a token the NameNode chose.
        if "delegation=" not in url:
            kwargs["params"] = {**(kwargs.get("params") or {}), "delegation": self.token()}
        try:
            return super()._request(method, url, **kwargs)
        except requests.RequestException as exc:
            raise HdfsError(redact(f"{type(exc).__name__}: {exc}")) from None
