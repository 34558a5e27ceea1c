"""The provider on the Kerberized profile of the local cluster (``make test-secure``).

Real KDC, real SPNEGO, real delegation tokens: submit and succeed, resume
from a checkpoint across a failed try, outlive the token renew interval,
refuse to submit without a ticket, and YARN ACLs that keep the second
principal out unless the job lists it.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from airflow_provider_tony.runtime.checkpoint import remote_checkpoints
from airflow_provider_tony.runtime.errors import ClusterError, InputMissing
from airflow_provider_tony.runtime.spec import JobSpec
from tests._airflow import (
    dag_tag,
    dags_test,
    result_of,
    run_state,
)
from tests._util import run_tony_without_jdk, wait_until
from tests.integration._cli import NO_JAVA, submit_detached_then_kill
from tests.integration._nightly import two_nightly_days
from tests.integration._secure import JOBS, MARKS, job
from tests.integration.dags.training_jobs import RESUME_EVERY, RESUME_FAIL_AT

pytestmark = MARKS

REPO = Path(__file__).resolve().parents[2]
TEST_DAGS = Path(__file__).parent / "dags" / "tony_test_dags.py"


@pytest.fixture
def ckpt(krb) -> Iterator[str]:
    path = f"/tmp/pytest-secure-{uuid.uuid4().hex[:8]}"
    yield path
    krb.hdfs().delete(path, recursive=True)


def _hdfs_site(key: str) -> str | None:
    root = ET.parse(Path(os.environ["HADOOP_CONF_DIR"]) / "hdfs-site.xml").getroot()
    values = [p.findtext("value") for p in root.iter("property") if p.findtext("name") == key]
    return values[-1] if values else None  # the last definition wins, as in Hadoop


def test_connection_names_each_step(krb, other) -> None:
    from airflow_provider_tony.runtime.errors import KerberosError
    from airflow_provider_tony.yarn.client import TonyClient

    text = krb.describe()
    assert "Kerberos as " in text and "active node" in text and "WebHDFS" in text and "accepts it" in text
    wrong = TonyClient(
        rm_url=krb.rm_url,
        webhdfs_url=krb.webhdfs_url,
        principal=os.environ["TONY_KERBEROS_PRINCIPAL"],
        keytab=os.environ["TONY_KERBEROS_OTHER_KEYTAB"],
    )
    with pytest.raises(KerberosError, match="keytab failed .*klist -kt") as refused:
        wrong.describe()
    assert os.environ["TONY_KERBEROS_OTHER_KEYTAB"] not in str(refused.value), "the keytab's path is never shown"


@pytest.fixture
def loopback_alias() -> str:
    """This machine's host name, which reaches the daemons on loopback but has no HTTP/<host>
    principal. Where it does not resolve to loopback the refusal checks cannot run: a skip here,
    which ``make test-secure`` (TONY_TESTS_MUST_RUN=1, tests/conftest.py) turns into a failure."""
    alias = socket.gethostname()
    if socket.gethostbyname(alias) != "127.0.0.1":
        pytest.skip(f"{alias} does not resolve to loopback here (add it to /etc/hosts)")
    return alias


def test_spnego_refusals_name_the_missing_principal(krb, loopback_alias) -> None:
    """A host name with no HTTP/<host> principal: the client gets no service ticket to offer."""
    from airflow_provider_tony.runtime.errors import KerberosError
    from airflow_provider_tony.yarn.client import TonyClient

    me = dict(principal=os.environ["TONY_KERBEROS_PRINCIPAL"], keytab=os.environ["TONY_KERBEROS_KEYTAB"])
    alias = loopback_alias
    rm_alias = krb.rm_url.replace("127.0.0.1", alias)
    with pytest.raises(KerberosError, match=f"ResourceManager at {rm_alias}.*no SPNEGO token .*HTTP/<host> principal"):
        TonyClient(rm_url=rm_alias, webhdfs_url=krb.webhdfs_url, **me).describe()
    web_alias = krb.webhdfs_url.replace("localhost", alias)
    with pytest.raises(ClusterError, match=f"WebHDFS at {web_alias} refused"):
        TonyClient(rm_url=krb.rm_url, webhdfs_url=web_alias, **me).describe()


def test_no_ticket_fails_before_anything_is_submitted(krb, tag, tmp_path, monkeypatch) -> None:
    from airflow_provider_tony.runtime.errors import KerberosError
    from airflow_provider_tony.yarn.client import TonyClient

    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'empty-cache'}")
    no_ticket = TonyClient(rm_url=krb.rm_url, webhdfs_url=krb.webhdfs_url, kerberos=True)
    with pytest.raises(KerberosError, match="no Kerberos ticket .*kinit"):
        no_ticket.submit(job("pytest-secure-noticket", "behave.py", "ok"), extra_tags=[tag])
    monkeypatch.undo()
    assert krb.find_by_tags([tag], active_only=False) == []


def test_resume_across_a_failed_try_with_delegation_tokens(krb, tag, ckpt) -> None:
    spec = job(
        "pytest-secure-resume", "count_steps.py", "--steps", "20", "--every", "5", "--fail-at", "12", checkpoint=ckpt
    )
    first = krb.wait(krb.submit(spec, attempt=1, extra_tags=[tag]), poll_interval=0.5, emit=lambda _: None)
    assert not first.succeeded and first.retryable, first.diagnostics
    # The uploader publishes the newest complete checkpoint when it looks: 5 may be skipped, 10 may not.
    assert remote_checkpoints(krb.hdfs(), ckpt)[-1] == 10
    second_id = krb.submit(spec, attempt=2, extra_tags=[tag])
    second = krb.wait(second_id, poll_interval=0.5, emit=lambda _: None)
    assert second.succeeded, second.diagnostics
    task = second.am_state.task("worker:0")
    assert task.restored_step == 10 and task.progress.metrics["start_step"] == 10
    assert remote_checkpoints(krb.hdfs(), ckpt)[-1] == 20
    # Nothing secret in what the AM publishes (and the operator logs / pushes to XCom).
    doc = json.dumps(second.am_state.to_dict())
    assert "delegation=" not in doc and os.environ["TONY_KERBEROS_KEYTAB"] not in doc
    # `tony logs` of the finished job: the NodeManagers answer only SPNEGO (and check the view ACL).
    _tony_logs_print_the_workers_log(second_id)


def _tony_logs_print_the_workers_log(app_id: str) -> None:
    """``tony logs`` (the command, as a person runs it, with no JDK) prints the finished job's worker log.

    Every NodeManager call carries SPNEGO (they went out without it and found
    nothing), and the secure NodeManager opens log files through Hadoop's
    ``SecureIOUtils`` with the native library loaded (without it: HTTP 500
    "Could not initialize class org.apache.hadoop.io.SecureIOUtils").
    """

    def printed() -> subprocess.CompletedProcess[str] | None:
        out = run_tony_without_jdk("logs", app_id, "--file", "worker.log", tripwire_dir=NO_JAVA, timeout=120)
        return out if out.returncode == 0 and "LogType:worker.log" in out.stdout else None

    out = wait_until(printed, 60, f"tony logs to print worker.log of {app_id}")
    assert f"_{app_id.split('_', 1)[1]}_" in out.stdout, out.stdout[-2000:]
    # The file's own lines, written by the executor inside the container.
    assert "worker:0 user process exited with code 0" in out.stdout, out.stdout[-2000:]
    assert "could not read" not in out.stdout + out.stderr, (out.stdout + out.stderr)[-2000:]


def test_the_cli_submits_and_kills_with_no_jdk(krb, tag, tmp_path) -> None:
    """test_cli's ``tony submit --detach`` and ``tony kill`` with no JDK, here over SPNEGO."""
    submit_detached_then_kill(tmp_path, tag, sys.executable)


