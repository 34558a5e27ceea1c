"""Which NameNode a location is on, and the WebHDFS client for it, inside the containers.

Production clusters keep data on several nameservices (inputs in ``hdfs://warehouse/...``,
models in ``hdfs://ml/...``) or on another cluster's ``hdfs://host:port``. WebHDFS takes paths,
so a location's authority must choose the NameNode: sending ``hdfs://warehouse/data/x`` to the
default NameNode would read ``/data/x`` of another filesystem, and on a Kerberized cluster the
job holds a delegation token per NameNode, each good on its own NameNode only.

The submitting side writes the contract (``runtime/constants.py``): ``$TONY_DEFAULT_FS`` (the
cluster's ``fs.defaultFS``) and, when the job touches other NameNodes, ``$TONY_NAMENODES``, a
JSON object naming each NameNode the job touches (the default's included, for its token's
service): ``{"hdfs://<authority>": {"webhdfs": ["http://h:p", ...], "token_service": "..."}}``,
in base64url (:func:`encode`: YARN's launch script would drop the object's quotes).

``hdfs_io.Clients`` answers "which client for this location": a plain path or the default
filesystem's authority -> the client ``hdfs_io.client_from_env`` makes (unchanged); another
authority the job was given -> a client for that NameNode, built the same way (failover over
its WebHDFS addresses; with its own delegation token on a Kerberized cluster); any other ->
:class:`NameNodeError` naming the location and the fix. Clients are made once per authority.
Code that takes "a client" takes a :class:`Router` too and asks :func:`pick` per location, so
code and tests on one NameNode pass a plain client as before.

This module is the contract and the choice, pure; ``hdfs_io`` makes the clients. Standard
library only: this runs in containers and on the submitting side.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime.errors import NameNodeError, SpecError

__all__ = [
    "NameNode",
    "Router",
    "authority_of",
    "decode",
    "default_token_service",
    "encode",
    "other_namenodes",
    "pick",
]

#: The most NameNodes one job may name: each is a token fetched at submit and a client per container.
MAX_NAMENODES = 32
#: The most addresses (an HA nameservice's NameNodes) one NameNode entry may list.
MAX_ADDRESSES = 8
#: ``$TONY_NAMENODES``'s largest size: an environment string, beside the JobSpec's.
MAX_ENV_BYTES = 16 * 1024
_HDFS = "hdfs://"
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*={0,2}")
_AUTHORITY = re.compile(r"hdfs://[A-Za-z0-9._\-\[\]:]{1,255}")
_ADDRESS = re.compile(r"https?://[A-Za-z0-9._\-\[\]:]{1,255}")
_SERVICE = re.compile(r"[A-Za-z0-9._\-\[\]:]{0,255}")
#: The most NameNodes a JobSpec's ``other_namenodes`` may name (TonY's ``tony.other.namenodes``).
MAX_OTHER_NAMENODES = 16
_URI = re.compile(r"hdfs://(?:[A-Za-z0-9._\-]{1,255}|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?/?")
_FIX = "the submitting side writes it: submit the job again with this provider's TonyClient"


def authority_of(location: str) -> str | None:
    """``hdfs://WareHouse/a`` -> ``hdfs://warehouse``; a plain path or ``hdfs:///a`` -> None (the default).

    Host names and nameservices are case-insensitive in Hadoop, so the authority is lower-cased.
    """
    if not location.startswith(_HDFS):
        return None
    authority = location[len(_HDFS) :].split("/", 1)[0].lower()
    return f"{_HDFS}{authority}" if authority else None


def other_namenodes(value: object, field: str = "other_namenodes") -> list[str]:
    """A JobSpec's ``other_namenodes``, checked: ``hdfs://<nameservice>`` or ``hdfs://<host>:<port>``, nothing after
    the authority but ``/``, at most :data:`MAX_OTHER_NAMENODES`; normalised as :func:`authority_of` does."""
    fix = "give hdfs://<nameservice> or hdfs://<host>:<port> URIs without a path, like ['hdfs://warehouse']"
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise SpecError(field, f"{repr(value)[:120]} is not a list; {fix}")
    out: list[str] = []
    for i, item in enumerate(value):
        if not isinstance(item, str) or not _URI.fullmatch(item):
            raise SpecError(f"{field}[{i}]", f"{repr(item)[:120]} is not an hdfs://<authority> URI; {fix}")
        authority = authority_of(item)
        if authority not in out:
            out.append(str(authority))
    if len(out) > MAX_OTHER_NAMENODES:
        raise SpecError(
            field,
            f"{len(out)} NameNodes given; at most {MAX_OTHER_NAMENODES}, each one a token and a client: drop some",
        )
    return out


@dataclass(frozen=True)
class NameNode:
    """One NameNode (or HA nameservice) a job touches: its WebHDFS addresses and its token's service."""

    authority: str
    webhdfs: tuple[str, ...]
    token_service: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"webhdfs": list(self.webhdfs), "token_service": self.token_service}


