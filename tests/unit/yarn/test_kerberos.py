"""Kerberos pieces that need no cluster: Hadoop's token file, redaction, the client's errors."""

from __future__ import annotations

import base64
import dataclasses
import socket
from pathlib import Path

import pytest

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import hadoop_tokens as ht
from airflow_provider_tony.runtime.hadoop_tokens import Token, TokenFileError, parse_credentials
from tests.unit.support.kerberos import _writable

# Non-trivial sizes: an identifier over 127 bytes needs a multi-byte varint.
HDFS = Token(
    alias="127.0.0.1:8020",
    kind="HDFS_DELEGATION_TOKEN",
    service="127.0.0.1:8020",
    identifier=bytes(range(200)),
    password=b"p4ssw0rd-secret-bytes",
)
RM = Token(
    alias="127.0.0.1:8032",
    kind="RM_DELEGATION_TOKEN",
    service="127.0.0.1:8032",
    identifier=b"\x00rm-ident",
    password=b"rm-secret",
)


@pytest.mark.parametrize(
    "value, encoded",
    [
        (0, "00"),
        (127, "7f"),
        (-112, "90"),
        (128, "8f80"),
        (255, "8fff"),
        (256, "8e0100"),
        (-113, "8770"),
        (70000, "8d011170"),
    ],
)
def test_vint_matches_hadoop_writable_utils(value: int, encoded: str) -> None:
    assert ht._vint(value).hex() == encoded
    assert ht._Reader(bytes.fromhex(encoded)).vint() == value


def _pb_field(number: int, payload: bytes) -> bytes:
    def varint(n: int) -> bytes:
        out = b""
        while True:
            byte, n = n & 0x7F, n >> 7
            out += bytes([byte | (0x80 if n else 0)])
            if not n:
                return out

    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _protobuf(*tokens: Token) -> bytes:
    message = b""
    for t in tokens:
        tok = (
            _pb_field(1, t.identifier)
            + _pb_field(2, t.password)
            + _pb_field(3, t.kind.encode())
            + _pb_field(4, t.service.encode())
        )
        message += _pb_field(1, _pb_field(1, t.alias.encode()) + _pb_field(2, tok))
    message += _pb_field(2, _pb_field(1, b"secret-alias") + _pb_field(3, b"s3cr3t"))
    body = _pb_field(0, message)[1:]  # drop the key byte: writeDelimitedTo is length + message
    return ht.MAGIC + bytes([ht.PROTOBUF]) + body


@pytest.mark.parametrize("serialise", [_writable, _protobuf], ids=["writable", "protobuf"])
def test_both_credential_formats_parse(serialise) -> None:
    assert parse_credentials(serialise(RM, HDFS)) == [RM, HDFS]


def test_url_string_round_trips_and_is_hadoops_unpadded_urlsafe_base64() -> None:
    text = HDFS.url_string()
    assert "=" not in text and "+" not in text and "/" not in text
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    assert raw.startswith(ht._vint(200) + bytes(range(200)))
    assert Token.from_url_string(text, alias=HDFS.alias) == HDFS


def test_secrets_stay_out_of_reprs() -> None:
    assert "p4ssw0rd" not in repr(HDFS) and "HDFS_DELEGATION_TOKEN" in repr(HDFS)


def test_token_file_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TokenFileError, match="HADOOP_TOKEN_FILE_LOCATION is not set"):
        ht.hdfs_delegation_token({})
    bad = tmp_path / "bad"
    bad.write_bytes(b"nope")
    with pytest.raises(TokenFileError, match="no HDTS header"):
        ht.hdfs_delegation_token({ht.ENV_TOKEN_FILE: str(bad)})
    only_rm = tmp_path / "rm"
    only_rm.write_bytes(_writable(RM))
    with pytest.raises(TokenFileError, match=r"no HDFS_DELEGATION_TOKEN among .*RM_DELEGATION_TOKEN") as err:
        ht.hdfs_delegation_token({ht.ENV_TOKEN_FILE: str(only_rm)})
    assert "rm-secret" not in str(err.value)
    with pytest.raises(TokenFileError, match="truncated"):
        parse_credentials(_writable(HDFS)[:40])