def test_a_job_longer_than_the_token_renew_interval_still_uploads(krb, tag, ckpt) -> None:
    """The ResourceManager renews the application's HDFS token; the last upload proves it."""
    renew_s = int(_hdfs_site("dfs.namenode.delegation.token.renew-interval") or 86_400_000) / 1000
    assert renew_s <= 120, "the secure profile's renew interval is meant to be about a minute"
    # Train for about 1.5 renew intervals; the last checkpoint comes at the end.
    spec = job(
        "pytest-secure-renew",
        "count_steps.py",
        "--steps",
        "6",
        "--every",
        "3",
        "--sleep",
        str(renew_s * 1.5 / 6),
        "--plain",  # tokens are under test, not TensorFlow
        checkpoint=ckpt,
    )
    app_id = krb.submit(spec, extra_tags=[tag])
    started = krb._rm_get(f"apps/{app_id}")["app"]["startedTime"] / 1000
    result = krb.wait(app_id, poll_interval=1.0, emit=lambda _: None)
    assert result.succeeded, result.diagnostics
    hdfs = krb.hdfs()
    assert remote_checkpoints(hdfs, ckpt) == [3, 6]
    last = hdfs.status(f"{ckpt}/{hdfs.list(ckpt)[-1]}")["modificationTime"] / 1000
    assert last - started > renew_s, f"last upload {last - started:.0f}s after start, renew interval {renew_s:.0f}s"


