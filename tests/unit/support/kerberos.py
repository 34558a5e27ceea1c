"""Stands in for a Hadoop credentials file: ``_writable`` encodes tokens in Hadoop's Writable format.

Shared by the Kerberos and token-refresh tests.
"""

from __future__ import annotations

from airflow_provider_tony.runtime import hadoop_tokens as ht
from airflow_provider_tony.runtime.hadoop_tokens import Token


def _writable(*tokens: Token) -> bytes:
    out = ht.MAGIC + bytes([ht.WRITABLE]) + ht._vint(len(tokens))
    for t in tokens:
        out += (
            ht._text(t.alias)
            + ht._vint(len(t.identifier))
            + t.identifier
            + ht._vint(len(t.password))
            + t.password
            + ht._text(t.kind)
            + ht._text(t.service)
        )
    return out + ht._vint(1) + ht._text("a-secret-key") + ht._vint(3) + b"xyz"
