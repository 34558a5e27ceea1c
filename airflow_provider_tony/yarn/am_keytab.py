"""Ship the connection's keytab to the application master only, for ``kerberos.refresh_tokens``.

Why the AM and nothing else: the AM runs no user code, so a keytab there can
be used to obtain fresh HDFS delegation tokens (``runtime/token_refresh.py``)
without handing the principal's long-lived key to training scripts. The file
is a YARN local resource of the AM's container alone (skein's ``master.files``,
APPLICATION visibility): task containers' launch contexts do not name it, so
YARN never links it into their working directories. Its location on the
submitting machine is never logged or put in the environment: the AM finds it
under a fixed name in its own working directory.
"""

from __future__ import annotations

from pathlib import Path

import skein

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec


def ship_keytab_to_am(
    app_spec: skein.ApplicationSpec, spec: JobSpec, principal: str | None, keytab: str | None
) -> None:
    """Add the keytab and its principal to ``app_spec``'s master when ``spec`` asks for token refresh.

    Raises ``SpecError`` (before anything is submitted) when the job asks for
    it but the connection logs in without a keytab.
    """
    if not spec.kerberos.refresh_tokens:
        return
    if not principal or not keytab:
        raise SpecError(
            "kerberos.refresh_tokens",
            "the job asks for fresh HDFS tokens, which the AM obtains from a keytab, but the connection has "
            "no 'principal' and 'keytab' (it uses a ticket cache): set both in the connection's extra, "
            "or turn refresh_tokens off",
        )
    if not Path(keytab).is_file():
        raise SpecError(
            "kerberos.refresh_tokens",
            "the connection's keytab is not a readable file on this machine; fix the connection's 'keytab'",
        )
    app_spec.master.files[C.AM_KEYTAB_ALIAS] = skein.File(
        source=str(Path(keytab).resolve()), type="file", visibility="application"
    )
    app_spec.master.env[C.ENV_AM_PRINCIPAL] = principal
    for service in [app_spec.master, *app_spec.services.values()]:
        service.env[C.ENV_TOKENS_REFRESHED] = "1"
