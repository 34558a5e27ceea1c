"""skein applications run on the real local YARN: containers find each other.

These exercise the cluster itself (issue: local cluster), before any of the
provider's runtime is involved: two services exchange their addresses through
skein's key-value store, each run by the venv's Python in a YARN container.
"""

from __future__ import annotations

import sys

import pytest
import skein

from tests._util import rm_app, wait_until

pytestmark = pytest.mark.cluster

PEER = r"""
import socket, sys, time, skein
me, other = sys.argv[1], sys.argv[2]
app = skein.ApplicationClient.from_current()
sock = socket.socket()
sock.bind(("", 0))
sock.listen(1)
host = __import__("os").environ["NM_HOST"]
app.kv[f"addr/{me}"] = f"{host}:{sock.getsockname()[1]}".encode()
# Gets, not kv.wait: a watch being created can race the other side's put in
# skein 0.8.2's AM (see airflow_provider_tony/runtime/executor_kv.wait_for_cluster).
while (raw := app.kv.get(f"addr/{other}")) is None:
    time.sleep(0.05)
peer = raw.decode()
print(f"{me} at {host}:{sock.getsockname()[1]} found {other} at {peer}", flush=True)
# Prove the address is real: connect to the peer's socket and accept its connection.
h, p = peer.rsplit(":", 1)
out = socket.create_connection((h, int(p)), timeout=30)
conn, _ = sock.accept()
out.close(); conn.close()
app.kv[f"done/{me}"] = peer.encode()
"""


def _service(script: str) -> skein.Service:
    return skein.Service(resources=skein.Resources(memory="256 MiB", vcores=1), script=script)


def _final(client: skein.Client, app_id: str, timeout: float = 120) -> skein.model.ApplicationReport:
    return wait_until(
        lambda: (r := client.application_report(app_id)).state in ("FINISHED", "FAILED", "KILLED") and r,
        timeout,
        f"{app_id} to finish",
    )


def test_two_services_exchange_addresses(skein_client: skein.Client, app_tag: str, tmp_path) -> None:
    peer = tmp_path / "peer.py"
    peer.write_text(PEER)
    py = sys.executable
    spec = skein.ApplicationSpec(
        name="devcluster-peers",
        queue="default",
        tags=[app_tag],
        master=skein.Master(resources=skein.Resources(memory="256 MiB", vcores=1)),
        services={
            "alice": _service(f"{py} peer.py alice bob"),
            "bob": _service(f"{py} peer.py bob alice"),
        },
    )
    for svc in spec.services.values():
        svc.files = {"peer.py": skein.File(str(peer))}
    app_id = skein_client.submit(spec)
    report = _final(skein_client, app_id)
    assert report.final_status == "SUCCEEDED", report.diagnostics
    assert rm_app(skein_client_rm(), app_id)["finalStatus"] == "SUCCEEDED"


def skein_client_rm() -> str:
    import os

    return os.environ["TONY_RM_URL"]


def test_failing_service_fails_the_application(skein_client: skein.Client, app_tag: str) -> None:
    spec = skein.ApplicationSpec(
        name="devcluster-fail",
        queue="default",
        tags=[app_tag],
        master=skein.Master(resources=skein.Resources(memory="256 MiB", vcores=1)),
        services={"bad": _service(f"{sys.executable} -c 'import sys; sys.exit(1)'")},
    )
    app_id = skein_client.submit(spec)
    report = _final(skein_client, app_id)
    assert report.final_status == "FAILED"
    assert "Failure in service bad" in report.diagnostics
    assert "Failure in service bad" in rm_app(skein_client_rm(), app_id)["diagnostics"]