def test_a_job_longer_than_the_token_max_lifetime_uploads_with_fresh_tokens(krb, tag, ckpt) -> None:
    """``kerberos.refresh_tokens``: past the first HDFS token's maximum lifetime, checkpoints still reach HDFS.

    The application's own token dies at its maximum date, however often the
    ResourceManager renews it; the AM logs in from the keytab shipped to it
    alone and hands the executors fresh tokens. Without the refresh, uploads
    after that date are refused and the job fails (retryable) instead. The
    tokens travel in 0600 files of the staging folder: skein's key-value page
    (``<rm>/proxy/<app>/kv``, open to every viewer of the application) shows a
    pointer, never a token (issue 35.2).
    """
    max_s = int(_hdfs_site("dfs.namenode.delegation.token.max-lifetime") or 604_800_000) / 1000
    if max_s > 300:
        pytest.skip(
            "needs a token max lifetime of a few minutes (make test-secure sets TONY_DEVCLUSTER_TOKEN_MAX_LIFETIME_MS)"
        )
    # Train until about 20 s past the first token's death (the script starts some 20 s
    # after the submit), a checkpoint every 20 s, all kept.
    sleep, every = 10.0, 2
    steps = every * (int((max_s + 20) / (sleep * every)) + 1)
    spec = JobSpec.from_dict(
        {
            "name": "pytest-secure-refresh",
            "roles": {
                "worker": {
                    "memory": "1 GiB",
                    "script": str(JOBS / "count_steps.py"),
                    "args": ["--steps", str(steps), "--every", str(every), "--sleep", str(sleep), "--plain"],
                }
            },
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 1.0,
            "heartbeat_timeout": 60,
            # A refused upload fails the job within a minute, not the default ten.
            "checkpoint": {"dir": ckpt, "poll_interval": 1, "keep": steps, "upload_failure_window": 60},
            "kerberos": {"refresh_tokens": True},
        }
    )
    app_id = krb.submit(spec, extra_tags=[tag])
    # The application's token was obtained before the RM accepted the application: it is dead by then.
    first_token_dead = krb._rm_get(f"apps/{app_id}")["app"]["startedTime"] / 1000 + max_s
    kv_page, token_files = _kv_page_once_a_token_is_published(krb, app_id)
    result = krb.wait(app_id, poll_interval=1.0, emit=lambda _: None)
    assert result.succeeded, result.diagnostics
    hdfs = krb.hdfs()
    assert remote_checkpoints(hdfs, ckpt) == list(range(every, steps + 1, every))
    uploaded = [hdfs.status(f"{ckpt}/{name}")["modificationTime"] / 1000 for name in hdfs.list(ckpt)]
    after = sorted(t - first_token_dead for t in uploaded if t > first_token_dead)
    assert len(after) >= 2, f"uploads {[round(t - first_token_dead) for t in uploaded]}s after the first token died"
    state = result.am_state
    refreshed = [e for e in state.events if "refreshed the HDFS delegation token from the keytab" in e]
    assert len(refreshed) >= 2, state.events
    assert not any("could not refresh" in e for e in state.events), state.events
    # skein staged the keytab on HDFS for YARN to localise; the AM deleted that copy (checked while it
    # ran, in _kv_page_once_a_token_is_published: the whole folder is gone at the end).
    assert "AM removed the keytab's staged copy from HDFS" in state.events, state.events
    # Nor any token the AM wrote (checked on the page fetched while the job ran).
    for path, url_string in token_files.items():
        assert url_string not in kv_page and url_string[:40] not in kv_page, f"the token of {path} is on the kv page"
    # The AM removed its staging folder, token files and all, at the end.
    wait_until(lambda: krb.report(app_id).state == "FINISHED", 120, f"{app_id} to finish")
    assert hdfs.status(f".skein/{app_id}", strict=False) is None, "the staging folder (token files) was left"
    # Neither the token nor the keytab's location in what clients see.
    doc = json.dumps(state.to_dict())
    assert "delegation=" not in doc and "token=" not in doc and os.environ["TONY_KERBEROS_KEYTAB"] not in doc
    print(
        f"\ntoken max lifetime {max_s:.0f}s, job {max(uploaded) - first_token_dead + max_s:.0f}s after submit, "
        f"{len(refreshed)} tokens from the keytab, {len(after)} uploads after the first token died "
        f"(the last {after[-1]:.0f}s after)"
    )


