"""Read Hadoop's token file (``$HADOOP_TOKEN_FILE_LOCATION``) inside a YARN container.

Why: on a Kerberized cluster a container has no Kerberos credentials, only
the delegation tokens YARN gave the application. The NodeManager writes them
to a ``Credentials`` file; WebHDFS accepts the application's HDFS token as
``?delegation=<url string>``. The ResourceManager renews that token while
the application runs (it is the token's renewer), so the same string stays
valid past the cluster's renew interval, up to the token's maximum lifetime
(after which only a fresh token helps: ``token_refresh.py``). Hadoop's Java code
reads this file; a Python container needs these few lines instead.

Both serialisations Hadoop writes are read: the Writable one (version 0,
what the NodeManager writes) and the protobuf one (version 1, ``hadoop dtutil``'s
default). Token values are secrets: nothing here logs or prints them, and a
``Token``'s ``repr`` leaves them out.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_tony.runtime.errors import TokenFileError

MAGIC = b"HDTS"
WRITABLE, PROTOBUF = 0, 1
HDFS_DELEGATION_TOKEN = "HDFS_DELEGATION_TOKEN"  # noqa: S105 - a token kind's name, not a secret
ENV_TOKEN_FILE = "HADOOP_TOKEN_FILE_LOCATION"  # noqa: S105 - an environment variable's name


@dataclass(frozen=True)
class Token:
    """One Hadoop token: ``kind`` and ``service`` are public, the rest is secret."""

    alias: str
    kind: str
    service: str
    identifier: bytes = field(repr=False)
    password: bytes = field(repr=False)

    def url_string(self) -> str:
        """Hadoop's ``Token.encodeToUrlString()``: URL-safe base64, unpadded, of ``Token.write``."""
        raw = (
            _vint(len(self.identifier))
            + self.identifier
            + _vint(len(self.password))
            + self.password
            + _text(self.kind)
            + _text(self.service)
        )
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    @classmethod
    def from_url_string(cls, value: str, alias: str = "") -> Token:
        """The inverse of :meth:`url_string` (e.g. a WebHDFS ``GETDELEGATIONTOKEN`` answer)."""
        try:
            raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        except ValueError as exc:
            raise TokenFileError("a token url string is not URL-safe base64") from exc
        reader = _Reader(raw)
        ident, password = reader.bytes(), reader.bytes()
        return cls(alias=alias, kind=reader.text(), service=reader.text(), identifier=ident, password=password)


