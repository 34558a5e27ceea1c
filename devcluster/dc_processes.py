"""The daemons' processes: the JDK, PID files, starting, formatting and stopping.

Part of ``devcluster.py``; standard library only.
"""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
import time
from pathlib import Path

from dc_layout import ADD_OPENS, ClusterError, Daemon, Layout, nodemanager


def java_home() -> Path:
    """OpenJDK 17: Hadoop fails on newer JDKs in UserGroupInformation."""
    candidates = [os.environ.get("TONY_JAVA_HOME", "")]
    candidates += [str(p) for p in sorted(Path("/usr/lib/jvm").glob("java-17-openjdk*"))]
    candidates += [os.environ.get("JAVA_HOME", "")]
    for cand in candidates:
        if cand and (Path(cand) / "bin" / "java").exists():
            out = subprocess.run([str(Path(cand) / "bin" / "java"), "-version"], capture_output=True, text=True).stderr
            if '"17.' in out or " 17." in out:
                return Path(cand)
    raise ClusterError(
        "no OpenJDK 17 found: install it (apt-get install openjdk-17-jdk-headless) "
        "or set TONY_JAVA_HOME to its directory"
    )


def _pid_file(layout: Layout, daemon: Daemon) -> Path:
    return layout.run / f"{daemon.name}.pid"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def running_pid(layout: Layout, daemon: Daemon) -> int | None:
    """The saved PID if that process is alive and still is this daemon."""
    pid_file = _pid_file(layout, daemon)
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text().strip())
    cmd = _cmdline(pid)
    if daemon.main_class in cmd and f"{layout.daemon_conf(daemon)}:" in cmd:
        return pid
    return None


def daemon_env(layout: Layout, jhome: Path, daemon: Daemon | None = None) -> dict[str, str]:
    node = daemon.node if daemon is not None else None
    path = f"{jhome}/bin:/usr/local/bin:/usr/bin:/bin"
    if node is not None and node == layout.gpu_node and layout.gpus > 0:
        # Containers on the GPU node find the stand-in nvidia-smi on PATH.
        path = f"{layout.nm_gpu_bin(node)}:{path}"
    env = {
        "JAVA_HOME": str(jhome),
        "HADOOP_CONF_DIR": str(layout.daemon_conf(daemon) if daemon is not None else layout.conf),
        # Containers inherit PATH through the env whitelist: keep it plain so
        # no developer venv leaks into YARN containers.
        "PATH": path,
        "JDK_JAVA_OPTIONS": " ".join(ADD_OPENS),
        "LANG": "C.UTF-8",
        "HOME": os.environ.get("HOME", "/root"),
        "USER": getpass.getuser(),
        "HADOOP_USER_NAME": getpass.getuser(),
    }
    if layout.secure:
        # Java reads krb5.conf from this property, not from KRB5_CONFIG; it
        # reaches containers (skein's AM) through the whitelisted variable too.
        env["JDK_JAVA_OPTIONS"] += f" -Djava.security.krb5.conf={layout.realm.krb5_conf}"
        env["KRB5_CONFIG"] = str(layout.realm.krb5_conf)
        del env["HADOOP_USER_NAME"]  # ignored under Kerberos; say so by not setting it
    return env


def _native_opts(layout: Layout, daemon: Daemon) -> list[str]:
    """The secure NodeManagers load Hadoop's native library (see dc_configs.fetch_native); nothing else does."""
    if layout.secure and daemon.node is not None:
        return [f"-Djava.library.path={layout.native_dir}"]
    return []


def start_daemon(layout: Layout, daemon: Daemon, jhome: Path) -> int:
    log = layout.logs / f"{daemon.name}.log"
    env = daemon_env(layout, jhome, daemon)
    cmd = [
        str(jhome / "bin" / "java"),
        f"-Xmx{daemon.heap_mb}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Djava.net.preferIPv4Stack=true",
        f"-Dhadoop.log.dir={layout.logs}",
        f"-Dyarn.log.dir={layout.logs}",
        f"-Dhadoop.log.file={daemon.name}.log",
        "-Dhadoop.root.logger=INFO,console",
        f"-Dproc_{daemon.name}",
        *_native_opts(layout, daemon),
        "-cp",
        layout.daemon_classpath(daemon),
        daemon.main_class,
        *(arg.format(conf=layout.daemon_conf(daemon)) for arg in daemon.args),
    ]
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=layout.home,
            start_new_session=True,
        )
    _pid_file(layout, daemon).write_text(f"{proc.pid}\n")
    # Until the child has exec'd java its cmdline is still ours, and
    # running_pid() would take the new daemon for a dead one.
    deadline = time.monotonic() + 10
    while daemon.main_class not in _cmdline(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return proc.pid


def format_namenode(layout: Layout, jhome: Path, env: dict[str, str]) -> None:
    if (layout.home / "data" / "namenode" / "current" / "VERSION").exists():
        return
    cmd = [
        str(jhome / "bin" / "java"),
        "-Xmx256m",
        f"-Dhadoop.log.dir={layout.logs}",
        "-Dhadoop.root.logger=WARN,console",
        "-cp",
        layout.classpath,
        "org.apache.hadoop.hdfs.server.namenode.NameNode",
        "-format",
        "-nonInteractive",
        "-clusterId",
        "tony-devcluster",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=layout.home)
    if proc.returncode != 0:
        raise ClusterError(
            f"formatting HDFS failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}"
        )


def _descendants_in(layout: Layout) -> list[int]:
    """Processes left by YARN containers: their working directory is under our state dir."""
    found = []
    local = str(layout.home / "data" / "nm-local")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if cwd.startswith(local):
            found.append(int(proc.name))
    return found


def _stop_pid(pid: int, grace: float = 15.0) -> None:
    _stop_pids([pid], grace)


def _stop_pids(pids: list[int], grace: float = 15.0) -> None:
    """SIGTERM them all at once, then SIGKILL whatever is left after ``grace`` seconds.

    Together, not one after the other: a NodeManager that ran containers
    takes about 13 s to stop (it waits for its applications, then for its
    scheduled log deletions), and a three-node cluster would pay that thrice.
    """
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(is_alive(pid) for pid in pids):
        time.sleep(0.2)
    for pid in [pid for pid in pids if is_alive(pid)]:  # the gone ones' pids may be reused by now
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def is_alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _node_containers(layout: Layout, index: int) -> list[int]:
    """Processes of the containers NodeManager ``index`` launched (cwd in its local dir)."""
    local = f"{layout.nm_local_dir(index)}/"
    return [pid for pid in _descendants_in(layout) if os.readlink(f"/proc/{pid}/cwd").startswith(local)]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(line[:400] for line in tail)
    except OSError:
        return "(no log)"


def stop_nm(layout: Layout, index: int, lose: bool) -> None:
    """Stop one NodeManager, for fault tests.

    Plain stop is a graceful shutdown: the NodeManager kills its containers
    and tells the ResourceManager it is leaving. ``lose`` is a machine
    failure: SIGKILL to the NodeManager and to its containers, and the RM
    learns of it only when the node's liveness expires
    (``TONY_DEVCLUSTER_NM_EXPIRY_MS``, 60 s by default).
    """
    daemon = nodemanager(index)
    pid = running_pid(layout, daemon)
    if pid is not None:
        if lose:
            containers = _node_containers(layout, index)
            for victim in [pid, *containers]:
                try:
                    os.kill(victim, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        else:
            _stop_pid(pid)
    _pid_file(layout, daemon).unlink(missing_ok=True)