def _kv_page_once_a_token_is_published(krb: Any, app_id: str) -> tuple[str, dict[str, str]]:
    """skein's key-value page of the running job over SPNEGO, once the AM's first token pointer is in it,
    and the token in each file the staging folder holds then (read as the job's user).

    On the way: each token file is mode 0600; no file of the staging folder is a copy of the keytab any more."""
    from airflow_provider_tony.runtime.messages import DelegationToken

    url = f"{krb.rm_url.rstrip('/')}/proxy/{app_id}/kv"

    def page() -> str | None:
        try:
            response = krb.http.get(url, follow_redirects=True)
        except httpx.HTTPError:
            return None
        published = "tony-token/pointer" in response.text or "tony-secret" in response.text  # the latter: before
        return response.text if response.status_code == 200 and published else None

    text = wait_until(page, 300, f"the AM's token pointer on {url}")
    # What a viewer of the application reads there: a pointer, no token, no secret key.
    keys = re.findall(r"<td>(tony[^<]{0,80})</td>", text)  # the keys only: a failure must not print a token
    assert "tony-secret" not in text and "HDFS_DELEGATION_TOKEN" not in text, f"a token on the kv page, keys {keys}"
    assert "tony-token/pointer" in text and "delegation=" not in text
    hdfs = krb.hdfs()
    keytab = Path(os.environ["TONY_KERBEROS_KEYTAB"]).read_bytes()
    staged = [f"{d}/{f}" for d, _, files in hdfs.walk(f".skein/{app_id}") for f in files]
    tokens: dict[str, str] = {}
    for path in staged:
        with hdfs.read(path) as reader:
            data = reader.read()
        assert data != keytab, f"a copy of the keytab is left on HDFS: {path}"
        if path.rsplit("/", 1)[1].startswith("tony-hdfs-token-"):
            assert hdfs.status(path)["permission"] == "600", path
            tokens[path] = DelegationToken.from_json(data).token
    assert tokens, f"no token file in the staging folder: {staged}"
    # (The local cluster runs with dfs.permissions.enabled=false, so the mode is checked, not a refusal.)
    return text, tokens