class _Reader:
    """Hadoop's ``WritableUtils`` varints and ``Text`` over a byte string."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data, self.pos = data, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TokenFileError("token file truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def vint(self) -> int:
        first = int.from_bytes(self.take(1), "big", signed=True)
        if first >= -112:
            return first
        size = -119 - first if first < -120 else -111 - first
        value = int.from_bytes(self.take(size - 1), "big")
        return ~value if first < -120 else value

    def bytes(self) -> bytes:
        return self.take(self.vint())

    def text(self) -> str:
        return self.bytes().decode("utf-8")

    def varint(self) -> int:
        """A protobuf (base-128) varint."""
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7


def _vint(value: int) -> bytes:
    """``WritableUtils.writeVLong``."""
    if -112 <= value <= 127:
        return value.to_bytes(1, "big", signed=True)
    size, rest = -112, value
    if rest < 0:
        rest, size = ~rest, -120
    tmp = rest
    while tmp:
        tmp >>= 8
        size -= 1
    nbytes = -(size + 120) if size < -120 else -(size + 112)
    return size.to_bytes(1, "big", signed=True) + rest.to_bytes(nbytes, "big")


def _text(value: str) -> bytes:
    raw = value.encode("utf-8")
    return _vint(len(raw)) + raw


def _protobuf_fields(data: bytes) -> list[tuple[int, bytes]]:
    """Length-delimited fields (wire type 2) of one message; other wire types are skipped."""
    reader, out = _Reader(data), []
    while reader.pos < len(data):
        key = reader.varint()
        number, wire = key >> 3, key & 7
        if wire == 2:
            out.append((number, reader.take(reader.varint())))
        elif wire == 0:
            reader.varint()
        elif wire in (1, 5):
            reader.take(8 if wire == 1 else 4)
        else:
            raise TokenFileError(f"unsupported protobuf wire type {wire} in token file")
    return out


def _parse_protobuf(reader: _Reader) -> list[Token]:
    # CredentialsProto{tokens=1: CredentialsKVProto{alias=1, token=2: TokenProto{
    # identifier=1, password=2, kind=3, service=4}}}, written with writeDelimitedTo.
    message = reader.take(reader.varint())
    tokens = []
    for number, kv in _protobuf_fields(message):
        if number != 1:
            continue  # secrets=2: not tokens
        parts = dict(_protobuf_fields(kv))
        tok = dict(_protobuf_fields(parts.get(2, b"")))
        tokens.append(
            Token(
                alias=parts.get(1, b"").decode(),
                identifier=tok.get(1, b""),
                password=tok.get(2, b""),
                kind=tok.get(3, b"").decode(),
                service=tok.get(4, b"").decode(),
            )
        )
    return tokens


def parse_credentials(data: bytes) -> list[Token]:
    """The tokens of a serialised ``org.apache.hadoop.security.Credentials``."""
    if data[:4] != MAGIC:
        raise TokenFileError("not a Hadoop token file (no HDTS header)")
    reader = _Reader(data, 5)
    version = data[4] if len(data) > 4 else -1
    if version == PROTOBUF:
        return _parse_protobuf(reader)
    if version != WRITABLE:
        raise TokenFileError(f"unknown Hadoop token file version {version}")
    tokens = []
    for _ in range(reader.vint()):
        alias = reader.text()
        ident, password = reader.bytes(), reader.bytes()
        tokens.append(
            Token(alias=alias, identifier=ident, password=password, kind=reader.text(), service=reader.text())
        )
    return tokens


def hdfs_delegation_token(env: dict[str, str] | None = None, service: str | None = None) -> Token:
    """The application's HDFS delegation token, from the container's token file.

    ``service`` picks the token of one NameNode (``ha-hdfs:<ns>``, ``<ip>:<port>``): a job that
    reads from several NameNodes holds one token each, and a token works only on its own
    NameNode. Without it, the first HDFS token (a job on one NameNode holds one).
    """
    env = dict(os.environ) if env is None else env
    location = env.get(ENV_TOKEN_FILE)
    if not location:
        raise TokenFileError(
            f"${ENV_TOKEN_FILE} is not set: this is not a YARN container of a secure "
            "application, so there is no HDFS delegation token to use"
        )
    try:
        tokens = parse_credentials(Path(location).read_bytes())
    except OSError as exc:
        raise TokenFileError(f"cannot read the token file ${ENV_TOKEN_FILE}={location}: {exc}") from exc
    found = [t for t in tokens if t.kind == HDFS_DELEGATION_TOKEN]
    if not found:
        kinds = sorted({t.kind for t in tokens}) or ["none"]
        raise TokenFileError(
            f"no {HDFS_DELEGATION_TOKEN} among the application's tokens ({', '.join(kinds)}): "
            "the submitter must obtain one (skein does when Kerberos is on and "
            "fs.defaultFS is HDFS)"
        )
    if service is None:
        return found[0]
    mine = [t for t in found if t.service == service]
    if not mine:
        services = ", ".join(sorted(t.service for t in found))  # public names, never the secrets
        raise TokenFileError(
            f"no {HDFS_DELEGATION_TOKEN} for service {service!r} among the application's ({services}): "
            "the submitting side obtains one per NameNode the job names (JobSpec other_namenodes and its "
            "hdfs:// locations); submit the job again with this provider"
        )
    return mine[0]
