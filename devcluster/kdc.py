"""The secure profile's Kerberos realm: an MIT KDC on loopback, from Debian's ``krb5-kdc``.

Why MIT and not Hadoop's MiniKdc (Apache Kerby, from Maven): ``kadmin.local``
writes one keytab per principal, which is what a secure cluster hands out
(the submitting user's keytab must not hold the NameNode's key), and the same
MIT libraries back the client side (``kinit``, python-gssapi). The KDC runs
as an ordinary process with its database, stash and logs under
``$TONY_DEVCLUSTER_HOME/krb5``; nothing is written to ``/etc``.

Standard library only, like ``devcluster.py``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

REALM = "TONY.LOCAL"
# Every Hadoop daemon logs in as <service>/localhost; HTTP/ serves SPNEGO under
# both names clients put in URLs (the RM binds 127.0.0.1, WebHDFS localhost).
SERVICES = {
    "nn": ["nn/localhost"],
    "dn": ["dn/localhost"],
    "rm": ["rm/localhost"],
    "nm": ["nm/localhost"],
    "spnego": ["HTTP/localhost", "HTTP/127.0.0.1"],
}
# The second user proves that YARN's application ACLs keep others out.
OTHER_USER = "tony-other"
KDC_BINARIES = ("krb5kdc", "kdb5_util", "kadmin.local")


class KdcError(RuntimeError):
    """The KDC could not be set up; the message says what to install or fix."""


@dataclass(frozen=True)
class Realm:
    """Paths and port of the local realm."""

    dir: Path
    port: int
    user: str

    @property
    def krb5_conf(self) -> Path:
        return self.dir / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.dir / "kdc.conf"

    @property
    def ccache(self) -> Path:
        return self.dir / "ccache"

    def keytab(self, name: str) -> Path:
        return self.dir / f"{name}.keytab"

    def principal(self, short: str) -> str:
        return f"{short}@{REALM}"

    @property
    def user_principal(self) -> str:
        return self.principal(self.user)

    @property
    def other_principal(self) -> str:
        return self.principal(OTHER_USER)

    def env(self) -> dict[str, str]:
        """What MIT tools need to find this realm instead of /etc's."""
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self.kdc_conf)}


def _sbin(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if not found:
        raise KdcError(
            f"{name} not found: the secure profile needs MIT Kerberos "
            "(apt-get install krb5-kdc krb5-admin-server krb5-user)"
        )
    return found


def check_installed() -> None:
    for name in KDC_BINARIES:
        _sbin(name)


def write_confs(realm: Realm, log_dir: Path) -> None:
    """krb5.conf for every client (MIT and Java), kdc.conf for the KDC."""
    realm.dir.mkdir(parents=True, exist_ok=True)
    # rdns/dns_canonicalize_hostname off: the service name is the URL's host,
    # as Hadoop's clients build it; udp_preference_limit=1: TCP only, so Java
    # and MIT agree and large tickets never fall back.
    realm.krb5_conf.write_text(f"""\
[libdefaults]
  default_realm = {REALM}
  dns_lookup_realm = false
  dns_lookup_kdc = false
  dns_canonicalize_hostname = false
  rdns = false
  udp_preference_limit = 1
  ticket_lifetime = 24h
  renew_lifetime = 7d
  forwardable = true
  permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
  default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96

[realms]
  {REALM} = {{
    kdc = 127.0.0.1:{realm.port}
  }}

[domain_realm]
  localhost = {REALM}
  127.0.0.1 = {REALM}
""")
    realm.kdc_conf.write_text(f"""\
[kdcdefaults]
  kdc_ports = {realm.port}
  kdc_tcp_ports = {realm.port}

[realms]
  {REALM} = {{
    database_name = {realm.dir}/principal
    key_stash_file = {realm.dir}/stash
    acl_file = {realm.dir}/kadm5.acl
    max_life = 24h
    max_renewable_life = 7d
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }}

[logging]
  kdc = FILE:{log_dir}/kdc.log
  default = FILE:{log_dir}/kdc.log
""")
    (realm.dir / "kadm5.acl").write_text("")
    secret = realm.dir / "http-signature.secret"
    if not secret.exists():
        secret.write_text(secrets.token_hex(32))
        secret.chmod(0o600)


def _run(realm: Realm, cmd: list[str]) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=realm.env(), stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise KdcError(f"{' '.join(cmd[:3])} failed (exit {proc.returncode}): {proc.stderr[-1500:]}")
    return proc.stdout


def create_database(realm: Realm) -> bool:
    """Create the realm's database and every keytab once; True when it was created now."""
    if (realm.dir / "principal").exists():
        return False
    # The master password only protects the stash beside it: random, never shown.
    _run(realm, [_sbin("kdb5_util"), "-r", REALM, "create", "-s", "-P", secrets.token_urlsafe(24)])
    users = {realm.user: [realm.user], "other": [OTHER_USER]}
    for name, principals in {**SERVICES, **users}.items():
        for princ in principals:
            _run(realm, [_sbin("kadmin.local"), "-r", REALM, "-q", f"addprinc -randkey {princ}"])
        _run(realm, [_sbin("kadmin.local"), "-r", REALM, "-q", f"ktadd -k {realm.keytab(name)} {' '.join(principals)}"])
        realm.keytab(name).chmod(0o600)
    return True


def kdc_command(realm: Realm) -> list[str]:
    """krb5kdc in the foreground (-n) so the launcher owns its PID like the JVMs'."""
    return [_sbin("krb5kdc"), "-n", "-r", REALM]