def test_a_keytab_copy_the_am_cannot_remove_fails_the_job_before_any_job_code(krb, tag, tmp_path) -> None:
    """Issue 35.7: when the AM cannot delete the keytab's staged copy (here: its WebHDFS address is dead),
    the job fails with that reason before the cluster spec is handed out; the worker never runs."""
    from airflow_provider_tony.runtime import constants as C

    script = tmp_path / "leave_mark.py"
    script.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")  # the only node is this machine
    spec = JobSpec.from_dict(
        {
            "name": "pytest-secure-keytab-left",
            "roles": {"worker": {"memory": "512 MiB", "script": str(script)}},
            "python": {"interpreter": sys.executable},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 60,
            "kerberos": {"refresh_tokens": True},
        }
    )
    app_spec = krb.build(krb.stage(krb.check(spec)), extra_tags=[tag])
    with socket.socket() as s:  # a port nobody listens on: the AM's WebHDFS calls are refused
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    app_spec.master.env[C.ENV_WEBHDFS_URL] = dead
    app_id = krb.submitter().submit(app_spec)
    try:
        result = krb.wait(app_id, poll_interval=1.0, emit=lambda _: None)
        assert not result.succeeded
        assert "could not remove the keytab's staged copy from HDFS" in result.diagnostics, result.diagnostics
        assert f"delete ~/.skein/{app_id}" in result.diagnostics
        assert os.environ["TONY_KERBEROS_KEYTAB"] not in result.diagnostics
        assert not (tmp_path / "ran").exists(), "the job's code ran although the keytab's copy was left"
        task = result.am_state.tasks["worker:0"] if result.am_state is not None else None
        assert task is None or task.exit_code is None, task
    finally:
        assert krb.remove_staging(app_id), "the staging folder with the copy the AM could not remove"


def test_model_publish_and_tensorboard_sync(krb, tag, ckpt) -> None:
    """Both directions of WebHDFS from containers: the chief pushes events and the model,
    the tensorboard role pulls the events, and the worker's inputs are staged before it starts;
    all with the delegation token. Before that, a missing input is found over SPNEGO before submit."""
    sys.path.insert(0, str(REPO / "dags" / "training"))
    from digits_data import write_partition

    partition = f"{ckpt}/data/digits/dt=2026-12-01"
    write_partition(krb.hdfs(), partition, "2026-12-01")
    inputs = {"digits_train": {"path": f"{partition}/train"}, "digits_eval": {"path": f"{partition}/eval"}}
    late = job("pytest-secure-late", "behave.py", inputs={"late": {"path": f"{ckpt}/data/digits/dt=2026-12-02"}})
    with pytest.raises(InputMissing, match=r"inputs.late.path: .*/dt=2026-12-02 does not exist or holds no files"):
        krb.submit(late, extra_tags=[tag])
    spec = JobSpec.from_dict(
        {
            "name": "pytest-secure-model",
            "roles": {
                "worker": {
                    "memory": "1 GiB",
                    "script": str(REPO / "dags/training/digits_mwms.py"),
                    "args": ["--epochs", "2", "--steps-per-epoch", "10", "--linger", "60"]
                    + ["--input", "digits_train", "--eval-input", "digits_eval"],
                },
                "tensorboard": {"memory": "1 GiB", "module": "airflow_provider_tony.runtime.tensorboard"},
            },
            "python": {"interpreter": sys.executable},
            "heartbeat_timeout": 60,
            "checkpoint": {"dir": f"{ckpt}/ckpt", "model_dir": f"{ckpt}/model", "poll_interval": 1},
            "inputs": inputs,
        }
    )
    app_id = krb.submit(spec, extra_tags=[tag])
    url = wait_until(lambda: krb.tensorboard_url(app_id, krb.am_state(app_id)), 240, "TensorBoard to run")

    def runs() -> list:
        # Through the ResourceManager's web proxy, which speaks SPNEGO on this profile.
        try:
            resp = krb.http.get(f"{url}data/runs", timeout=5)  # SPNEGO through the RM proxy
            resp.raise_for_status()
            return resp.json()
        except (OSError, ValueError, httpx.HTTPError):
            return []

    found = wait_until(runs, 180, "the chief's event files to reach TensorBoard through HDFS")
    assert any("train" in run for run in found), found
    result = krb.wait(app_id, poll_interval=1.0, emit=lambda _: None)
    assert result.succeeded, result.diagnostics
    assert krb.hdfs().status(f"{ckpt}/model/model.keras", strict=False) is not None
    metrics = result.am_state.tasks["worker:0"].progress.metrics
    assert (metrics["input_records"], metrics["eval_records"]) == (1437, 360), metrics  # every file, read whole