def encode(namenodes: Mapping[str, NameNode]) -> str:
    """``$TONY_NAMENODES``'s value: compact JSON, sorted (the same job gives the same text), in
    base64url. Not bare JSON: YARN writes environment values into the container's launch script
    inside double quotes without escaping any, so a JSON object's quotes would be lost."""
    text = json.dumps({a: n.to_dict() for a, n in sorted(namenodes.items())}, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def bad_env(what: str) -> NameNodeError:
    return NameNodeError(f"${C.ENV_NAMENODES}: {what}; {_FIX}")


def _entry(authority: object, value: object) -> NameNode:
    if not isinstance(authority, str) or not _AUTHORITY.fullmatch(authority):
        raise bad_env(f"{str(authority)[:80]!r} is not an hdfs://<authority> key")
    if not isinstance(value, dict):
        raise bad_env(f"{authority}'s entry is not an object")
    addresses, service = value.get("webhdfs"), value.get("token_service", "")
    if not isinstance(addresses, list) or not 1 <= len(addresses) <= MAX_ADDRESSES:
        raise bad_env(f"{authority}'s webhdfs is not a list of 1 to {MAX_ADDRESSES} addresses")
    for address in addresses:
        if not isinstance(address, str) or not _ADDRESS.fullmatch(address.rstrip("/")):
            raise bad_env(f"{authority}'s webhdfs address {str(address)[:80]!r} is not http(s)://host:port")
    if not isinstance(service, str) or not _SERVICE.fullmatch(service):
        raise bad_env(f"{authority}'s token_service {str(service)[:80]!r} is not a token service name")
    return NameNode(authority.lower(), tuple(a.rstrip("/") for a in addresses), service)


def decode(text: str) -> dict[str, NameNode]:
    """``$TONY_NAMENODES`` (:func:`encode`'s text) back as ``{authority: NameNode}``; empty text is no other NameNode.

    Written by the submitting side, read defensively all the same: capped in size and count, and
    every key and value type-checked, each fault a :class:`NameNodeError` saying which.
    """
    if not text:
        return {}
    if len(text.encode()) > MAX_ENV_BYTES:
        raise bad_env(f"{len(text.encode())} bytes, more than {MAX_ENV_BYTES}")
    if not _BASE64URL.fullmatch(text):
        raise bad_env("not base64url text")
    try:
        data = json.loads(base64.urlsafe_b64decode(text.encode("ascii")))
    except ValueError as exc:
        raise bad_env(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise bad_env("not a JSON object")
    if len(data) > MAX_NAMENODES:
        raise bad_env(f"{len(data)} NameNodes, more than {MAX_NAMENODES}")
    entries = [_entry(authority, value) for authority, value in data.items()]
    return {n.authority: n for n in entries}


def default_token_service(env: Mapping[str, str]) -> str | None:
    """The default NameNode's token service when the job holds several HDFS tokens, else None (the only one)."""
    known = decode(env.get(C.ENV_NAMENODES) or "")
    default = authority_of(env.get(C.ENV_DEFAULT_FS) or "")
    entry = known.get(default) if default else None
    return entry.token_service or None if entry else None


class Router:
    """Something that hands out the WebHDFS client of a location's NameNode (:func:`pick` asks it)."""

    def for_location(self, location: str) -> Any:
        raise NotImplementedError


def pick(client: Any, location: str) -> Any:
    """The client for ``location``: a :class:`Router`'s choice, or ``client`` itself (one NameNode)."""
    return client.for_location(location) if isinstance(client, Router) else client
