#!/usr/bin/env python3
"""Start-up latency of tf-yarn (Criteo's skein-based peer) on the local cluster.

Why this exists: the benchmark compares our start-up latency with tf-yarn's on
the same YARN cluster. tf-yarn needs a TensorFlow that still has tf.estimator,
so it lives in its own venv (``bench/tf_yarn_setup.sh``) and this script runs
with that venv's python, the cluster environment exported:

    eval "$(python3 devcluster/devcluster.py env)"
    .devcluster/tf-yarn-venv/bin/python bench/tf_yarn_peer.py --workers 4 --repeat 2

Route (tf-yarn's public API only): cluster-pack packs the venv into a pex on
local disk (its own up-to-date cache; a local ``package_path`` keeps it off
libhdfs, which this Hadoop lacks), the pex is put on HDFS once over WebHDFS,
and ``tf_yarn.distributed.client.run_on_yarn`` gets it as ``pyenv_zip_path``, as it
would get the HDFS copy ``cluster_pack.upload_env`` makes on a real cluster.
Each worker's body writes ``time.time()`` to a file under a temp dir on this
machine (the only node). One JSON line per run, seconds from just before the
``run_on_yarn`` call: ``user_code_started`` (the last of the N bodies),
``all_done`` (the ResourceManager's finish time) and ``returned`` (when
``run_on_yarn`` came back; it polls every 10 s and then retries fetching
aggregated logs, which this cluster does not keep; null when it hung and was
interrupted, see ``watchdog``). The skein driver is started before the clock,
as in our own benchmark.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

NAME = f"tf-yarn-peer-{os.getpid()}"  # cleanup kills only this invocation's apps
FINAL = ("FINISHED", "FAILED", "KILLED")
GRACE = 120  # tf-yarn polls every 10 s, then tries 15 x 3 s for aggregated logs


def conf(name: str) -> str:
    root = ET.parse(Path(os.environ["HADOOP_CONF_DIR"]) / "core-site.xml").getroot()
    return next(p.findtext("value") for p in root.iter("property") if p.findtext("name") == name)


def webhdfs(method: str, path: str, op: str, data: Any = None, size: int = 0) -> Any:
    user = os.environ.get("HADOOP_USER_NAME", "root")
    url = f"{os.environ['TONY_WEBHDFS_URL']}/webhdfs/v1{path}?op={op}&user.name={user}"
    if op == "CREATE":  # two steps: the NameNode names a DataNode, which takes the bytes
        with urllib.request.urlopen(urllib.request.Request(url + "&overwrite=true&noredirect=true", method="PUT")) as r:
            url = json.load(r)["Location"]
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Length": str(size)} if data else {})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return resp.read()


def rm_app(app_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{os.environ['TONY_RM_URL']}/ws/v1/cluster/apps/{app_id}", timeout=15) as resp:
        return json.load(resp)["app"]


def one_run(
    pyenv: str, workers: int, memory: str, work: Path, fresh_pex_root: bool, timeout: float, grace: float = GRACE
) -> dict[str, Any]:
    import skein
    from tf_yarn import TaskSpec
    from tf_yarn.distributed.client import run_on_yarn

    marks = work / f"marks-{uuid.uuid4().hex[:8]}"
    marks.mkdir()
    if fresh_pex_root:  # tf-yarn's own default is a fresh /tmp/<uuid> per submission (~1.6 GB unpacked)
        os.environ["PEX_ROOT"] = str(work / f"pex-root-{uuid.uuid4().hex[:8]}")

    def body(local_rank: int, marks: str = str(marks)) -> None:  # runs in each container
        import os as _os
        import time as _time

        now = _time.time()
        name = f"{marks}/{_os.environ['SKEIN_CONTAINER_ID']}"
        with open(name + ".tmp", "w") as f:
            f.write(f"{now} {_os.environ.get('SKEIN_APPLICATION_ID', '')}")
        _os.rename(name + ".tmp", name)

    def started() -> list[list[str]]:
        return [p.read_text().split() for p in marks.iterdir() if not p.name.endswith(".tmp")]

    done = threading.Event()
    hung: list[str] = []

    def watchdog() -> None:
        # tf-yarn can hang for good after its app ends: skein's kv.events() waits, without a timeout, for the
        # watch to be acknowledged, and never learns that the stream died. SIGINT (tf-yarn catches it) frees it.
        app_id = None
        while not done.wait(0.5):
            if app_id is None and (got := started()):
                app_id = got[0][1]
            app = rm_app(app_id) if app_id else {}
            if app.get("state") in FINAL and time.time() - app["finishedTime"] / 1000 >= grace:
                hung.append(f"run_on_yarn had not returned {grace}s after the app ended")
            elif time.time() - t0 > timeout:
                hung.append(f"timed out after {timeout}s")
            if hung and not done.is_set():
                os.kill(os.getpid(), signal.SIGINT)
                return

    client = skein.Client(log_level="error")  # tf-yarn closes it when the run ends
    error = None
    t0 = time.time()
    threading.Thread(target=watchdog, daemon=True).start()
    try:  # in the main thread: tf-yarn installs a SIGINT handler
        with contextlib.redirect_stdout(sys.stderr):  # tf-yarn print()s its progress; stdout is for the JSON
            run_on_yarn(
                body,
                {"worker": TaskSpec(memory=memory, vcores=1, instances=workers)},
                pyenv_zip_path=pyenv,
                skein_client=client,
                queue="default",
                name=NAME,
            )
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported in the JSON line
        error = f"{type(exc).__name__}: {exc}"
    finally:
        done.set()
    returned = time.time()
    if fresh_pex_root:
        shutil.rmtree(os.environ["PEX_ROOT"], ignore_errors=True)
    starts = started()
    if len(starts) < workers:
        raise RuntimeError("; ".join(hung) or error or f"only {len(starts)}/{workers} bodies started")
    app_id = starts[0][1]
    while (app := rm_app(app_id))["state"] not in FINAL:
        time.sleep(0.1)
    result = {
        "workers": workers,
        "user_code_started": round(max(float(s[0]) for s in starts) - t0, 3),
        "all_done": round(app["finishedTime"] / 1000 - t0, 3),
        "app_id": app_id,
        "returned": None if hung else round(returned - t0, 3),
        "final_status": app["finalStatus"],
    }
    if grace == 0 and hung:  # asked for: the figures are in, the log fetching is not timed
        result["interrupted_after_app_end"] = True
    elif hung or error:
        result["error"] = "; ".join(hung) or error
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--memory", default="1 GiB", help="per worker container")
    ap.add_argument("--pex", default=str(Path(sys.prefix) / "tf-yarn-env.pex"), help="local pex cache")
    ap.add_argument("--local-env", action="store_true", help="hand skein the local pex (uploaded on each submit)")
    ap.add_argument("--warm-pex-root", action="store_true", help="one PEX_ROOT for all runs (unpacked once)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument(
        "--return-grace",
        type=float,
        default=GRACE,
        help="seconds after the app ends to wait for run_on_yarn to return; 0: interrupt it at once "
        "(its log fetching retries for ~50 s on a cluster without log aggregation)",
    )
    args = ap.parse_args()

    # cluster-pack runs `pex` from PATH; the venv may not be activated.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    work = Path(tempfile.mkdtemp(prefix="tf-yarn-peer-"))
    staged = f"/tmp/{NAME}"
    try:
        import cluster_pack
        import skein

        t = time.time()
        with contextlib.redirect_stdout(sys.stderr):
            pex = cluster_pack.upload_env(package_path=args.pex)[0]  # builds only when the venv changed
        print(f"pex ready in {time.time() - t:.1f}s ({os.path.getsize(pex) / 2**20:.0f} MiB)", file=sys.stderr)
        pyenv = pex
        if not args.local_env:
            t = time.time()
            with open(pex, "rb") as f:
                webhdfs("PUT", f"{staged}/{Path(pex).name}", "CREATE", f, os.path.getsize(pex))
            pyenv = f"{conf('fs.defaultFS')}{staged}/{Path(pex).name}"
            print(f"pex staged on HDFS in {time.time() - t:.1f}s", file=sys.stderr)
        if args.warm_pex_root:  # unpack once, in a run that is not reported
            os.environ["PEX_ROOT"] = str(work / "pex-root")
            print(f"warm-up: {json.dumps(one_run(pyenv, 1, args.memory, work, False, args.timeout))}", file=sys.stderr)
        for _ in range(args.repeat):
            print(
                json.dumps(
                    one_run(
                        pyenv, args.workers, args.memory, work, not args.warm_pex_root, args.timeout, args.return_grace
                    )
                ),
                flush=True,
            )
        return 0
    except Exception as exc:  # noqa: BLE001 - one machine-readable line, whatever went wrong
        print(json.dumps({"workers": args.workers, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    finally:
        try:
            with skein.Client(log_level="error") as client:
                for report in client.get_applications():  # live ones only: SUBMITTED, ACCEPTED, RUNNING
                    if report.name == NAME:
                        client.kill_application(report.id)
                        print(f"killed leftover {report.id}", file=sys.stderr)
        except Exception as exc:  # noqa: BLE001
            print(f"cleanup check failed: {exc}", file=sys.stderr)
        try:
            webhdfs("DELETE", staged, "DELETE&recursive=true")
        except Exception:  # noqa: BLE001 - nothing staged (local env or an earlier failure)
            pass
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