def test_the_hooks_test_connection_on_the_secure_connection(cluster) -> None:
    from airflow_provider_tony.hooks.yarn import YarnHook

    ok, message = YarnHook().test_connection()
    assert ok, message
    assert "Kerberos as " in message and "WebHDFS" in message
    assert os.environ["TONY_KERBEROS_KEYTAB"] not in message


def _am_container(krb, app_id: str) -> tuple[str, str]:
    attempts = wait_until(
        lambda: (krb._rm_get(f"apps/{app_id}/appattempts").get("appAttempts") or {}).get("appAttempt"),
        120,
        "an application attempt",
    )
    return attempts[-1]["containerId"], attempts[-1]["nodeHttpAddress"]


def _logs(client, container: str, node: str) -> tuple[int, str]:
    resp = client.http.get(f"http://{node}/ws/v1/node/containers/{container}/logs")  # httpx, SPNEGO
    return resp.status_code, resp.text


@pytest.mark.parametrize("listed", [False, True], ids=["not-listed", "listed"])
def test_acls_keep_the_other_principal_out_unless_listed(krb, other, tag, listed) -> None:
    who = os.environ["TONY_KERBEROS_OTHER_PRINCIPAL"].split("@")[0]
    acls = {"acls": {"view_users": [who], "modify_users": [who]}} if listed else {}
    app_id = krb.submit(job("pytest-secure-acl", "behave.py", "sleep", "--seconds", "600", **acls), extra_tags=[tag])
    wait_until(lambda: krb.report(app_id).state == "RUNNING", 180, f"{app_id} RUNNING")
    container, node = _am_container(krb, app_id)
    wait_until(lambda: _logs(krb, container, node)[0] == 200, 60, "the owner reads the AM's logs")
    status, text = _logs(other, container, node)
    if listed:
        assert status == 200 and "containerLogInfo" in text, (status, text[:300])
        other.kill(app_id)
        wait_until(lambda: krb.report(app_id).state == "KILLED", 60, f"{app_id} KILLED by the listed principal")
        return
    # Hadoop 3.4's NodeManager answers 503 with the reason in the body.
    assert status != 200 and f"User [{who}] is not authorized to view the logs" in text, (status, text[:300])
    with pytest.raises(
        ClusterError, match="(?i)MODIFY_APP|not.*(allowed|authori[sz]ed)|unauthori[sz]ed attempt to kill|cannot perform"
    ):
        other.kill(app_id)
    assert krb.report(app_id).state == "RUNNING"
    # The owner can: the kill path on a secure cluster.
    krb.kill(app_id)
    wait_until(lambda: krb.report(app_id).state == "KILLED", 60, f"{app_id} KILLED by its owner")


def test_airflow_retry_resumes_through_the_trigger(airflow_env, krb) -> None:
    """The operator, deferred to its trigger, on the Kerberos connection; the retry resumes from HDFS."""
    try:
        out = dags_test(airflow_env, "tony_test_resume", dagfile=TEST_DAGS, deferrable=True)
    finally:
        for app in krb.find_by_tags([dag_tag("tony_test_resume")]):
            krb.kill(app.app_id)
    assert run_state(out) == "success", out[-4000:]
    assert out.count("submitted application_") == 2, "expected exactly one retry"
    restored = result_of(out)["tasks"]["worker:0"]["restored_step"]
    assert restored is not None and RESUME_FAIL_AT - RESUME_EVERY <= restored <= RESUME_FAIL_AT, restored
    assert "delegation=" not in out and os.environ["TONY_KERBEROS_KEYTAB"] not in out


def test_nightly_retrain_example_gate_and_lineage_on_kerberos(airflow_env, krb, tmp_path) -> None:
    """Issue 30's acceptance through the example DAGs on the Kerberized cluster: the partition
    written over SPNEGO, the nightly retrain's shards, its gate passing on a good day and refusing a
    degraded one (no retry, no publication, no event) and OpenLineage naming the partitions and the
    model folder (``test_airflow.two_nightly_days``, two real jobs)."""
    base = f"/tmp/pytest-secure-{uuid.uuid4().hex[:8]}/tony"
    try:
        two_nightly_days(airflow_env, krb, base, tmp_path / "openlineage.jsonl")
    finally:
        for app in krb.find_by_tags([dag_tag("tony_nightly_retrain")]):
            krb.kill(app.app_id)
        krb.hdfs().delete(base.rsplit("/", 1)[0], recursive=True)


