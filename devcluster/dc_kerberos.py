"""The secure profile's KDC: started once per home before any daemon needs a ticket.

Part of ``devcluster.py``; the realm itself is ``kdc.py``'s.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import kdc
from dc_layout import SECURE_MARKER, ClusterError, Layout
from dc_processes import _cmdline, _tail, is_alive


def _kdc_pid(layout: Layout) -> int | None:
    """The saved KDC PID if that process is alive and serves this home's realm."""
    pid_file = layout.run / "kdc.pid"
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text().strip())
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    if "krb5kdc" in _cmdline(pid) and str(layout.realm.kdc_conf).encode() in environ and is_alive(pid):
        return pid
    return None


def _kdc_answers(layout: Layout) -> bool:
    import socket

    with socket.create_connection(("127.0.0.1", layout.port("kdc_port")), timeout=1):
        return True


def _refuse_a_stranger_on_the_port(layout: Layout) -> None:
    """Another process answering on this home's KDC port (a KDC left by a cluster whose home is gone,
    another checkout on the same port base) would hand out tickets our keytabs cannot open
    ("Integrity check on decrypted field failed"); it must not pass for ours."""
    try:
        taken = _kdc_answers(layout)
    except OSError:
        return
    if taken:
        raise ClusterError(
            f"port {layout.port('kdc_port')} (this cluster's KDC) is taken by another process, not this home's "
            "KDC: stop it (a KDC left by an earlier cluster: ps -ef | grep krb5kdc) or give this cluster "
            "another TONY_DEVCLUSTER_PORT_BASE"
        )


def start_kdc(layout: Layout) -> None:
    """The realm (created once) and its KDC, before any daemon needs a ticket."""
    realm = layout.realm
    try:
        kdc.check_installed()
        kdc.write_confs(realm, layout.logs)
        kdc.create_database(realm)
    except kdc.KdcError as exc:
        raise ClusterError(str(exc)) from exc
    proc: subprocess.Popen[bytes] | None = None
    if _kdc_pid(layout) is None:
        _refuse_a_stranger_on_the_port(layout)
        with open(layout.logs / "kdc.out", "ab") as out:
            proc = subprocess.Popen(
                kdc.kdc_command(realm),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=realm.env(),
                cwd=layout.home,
                start_new_session=True,
            )
        (layout.run / "kdc.pid").write_text(f"{proc.pid}\n")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # The process we started is judged by its exit status: reading /proc for one that was just
        # forked could miss it under load, and this failure stops the cluster (the KDC with it).
        exited = proc.poll() is not None if proc is not None else _kdc_pid(layout) is None
        if exited:
            raise ClusterError(f"the KDC exited; tail of {layout.logs / 'kdc.log'}:\n{_tail(layout.logs / 'kdc.log')}")
        try:
            if _kdc_answers(layout):
                (layout.home / SECURE_MARKER).write_text(f"realm {kdc.REALM}\n")
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise ClusterError(f"the KDC did not listen on port {layout.port('kdc_port')} within 30s")
