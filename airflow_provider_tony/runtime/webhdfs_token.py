"""WebHDFS with the application's delegation token, for containers on a Kerberized cluster.

Containers never hold a keytab. YARN hands the application the HDFS token the
submitter obtained (skein asks for one with the ResourceManager as renewer,
and the ResourceManager keeps renewing it until the application ends), and
WebHDFS accepts it as the ``delegation`` query parameter.

The token string is a secret: requests puts it in URLs, and a connection
error's message quotes the URL, so every transport error leaves this client
with the token cut out of its message and without its chained cause.
"""

from __future__ import annotations

import re
from typing import Any

import requests
from hdfs import Client, HdfsError

from airflow_provider_tony.runtime.hadoop_tokens import Token

_DELEGATION = re.compile(r"(delegation=)[^&\s'\"]+")


def redact(text: str) -> str:
    """``delegation=<token>`` -> ``delegation=***`` anywhere in ``text``."""
    return _DELEGATION.sub(r"\1***", text)


class DelegationTokenClient(Client):  # type: ignore[misc] # hdfs ships no type hints
    """An ``hdfs.Client`` that authenticates every request with one delegation token."""

    def __init__(self, url: str, token: Token, **kwargs: Any) -> None:
        super().__init__(url, session=requests.Session(), **kwargs)
        self._token = token.url_string()

    def __repr__(self) -> str:
        return f"DelegationTokenClient({self.url!r})"

    def _request(self, method: str, url: str, **kwargs: Any) -> Any:
        # A DataNode redirect already carries a token the NameNode chose.
        if "delegation=" not in url:
            kwargs["params"] = {**(kwargs.get("params") or {}), "delegation": self._token}
        try:
            return super()._request(method, url, **kwargs)
        except requests.RequestException as exc:
            raise HdfsError(redact(f"{type(exc).__name__}: {exc}")) from None
