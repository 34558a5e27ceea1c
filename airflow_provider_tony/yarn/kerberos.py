"""Kerberos for the submitting side: one set of GSSAPI credentials for every HTTP call.

Why here and not in each caller: a secure cluster wants SPNEGO on the
ResourceManager and NodeManager REST APIs and on WebHDFS, and all three must
use the same identity (the one that submits). With a keytab the credentials live
in a private in-memory ticket cache (``MEMORY:``), so the provider never
writes a ticket to disk and never disturbs the user's own cache; without
one, the user's ticket cache (``kinit``) is used.

Each failure is told apart, because ``test_connection`` must say which step
failed: no ticket, a keytab that does not log in, a server that refuses
SPNEGO, WebHDFS that refuses the user.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import httpx

from airflow_provider_tony.runtime.errors import KerberosError
from airflow_provider_tony.yarn.failover import ANSWERED_BY


@dataclass(frozen=True)
class KerberosConfig:
    """Who the submitting side is on a Kerberized cluster.

    ``principal`` + ``keytab``: log in from the keytab (Airflow workers);
    neither: use the current ticket cache (a person after ``kinit``).
    ``ca_bundle``: verify the cluster's HTTPS endpoints against this file.
    """

    principal: str | None = None
    keytab: str | None = None
    ca_bundle: str | None = None

    def __repr__(self) -> str:  # the keytab path is not secret, but keep reprs plain
        return f"KerberosConfig(principal={self.principal!r}, keytab={'set' if self.keytab else None})"


class KerberosSession:
    """Lazily acquired GSSAPI credentials and a ``requests`` session that speaks SPNEGO."""

    def __init__(self, config: KerberosConfig) -> None:
        self.config = config
        self._creds: Any = None
        self._session: Any = None
        self._ccache = f"MEMORY:tony-{uuid.uuid4().hex}"

    def credentials(self) -> Any:
        """Initiator credentials; raises :class:`KerberosError` naming the fix."""
        if self._creds is not None:
            return self._creds
        import gssapi

        cfg = self.config
        try:
            if cfg.keytab:
                if not os.path.isfile(cfg.keytab):
                    raise KerberosError(  # the path is not printed: it says where a secret lives
                        "the keytab (connection extra 'keytab') does not exist "
                        "or is not a file on this machine: copy the principal's keytab there"
                    )
                name = gssapi.Name(cfg.principal, gssapi.NameType.kerberos_principal) if cfg.principal else None
                creds = gssapi.Credentials(
                    name=name, usage="initiate", store={"client_keytab": cfg.keytab, "ccache": self._ccache}
                )
            else:
                creds = gssapi.Credentials(usage="initiate")
            creds.lifetime  # noqa: B018 - forces the KDC exchange now, so errors surface here
        except gssapi.exceptions.GSSError as exc:
            raise self._explain(exc) from None
        self._creds = creds
        return creds

    def _explain(self, exc: Exception) -> KerberosError:
        cfg = self.config
        detail = str(exc).strip().replace("\n", " ")
        if cfg.keytab:
            detail = detail.replace(cfg.keytab, "<keytab>")  # GSSAPI's text may name the file
            return KerberosError(
                f"Kerberos login with principal {cfg.principal!r} from the connection's keytab failed ({detail}): "
                "check that the keytab holds that principal's current key (klist -kt <keytab>) and that "
                "KRB5_CONFIG / /etc/krb5.conf names the realm's KDC"
            )
        return KerberosError(
            f"no Kerberos ticket for the cluster ({detail}): run `kinit <principal>` first, or set the "
            "connection's extra 'principal' and 'keytab' so the provider logs in by itself"
        )

    def session(self) -> Any:
        """A ``requests.Session`` authenticating with SPNEGO (and the CA bundle, if one is set).

        Only for the ``hdfs`` package's WebHDFS client (uploads, reads), which is built on
        requests; every other call to the cluster goes through ``yarn/rest.py`` (httpx).
        """
        if self._session is None:
            import requests
            from requests_gssapi import OPTIONAL, HTTPSPNEGOAuth

            session = requests.Session()
            # OPTIONAL: Hadoop's servers do answer with a mutual-auth token, but
            # a proxy in front of the RM (knox) may not; the request is still
            # authenticated by the server either way.
            session.auth = HTTPSPNEGOAuth(creds=self.credentials(), mutual_authentication=OPTIONAL)
            if self.config.ca_bundle:
                session.verify = self.config.ca_bundle
            self._session = session
        return self._session

    def webhdfs(self, url: str) -> Any:
        """An ``hdfs.Client`` over this session (HdfsCLI's KerberosClient needs requests-kerberos;
        this reuses the credentials above instead)."""
        from hdfs import Client

        return Client(url, session=self.session())


#: SPNEGO's mechanism OID, what ``requests-gssapi`` negotiates by default.
SPNEGO_OID = "1.3.6.1.5.5.2"


class HttpxSpnegoAuth(httpx.Auth):
    """SPNEGO for ``httpx``, sync and asyncio alike: how the follower speaks to a Kerberized RM.

    Answers a ``401 WWW-Authenticate: Negotiate`` with a token for
    ``HTTP@<host>`` from ``credentials()`` (the ``KerberosSession``'s, so the
    follower is the same principal as the submitter, which the RM's proxy
    requires to show the AM's page). Hadoop then sets its ``hadoop.auth``
    cookie, which the client keeps, so later requests need no new token.
    The GSSAPI step runs inline: after the first service ticket it is local work.
    """

    def __init__(self, credentials: Callable[[], Any]) -> None:
        self.credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        response = yield request
        if response.status_code != 401 or "negotiate" not in response.headers.get("www-authenticate", "").lower():
            return
        # Behind the failover transport the request names the service's first address; the
        # ticket must be for the host that answered (the transport sends the retry there first).
        host = response.extensions.get(ANSWERED_BY) or request.url.host
        request.headers["Authorization"] = f"Negotiate {self.token(host)}"
        yield request

    def token(self, host: str) -> str:
        import gssapi

        name = gssapi.Name(f"HTTP@{host}", gssapi.NameType.hostbased_service)
        try:
            context = gssapi.SecurityContext(
                name=name, creds=self.credentials(), usage="initiate", mech=gssapi.OID.from_int_seq(SPNEGO_OID)
            )
            return base64.b64encode(context.step()).decode()
        except gssapi.exceptions.GSSError as exc:
            raise KerberosError(
                f"no SPNEGO token for HTTP@{host} ({str(exc).strip()}): check that the "
                "server's HTTP/<host> principal exists in the KDC and that the URL names "
                "that host"
            ) from None