def test_the_job_page_in_chromium_through_the_proxy_with_spnego(krb, tag, tmp_path) -> None:
    """The job page of a running job, opened by Chromium through the RM's proxy, which speaks SPNEGO here.

    Chromium negotiates with the ticket cache it is given (``KRB5CCNAME``, filled by ``kinit``
    from the submitting principal's keytab) and the realm's ``KRB5_CONFIG``; without a ticket
    the same URL is refused, so the page in the screenshot was reached through Kerberos.
    """
    import shutil
    import subprocess

    import httpx

    from tests.integration._job_page import CHROMIUM, CURVE, SHOTS

    if not Path(CHROMIUM).exists() or shutil.which("kinit") is None:
        pytest.skip("needs Chromium at /usr/bin/chromium and MIT kinit")
    spec = JobSpec.from_dict(
        {
            "name": "pytest-secure-job-page",
            "python": {"interpreter": sys.executable},
            "roles": {"worker": {"instances": 2, "memory": "512 MiB", "script": CURVE, "args": ["40", "1.0"]}},
            "heartbeat_interval": 0.5,
            "heartbeat_timeout": 60,
            "registration_timeout": 180,
        }
    )
    app_id = krb.submit(spec, extra_tags=[tag])
    page_url = krb.job_page_url(app_id)

    def history() -> Any:
        try:
            h = krb.cluster.get_json(page_url + "history", what="the job's history through the RM proxy")
        except ClusterError:
            return None
        return h if len((h.get("metrics") or {}).get("worker:0") or []) >= 3 else None

    wait_until(history, 300, "three progress reports of worker:0 served through the SPNEGO proxy")
    refused = httpx.get(page_url, timeout=10, follow_redirects=True)
    assert refused.status_code == 401, f"the proxy let an unauthenticated request in: HTTP {refused.status_code}"

    ccache = tmp_path / "chromium-ccache"
    env = {**os.environ, "KRB5CCNAME": f"FILE:{ccache}"}
    subprocess.run(
        ["kinit", "-kt", os.environ["TONY_KERBEROS_KEYTAB"], os.environ["TONY_KERBEROS_PRINCIPAL"]],
        env=env,
        check=True,
        timeout=30,
    )
    host = httpx.URL(page_url).host
    shot = SHOTS / "job-page-secure.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            env=env,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                f"--auth-server-allowlist={host}",  # Negotiate only with the cluster's hosts
                "--auth-negotiate-delegate-allowlist=",  # and delegate nothing
                "--disable-auth-negotiate-cname-lookup",  # the SPN is HTTP/<host in the URL>, as Hadoop's
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            statuses: list[int] = []

            def load() -> bool:
                response = page.goto(page_url)
                statuses.append(response.status if response is not None else 0)
                return statuses[-1] == 200

            # Chromium loads its GSSAPI library on the first Negotiate challenge and answers that
            # one challenge with ERR_UNSUPPORTED_AUTH_SCHEME (the 401 stands); later ones negotiate.
            wait_until(load, 60, f"Chromium to negotiate its way to {page_url}")
            cookies = {c["name"]: c["value"] for c in page.context.cookies()}
            assert "t=kerberos" in cookies.get("hadoop.auth", ""), f"no Kerberos auth cookie from the RM: {cookies}"
            page.wait_for_selector('div.chart[data-metric="loss"] svg polyline', timeout=30_000)
            assert page.locator("#tasks tr[data-task]").count() == 2
            text = page.inner_text("body")
            assert "worker:0" in text and "worker:1" in text
            assert "401" not in page.title() and "Authentication required" not in text
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    print(f"\nsecure job page {page_url} through SPNEGO in Chromium (HTTP statuses {statuses}), screenshot {shot}")