def test_containers_pick_the_delegation_client_only_when_told(tmp_path: Path) -> None:
    from airflow_provider_tony.runtime.hdfs_io import client_from_env
    from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

    tokens = tmp_path / "container_tokens"
    tokens.write_bytes(_writable(RM, HDFS))
    env = {C.ENV_WEBHDFS_URL: "http://nn:9870", ht.ENV_TOKEN_FILE: str(tokens)}
    assert not isinstance(client_from_env(env), DelegationTokenClient)
    client = client_from_env({**env, C.ENV_WEBHDFS_AUTH: C.WEBHDFS_AUTH_DELEGATION})
    assert isinstance(client, DelegationTokenClient)
    assert HDFS.url_string() not in repr(client)
    with pytest.raises(TokenFileError):
        client_from_env({C.ENV_WEBHDFS_URL: "http://nn:9870", C.ENV_WEBHDFS_AUTH: C.WEBHDFS_AUTH_DELEGATION})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_transport_errors_never_carry_the_token() -> None:
    from hdfs import HdfsError

    from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient, redact

    secret = HDFS.url_string()
    redacted = redact(f"GET /webhdfs/v1/x?op=OPEN&delegation={secret}&x=1")
    assert redacted == "GET /webhdfs/v1/x?op=OPEN&delegation=***&x=1"
    # The message's own punctuation after the token stays (it used to go with the token).
    assert redact(f"failed (url: /x?delegation={secret}), see [token={secret}]") == (
        "failed (url: /x?delegation=***), see [token=***]"
    )
    client = DelegationTokenClient(f"http://127.0.0.1:{_free_port()}", HDFS, timeout=2)
    with pytest.raises(HdfsError) as err:
        client.status("/anything")
    assert "delegation=***" in str(err.value) and secret not in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_no_ticket_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gssapi")
    from airflow_provider_tony.runtime.errors import KerberosError
    from airflow_provider_tony.yarn.kerberos import KerberosConfig, KerberosSession

    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-such-cache'}")
    with pytest.raises(KerberosError, match="no Kerberos ticket.*kinit"):
        KerberosSession(KerberosConfig()).credentials()
    with pytest.raises(KerberosError, match=r"the keytab \(connection extra 'keytab'\) does not exist"):
        KerberosSession(KerberosConfig("me@X", "/nope.keytab")).credentials()


def test_the_keytab_path_is_in_no_message(tmp_path: Path) -> None:
    """Where the keytab lives is a secret's address: before, both errors quoted it (issue 27, point 10)."""
    pytest.importorskip("gssapi")
    from airflow_provider_tony.runtime.errors import KerberosError
    from airflow_provider_tony.yarn.kerberos import KerberosConfig, KerberosSession

    garbage = tmp_path / "hidden-place.keytab"
    garbage.write_bytes(b"not a keytab")
    for path in (str(tmp_path / "missing.keytab"), str(garbage)):
        with pytest.raises(KerberosError) as err:
            KerberosSession(KerberosConfig("me@X", path)).credentials()
        assert path not in str(err.value) and "keytab" in str(err.value)


def test_the_hook_masks_the_keytab_path_in_task_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from airflow_provider_tony.hooks import yarn as hook_module

    masked: list[str] = []
    monkeypatch.setattr(hook_module, "mask_secret", masked.append)
    extra = {"keytab": "/etc/secrets/airflow.keytab", "principal": "airflow@X"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_TONY_KT", json.dumps({"conn_type": "tony_yarn", "host": "rm", "port": 8088, "extra": extra})
    )
    hook_module.YarnHook("tony_kt").get_conn()
    assert masked == ["/etc/secrets/airflow.keytab"]


def test_the_connection_forms_keytab_field_is_sensitive() -> None:
    """Airflow 3 marks a conn-field sensitive (masked in the UI and API) by ``format: password``."""
    from airflow_provider_tony.connection import connection_form

    assert connection_form()["conn-fields"]["keytab"]["schema"]["format"] == "password"


def test_kerberos_comes_from_the_connection_or_core_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_tony.yarn.client import TonyClient

    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    assert not TonyClient(rm_url="http://rm:8088").kerberos
    assert TonyClient(rm_url="http://rm:8088", principal="me@X", keytab="/k").kerberos
    (tmp_path / "core-site.xml").write_text(
        "<configuration><property><name>hadoop.security.authentication</name><value>kerberos</value>"
        "</property></configuration>"
    )
    secure = TonyClient(rm_url="http://rm:8088", webhdfs_url="http://nn:9870")
    assert secure.kerberos and not TonyClient(rm_url="http://rm:8088", kerberos=False).kerberos
    env = secure._container_env(attempt=2)
    assert env[C.ENV_WEBHDFS_AUTH] == C.WEBHDFS_AUTH_DELEGATION
    assert not any("keytab" in k.lower() or "krb5" in k.lower() for k in env)


def test_dataclass_equality_ignores_nothing_secret() -> None:
    # Two tokens that differ only in their password are different tokens.
    assert dataclasses.replace(HDFS, password=b"other") != HDFS


def test_the_spnego_session_verifies_with_the_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("requests_gssapi")
    from requests_gssapi import HTTPSPNEGOAuth

    from airflow_provider_tony.yarn.kerberos import KerberosConfig, KerberosSession

    krb = KerberosSession(KerberosConfig("me@X", "/k.keytab", ca_bundle="/etc/cluster-ca.pem"))
    monkeypatch.setattr(krb, "credentials", lambda: "creds")  # no KDC here: only the wiring is under test
    session = krb.session()
    assert session.verify == "/etc/cluster-ca.pem" and isinstance(session.auth, HTTPSPNEGOAuth)
    assert session.auth.creds == "creds" and krb.session() is session
    assert "/k.keytab" not in repr(krb.config)
