#!/usr/bin/env python3
"""A real local Hadoop (HDFS + YARN, one or several NodeManagers) built from Maven Central jars.

Why this exists: the provider runs TensorFlow on YARN, and nothing about it
can be shown true without a real ResourceManager, NodeManager, NameNode and
DataNode. No Docker engine and no Hadoop tarball are available where this
project is developed, but Maven Central serves every Hadoop jar, so this
launcher resolves them with Maven, renders a configuration directory and
starts the four daemons as plain JVMs on loopback.

Standard library only: it runs before the project's virtualenv exists.

    python3 devcluster/devcluster.py up|down|status|env
    python3 devcluster/devcluster.py stop-nm I [--lose] | start-nm I

``$TONY_DEVCLUSTER_NODEMANAGERS`` (default 1) starts that many NodeManagers
(at most 4), NodeManager ``I`` on its own loopback address (``localhost``
for 0, ``127.0.0.<I+1>`` after it) so that YARN sees distinct hosts and
placement by host can be shown. With two or more, the last one carries the
node label ``gpu`` (queue ``training`` may use it) and advertises
``$TONY_DEVCLUSTER_GPUS`` (default 4) ``yarn.io/gpu`` through Hadoop's own GPU
plugin, which discovers them by running a stand-in ``nvidia-smi``.

Everything (jars, conf, data, logs, PIDs) lives under one directory,
``$TONY_DEVCLUSTER_HOME`` (default ``.devcluster/`` in the checkout), and all
ports derive from ``$TONY_DEVCLUSTER_PORT_BASE`` (default 19000), so two
checkouts can run side by side.

``TONY_DEVCLUSTER_SECURE=1`` (``make cluster-up SECURE=1``) starts the secure
profile instead: a local MIT KDC (``kdc.py``), Kerberos on every RPC, SPNEGO
on every web server, block access tokens, SASL data transfer and YARN ACLs
(the fragments in ``conf-secure/``), in its own default home
(``.devcluster-secure/``). ``env``, ``status`` and ``down`` read the marker
``up`` leaves in a secure home; a plain ``up`` of such a home is refused
(see ``choose_profile``).
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import json
import os
import shlex
import shutil
import signal
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kdc

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
POM = HERE / "pom.xml"
CONF_TEMPLATES = HERE / "conf"
SECURE_FRAGMENTS = HERE / "conf-secure"
# Hadoop's and YARN's delegation tokens must be renewed this often (ms) on
# the secure profile: short, so that a test job outlives a renew interval.
TOKEN_RENEW_MS = int(os.environ.get("TONY_DEVCLUSTER_TOKEN_RENEW_MS", "60000"))
# ... and stop working this long after they were issued, however often they
# are renewed (dfs.namenode.delegation.token.max-lifetime; Hadoop's default,
# 7 days, unless set). `make test-secure` sets a few minutes, so a test job can
# outlive its first HDFS token (the AM's token refresh, kerberos.refresh_tokens).
TOKEN_MAX_LIFETIME_MS = int(os.environ.get("TONY_DEVCLUSTER_TOKEN_MAX_LIFETIME_MS", str(7 * 24 * 3600 * 1000)))

# Offsets from the port base; one place so that `env`, `status` and the
# configuration templates can never disagree.
PORT_OFFSETS = {
    "nn_rpc_port": 20,
    "nn_http_port": 70,
    "dn_port": 66,
    "dn_http_port": 64,
    "dn_ipc_port": 67,
    "rm_port": 32,
    "rm_scheduler_port": 30,
    "rm_tracker_port": 31,
    "rm_admin_port": 33,
    "rm_http_port": 88,
    "nm_port": 40,
    "nm_localizer_port": 41,
    "nm_http_port": 42,
    "nm_collector_port": 43,
    "nm_amrmproxy_port": 44,
    "kdc_port": 97,  # the secure profile's KDC only
}

# Hadoop 3.4 on Java 17 needs these (Hadoop's own scripts add them since
# HADOOP-19310); we start the JVMs ourselves, so we add them too. They are
# also handed to containers (skein's Java AM) through JDK_JAVA_OPTIONS.
ADD_OPENS = [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED"
    for pkg in (
        "java.io",
        "java.lang",
        "java.lang.reflect",
        "java.math",
        "java.net",
        "java.nio",
        "java.text",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "java.util.zip",
        "sun.nio.ch",
        "sun.security.util",
        "sun.security.x509",
    )
] + ["--add-exports=java.base/sun.net.dns=ALL-UNNAMED", "--add-exports=java.base/sun.net.util=ALL-UNNAMED"]


#: NodeManager ``I`` uses these offsets plus ``NM_PORT_STRIDE * I``: NM 0 keeps
#: 40-44, NM 1 45-49, NM 2 50-54, NM 3 55-59 (64 and up belong to the DataNode).
NM_PORT_KEYS = ("nm_port", "nm_localizer_port", "nm_http_port", "nm_collector_port", "nm_amrmproxy_port")
NM_PORT_STRIDE = 5
MAX_NODEMANAGERS = 4
#: The node label the GPU NodeManager carries. Non-exclusive: containers that
#: ask for no label may use the node's spare room, as on a mixed cluster.
GPU_LABEL = "gpu"
NM_MAIN_CLASS = "org.apache.hadoop.yarn.server.nodemanager.NodeManager"


@dataclass(frozen=True)
class Daemon:
    name: str
    main_class: str
    heap_mb: int
    #: The NodeManager's index; None for the other daemons.
    node: int | None = None


DAEMONS = (
    Daemon("namenode", "org.apache.hadoop.hdfs.server.namenode.NameNode", 384),
    Daemon("datanode", "org.apache.hadoop.hdfs.server.datanode.DataNode", 256),
    Daemon("resourcemanager", "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager", 512),
    Daemon("nodemanager", NM_MAIN_CLASS, 384, node=0),
)


SECURE_MARKER = "secure-profile"


def choose_profile(env: Mapping[str, str], repo: Path, command: str) -> tuple[Path, bool]:
    """The home and whether it runs the secure profile; each profile keeps its own default home.

    ``TONY_DEVCLUSTER_SECURE`` asks for the secure profile; without ``TONY_DEVCLUSTER_HOME`` it
    lives in ``.devcluster-secure/`` and the open one in ``.devcluster/``, so trying the secure
    profile once never turns a later plain ``up`` (or ``make demo``) Kerberized. A home started
    secure keeps its marker: ``env``, ``status`` and ``down`` read it (they describe the home as it
    is), but a plain ``up`` of a marked home is refused with the two ways out rather than quietly
    bringing back a cluster that answers plain HTTP with 401.
    """
    requested = env.get("TONY_DEVCLUSTER_SECURE", "").lower() in ("1", "true", "yes")
    default = repo / (".devcluster-secure" if requested else ".devcluster")
    home = Path(env.get("TONY_DEVCLUSTER_HOME", default)).resolve()
    marked = (home / SECURE_MARKER).exists()
    if command == "up" and marked and not requested:
        raise ClusterError(
            f"{home} holds a secure (Kerberized) cluster: start it with TONY_DEVCLUSTER_SECURE=1 "
            "(make cluster-up SECURE=1), or give the open cluster another TONY_DEVCLUSTER_HOME "
            f"(or remove {home} after `down`)"
        )
    return home, requested or marked


def nodemanager(index: int) -> Daemon:
    """NodeManager ``index``; 0 keeps the single-node cluster's name."""
    return Daemon("nodemanager" if index == 0 else f"nodemanager-{index}", NM_MAIN_CLASS, 384, node=index)


class ClusterError(RuntimeError):
    """A daemon did not come up, or a prerequisite is missing."""


@dataclass(frozen=True)
class Layout:
    """Where everything lives and which ports are used, from the environment."""

    home: Path
    port_base: int
    nm_memory_mb: int
    nm_vcores: int
    nodemanagers: int = 1
    gpus: int = 4
    #: How long the RM waits for a silent NodeManager before calling it LOST.
    nm_expiry_ms: int = 60000
    secure: bool = False
    #: The capacity scheduler's preemption monitor (``TONY_DEVCLUSTER_PREEMPTION``, on by default).
    preemption: bool = True

    @classmethod
    def from_env(cls, command: str = "status") -> Layout:
        home, secure = choose_profile(os.environ, REPO, command)
        layout = cls(
            home=home,
            port_base=int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", "19000")),
            nm_memory_mb=int(os.environ.get("TONY_DEVCLUSTER_NM_MEMORY_MB", "14336")),
            nm_vcores=int(os.environ.get("TONY_DEVCLUSTER_NM_VCORES", "16")),
            nodemanagers=_int_env("TONY_DEVCLUSTER_NODEMANAGERS", "1"),
            gpus=_int_env("TONY_DEVCLUSTER_GPUS", "4"),
            nm_expiry_ms=_int_env("TONY_DEVCLUSTER_NM_EXPIRY_MS", "60000"),
            secure=secure,
            preemption=os.environ.get("TONY_DEVCLUSTER_PREEMPTION", "1").lower() not in ("0", "false", "no"),
        )
        if not 1 <= layout.nodemanagers <= MAX_NODEMANAGERS:
            raise ClusterError(
                f"TONY_DEVCLUSTER_NODEMANAGERS={layout.nodemanagers}: the port layout "
                f"has room for 1 to {MAX_NODEMANAGERS} NodeManagers; pick one of those"
            )
        if not 0 <= layout.gpus <= 64:
            raise ClusterError(f"TONY_DEVCLUSTER_GPUS={layout.gpus}: give 0 to 64 stand-in GPUs")
        if layout.nm_expiry_ms < 1000:
            raise ClusterError(
                f"TONY_DEVCLUSTER_NM_EXPIRY_MS={layout.nm_expiry_ms}: give at least 1000 ms "
                "(NodeManagers heartbeat every 250 ms; a shorter expiry loses healthy nodes)"
            )
        if layout.secure and layout.multi_node:
            # One NodeManager principal and keytab per host would be needed;
            # the secure profile is about credentials, not placement.
            raise ClusterError(
                f"TONY_DEVCLUSTER_NODEMANAGERS={layout.nodemanagers} with the secure profile: "
                "the secure cluster runs one NodeManager; unset one of the two"
            )
        return layout

    @property
    def multi_node(self) -> bool:
        return self.nodemanagers > 1

    @property
    def gpu_node(self) -> int | None:
        """The NodeManager with the ``gpu`` label and the GPUs (the last one), if any."""
        return self.nodemanagers - 1 if self.multi_node else None

    @property
    def daemons(self) -> tuple[Daemon, ...]:
        return DAEMONS + tuple(nodemanager(i) for i in range(1, self.nodemanagers))

    def nm_host(self, index: int) -> str:
        # Distinct loopback addresses make distinct YARN hosts: Linux answers
        # on all of 127.0.0.0/8 without configuration.
        return "localhost" if index == 0 else f"127.0.0.{index + 1}"

    def nm_port(self, key: str, index: int) -> int:
        return self.port(key) + NM_PORT_STRIDE * index

    def nm_id(self, index: int) -> str:
        """The YARN node id (``host:port``) of NodeManager ``index``."""
        return f"{self.nm_host(index)}:{self.nm_port('nm_port', index)}"

    def nm_home(self, index: int) -> Path:
        return self.home if index == 0 else self.home / f"nm{index}"

    def nm_conf(self, index: int) -> Path:
        return self.conf if index == 0 else self.nm_home(index) / "conf"

    def nm_local_dir(self, index: int) -> Path:
        return self.home / "data" / ("nm-local" if index == 0 else f"nm-local-{index}")

    def nm_log_dir(self, index: int) -> Path:
        return self.logs / ("containers" if index == 0 else f"containers-{index}")

    def nm_gpu_bin(self, index: int) -> Path:
        """Where the stand-in ``nvidia-smi`` of a GPU NodeManager lives."""
        return self.nm_home(index) / "gpu-bin"

    def nm_gpu_leases(self, index: int) -> Path:
        """Where the executors on a GPU NodeManager lease its stand-in GPUs (``TONY_GPU_LEASE_DIR``)."""
        return self.nm_home(index) / "gpu-leases"

    def nm_url_of(self, index: int) -> str:
        return f"http://{self.nm_host(index)}:{self.nm_port('nm_http_port', index)}"

    def daemon_conf(self, daemon: Daemon) -> Path:
        return self.nm_conf(daemon.node) if daemon.node else self.conf

    def daemon_classpath(self, daemon: Daemon) -> str:
        return f"{self.daemon_conf(daemon)}:{self.webapps}:{self.jars}/*"

    @property
    def jars(self) -> Path:
        # Overridable so that a second cluster (e.g. the lifecycle test's) can
        # share the jar cache of the first instead of downloading again.
        return Path(os.environ.get("TONY_DEVCLUSTER_JARS", self.home / "jars")).resolve()

    @property
    def webapps(self) -> Path:
        # Beside the jars (not in home) so that a shared jar cache carries it.
        return self.jars / "_webapps"

    @property
    def classpath(self) -> str:
        return f"{self.conf}:{self.webapps}:{self.jars}/*"

    @property
    def realm(self) -> kdc.Realm:
        return kdc.Realm(dir=self.home / "krb5", port=self.port("kdc_port"), user=getpass.getuser())

    @property
    def conf(self) -> Path:
        return self.home / "conf"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def run(self) -> Path:
        return self.home / "run"

    @property
    def bin(self) -> Path:
        return self.home / "bin"

    @property
    def skein(self) -> Path:
        return self.home / "skein"

    def port(self, key: str) -> int:
        return self.port_base + PORT_OFFSETS[key]

    @property
    def webhdfs_url(self) -> str:
        return f"http://localhost:{self.port('nn_http_port')}"

    @property
    def rm_url(self) -> str:
        return f"http://127.0.0.1:{self.port('rm_http_port')}"

    @property
    def nm_url(self) -> str:
        return f"http://localhost:{self.port('nm_http_port')}"

    @property
    def fs_default(self) -> str:
        return f"hdfs://127.0.0.1:{self.port('nn_rpc_port')}"


def _int_env(name: str, default: str) -> int:
    raw = os.environ.get(name, default)
    try:
        return int(raw)
    except ValueError:
        raise ClusterError(f"{name}={raw!r} is not a whole number; set it to one, e.g. {default}") from None


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


# ---------------------------------------------------------------- jars


def fetch_jars(layout: Layout) -> bool:
    """Resolve the Hadoop jars once; returns True when Maven had to run."""
    stamp = layout.jars / ".pom.sha256"
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text().strip() == digest:
        return False
    if shutil.which("mvn") is None:
        raise ClusterError("Maven is needed once to fetch the Hadoop jars: apt-get install maven")
    if layout.jars.exists():
        shutil.rmtree(layout.jars)
    layout.jars.mkdir(parents=True)
    # Write-then-stamp: an interrupted download is redone on the next `up`.
    cmd = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(POM),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={layout.jars}",
    ]
    print(f"fetching Hadoop jars with Maven into {layout.jars} ...", file=sys.stderr)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"Maven could not resolve the Hadoop jars:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    _unpack_webapps(layout)
    stamp.write_text(digest + "\n")
    return True


def _unpack_webapps(layout: Layout) -> None:
    """Keep only webapps/ of hadoop-hdfs's test jar: its test classes and
    resources must not shadow anything on the daemons' classpath."""
    if layout.webapps.exists():
        shutil.rmtree(layout.webapps)
    layout.webapps.mkdir(parents=True)
    for tests_jar in layout.jars.glob("hadoop-hdfs-*-tests.jar"):
        with zipfile.ZipFile(tests_jar) as zf:
            zf.extractall(layout.webapps, [n for n in zf.namelist() if n.startswith("webapps/")])
        tests_jar.unlink()
    if not (layout.webapps / "webapps" / "hdfs").is_dir():
        raise ClusterError("hadoop-hdfs tests jar had no webapps/hdfs: the NameNode cannot start")


# ---------------------------------------------------------------- conf


def _prop(name: str, value: str) -> str:
    return f"  <property><name>{name}</name><value>{value}</value></property>\n"


def _label_properties(layout: Layout) -> str:
    """Queue ``training`` may place containers on the ``gpu`` partition.

    Also the dominant-resource calculator: the default one counts memory
    only, and the RM refuses to start with ``yarn.io/gpu`` declared.
    """
    if not layout.multi_node:
        return ""
    cs = "yarn.scheduler.capacity.root"
    return "".join(
        [
            _prop(
                "yarn.scheduler.capacity.resource-calculator",
                "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
            ),
            _prop(f"{cs}.accessible-node-labels", GPU_LABEL),
            _prop(f"{cs}.accessible-node-labels.{GPU_LABEL}.capacity", "100"),
            _prop(f"{cs}.training.accessible-node-labels", GPU_LABEL),
            _prop(f"{cs}.training.accessible-node-labels.{GPU_LABEL}.capacity", "100"),
            _prop(f"{cs}.training.accessible-node-labels.{GPU_LABEL}.maximum-capacity", "100"),
        ]
    )


# The capacity scheduler's preemption policy, on short clocks so that a test
# sees a queue's guaranteed share taken back within seconds: the monitor runs
# every second, a container marked for preemption is killed 2 s later if its
# application did not give it up, the whole shortfall may be taken in one round,
# and a queue over its guarantee by any amount is a candidate.
PREEMPTION_POLICY = (
    "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity.ProportionalCapacityPreemptionPolicy"
)
PREEMPTION_PROPERTIES = {
    "yarn.resourcemanager.scheduler.monitor.enable": "true",
    "yarn.resourcemanager.scheduler.monitor.policies": PREEMPTION_POLICY,
    "yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval": "1000",
    "yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill": "2000",
    "yarn.resourcemanager.monitor.capacity.preemption.total_preemption_per_round": "1.0",
    "yarn.resourcemanager.monitor.capacity.preemption.natural_termination_factor": "1.0",
    "yarn.resourcemanager.monitor.capacity.preemption.max_ignored_over_capacity": "0",
}


def _preemption_properties(layout: Layout) -> str:
    """The ResourceManager's preemption monitor (queue ``urgent`` reclaims from ``default``).

    Only a queue with pending demand under its guaranteed capacity makes it
    act, so tests that use one queue at a time never see a preemption.
    ``TONY_DEVCLUSTER_PREEMPTION=0`` turns it off.
    """
    if not layout.preemption:
        return ""
    return "".join(_prop(name, value) for name, value in PREEMPTION_PROPERTIES.items())


def _extra_yarn_properties(layout: Layout, index: int) -> str:
    """Multi-node additions: node labels (RM) and, on the GPU node, Hadoop's GPU plugin."""
    if not layout.multi_node:
        return ""
    extra = [
        _prop("yarn.node-labels.enabled", "true"),
        _prop("yarn.node-labels.fs-store.root-dir", f"file://{layout.home}/data/node-labels"),
        # Work-preserving ResourceManager restart, for the chaos tests: the RM
        # keeps applications in a state store and, once restarted, takes the
        # running containers back from the NodeManagers' resync instead of
        # killing them. (Later properties win over the template's "false".)
        _prop("yarn.resourcemanager.recovery.enabled", "true"),
        _prop("yarn.resourcemanager.work-preserving-recovery.enabled", "true"),
        _prop(
            "yarn.resourcemanager.store.class",
            "org.apache.hadoop.yarn.server.resourcemanager.recovery.FileSystemRMStateStore",
        ),
        _prop("yarn.resourcemanager.fs.state-store.uri", f"file://{layout.home}/data/rm-state"),
    ]
    if index == layout.gpu_node and layout.gpus > 0:
        # The plugin discovers the devices by running nvidia-smi -q -x and
        # advertises their count as yarn.io/gpu. Under DefaultContainerExecutor
        # it does not pin devices to containers (that needs the
        # LinuxContainerExecutor with cgroups), which is why the executors
        # take node-local GPU leases themselves (runtime/gpu_lease.py).
        extra += [
            _prop("yarn.nodemanager.resource-plugins", "yarn.io/gpu"),
            _prop("yarn.nodemanager.resource-plugins.gpu.allowed-gpu-devices", "auto"),
            _prop(
                "yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables",
                str(layout.nm_gpu_bin(index) / "nvidia-smi"),
            ),
            # The DefaultContainerExecutor starts containers with an empty
            # environment (bash then falls back to its built-in PATH), so the
            # node's PATH with the stand-in nvidia-smi is set as admin env.
            # The stand-in GPUs are this cluster's own, and so are their
            # leases: another checkout's cluster on this machine has a GPU
            # node on the same loopback address, which must not share them.
            _prop(
                "yarn.nodemanager.admin-env",
                f"MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,PATH={layout.nm_gpu_bin(index)}:/usr/local/bin:/usr/bin:/bin,"
                f"TONY_GPU_LEASE_DIR={layout.nm_gpu_leases(index)}",
            ),
        ]
    return "".join(extra)


RESOURCE_TYPES_XML = """<?xml version="1.0"?>
<!-- Written by devcluster.py for a multi-node cluster: GPUs are a YARN resource. -->
<configuration>
  <property><name>yarn.resource-types</name><value>yarn.io/gpu</value></property>
</configuration>
"""


def fake_nvidia_smi(layout: Layout, index: int) -> str:
    """A shell script answering as ``nvidia-smi`` does on a node with stand-in GPUs.

    ``-q -x`` prints the XML Hadoop's ``GpuDeviceInformationParser`` reads
    (``gpu`` elements with ``product_name``, ``uuid``, ``minor_number``,
    ``fb_memory_usage``, ``utilization``, ``temperature``);
    ``--query-gpu=index`` prints one index a line, which is what the task
    executors ask; anything else lists the GPUs as ``-L`` does. UUIDs differ
    per node, as real ones do.
    """
    gpus = []
    for gpu in range(layout.gpus):
        digest = hashlib.sha256(f"{layout.home}:{index}:{gpu}".encode()).hexdigest()
        uuid = f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        gpus.append((gpu, uuid))
    xml_gpus = "".join(
        f'  <gpu id="00000000:{gpu + 1:02X}:00.0">\n'
        "    <product_name>Stand-in GPU (devcluster)</product_name>\n"
        f"    <uuid>{uuid}</uuid>\n"
        f"    <minor_number>{gpu}</minor_number>\n"
        "    <fb_memory_usage><total>16384 MiB</total><used>0 MiB</used><free>16384 MiB</free></fb_memory_usage>\n"
        "    <utilization><gpu_util>0 %</gpu_util><memory_util>0 %</memory_util></utilization>\n"
        "    <temperature><gpu_temp>30 C</gpu_temp><gpu_temp_max_threshold>95 C</gpu_temp_max_threshold>"
        "<gpu_temp_slow_threshold>90 C</gpu_temp_slow_threshold></temperature>\n"
        "  </gpu>\n"
        for gpu, uuid in gpus
    )
    listing = "".join(f"GPU {gpu}: Stand-in GPU (devcluster) (UUID: {uuid})\n" for gpu, uuid in gpus)
    indices = "".join(f"{gpu}\n" for gpu, _ in gpus)
    return (
        "#!/bin/sh\n"
        "# Written by devcluster.py: a stand-in nvidia-smi for a node with fake GPUs.\n"
        'case " $* " in\n'
        "  *--query-gpu=*)\n"
        f"    printf '%s' '{indices}' ;;\n"
        '  *" -q "*)\n'
        "    cat <<'XML'\n"
        '<?xml version="1.0" ?>\n'
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
        "<nvidia_smi_log>\n"
        "  <driver_version>550.00</driver_version>\n"
        f"  <attached_gpus>{len(gpus)}</attached_gpus>\n"
        f"{xml_gpus}"
        "</nvidia_smi_log>\n"
        "XML\n"
        "    ;;\n"
        "  *)\n"
        f"    printf '%s' '{listing}' ;;\n"
        "esac\n"
    )


def render_conf(layout: Layout) -> None:
    """Render the templates with this layout's paths and ports, once per NodeManager."""
    for index in range(layout.nodemanagers):
        values = {key: str(layout.port(key)) for key in PORT_OFFSETS}
        values.update({key: str(layout.nm_port(key, index)) for key in NM_PORT_KEYS})
        conf = layout.nm_conf(index)
        values.update(
            home=str(layout.home),
            conf_dir=str(conf),
            jars_dir=str(layout.jars),
            user=getpass.getuser(),
            nm_memory_mb=str(layout.nm_memory_mb),
            nm_vcores=str(layout.nm_vcores),
            max_alloc_mb=str(min(8192, layout.nm_memory_mb)),
            max_alloc_vcores=str(min(8, layout.nm_vcores)),
            nm_host=layout.nm_host(index),
            nm_local_dir=str(layout.nm_local_dir(index)),
            nm_log_dir=str(layout.nm_log_dir(index)),
            nm_expiry_ms=str(layout.nm_expiry_ms),
            extra_properties=_extra_yarn_properties(layout, index) + _preemption_properties(layout),
            label_properties=_label_properties(layout),
            krb5_dir=str(layout.realm.dir),
            token_renew_ms=str(TOKEN_RENEW_MS),
            token_max_lifetime_ms=str(TOKEN_MAX_LIFETIME_MS),
        )
        conf.mkdir(parents=True, exist_ok=True)
        for template in sorted(CONF_TEMPLATES.iterdir()):
            text = string.Template(template.read_text()).substitute(values)
            fragment = SECURE_FRAGMENTS / template.name
            if layout.secure and fragment.exists():
                # Appended last: in one file, Hadoop's later definition wins.
                extra = string.Template(fragment.read_text()).substitute(values)
                text = text.replace("</configuration>", extra + "</configuration>")
            (conf / template.name).write_text(text)
        if layout.multi_node:
            (conf / "resource-types.xml").write_text(RESOURCE_TYPES_XML)
        if index == layout.gpu_node and layout.gpus > 0:
            layout.nm_gpu_bin(index).mkdir(parents=True, exist_ok=True)
            smi = layout.nm_gpu_bin(index) / "nvidia-smi"
            smi.write_text(fake_nvidia_smi(layout, index))
            smi.chmod(0o755)
    # skein's driver asks `yarn classpath --glob` for the Hadoop classpath;
    # this shim answers with our conf dir first and the jars after it.
    layout.bin.mkdir(parents=True, exist_ok=True)
    shim = layout.bin / "yarn"
    shim.write_text(
        "#!/bin/sh\n"
        "# Written by devcluster.py: skein only ever runs `yarn classpath --glob`.\n"
        f"echo '{layout.conf}:{layout.jars}/*'\n"
    )
    shim.chmod(0o755)


# ---------------------------------------------------------------- processes


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
        "-cp",
        layout.daemon_classpath(daemon),
        daemon.main_class,
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


def _get_json(url: str, layout: Layout | None = None) -> dict:
    if layout is not None and layout.secure:
        return _get_json_spnego(url, layout)
    with urllib.request.urlopen(url, timeout=3) as resp:
        return json.load(resp)


def _launcher_ccache(layout: Layout) -> dict[str, str]:
    """The launcher's own ticket (the submitting user's keytab), in its own cache."""
    realm = layout.realm
    env = {**os.environ, "KRB5_CONFIG": str(realm.krb5_conf), "KRB5CCNAME": f"FILE:{realm.dir / 'ccache-launcher'}"}
    if subprocess.run(["klist", "-s"], env=env).returncode != 0:
        proc = subprocess.run(
            ["kinit", "-kt", str(realm.keytab(realm.user)), realm.user_principal],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise OSError(f"kinit failed: {proc.stderr.strip()}")
    return env


def _get_json_spnego(url: str, layout: Layout) -> dict:
    """Secure web servers want SPNEGO: curl speaks it; the standard library does not."""
    proc = subprocess.run(
        ["curl", "-sSf", "--max-time", "3", "--negotiate", "-u", ":", url],
        env=_launcher_ccache(layout),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise OSError(f"curl {url}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def hdfs_ready(layout: Layout) -> bool:
    url = f"http://127.0.0.1:{layout.port('nn_http_port')}/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState"
    beans = _get_json(url, layout).get("beans", [])
    if not beans or beans[0].get("NumLiveDataNodes", 0) < 1:
        return False
    info = _get_json(
        f"http://127.0.0.1:{layout.port('nn_http_port')}/jmx?qry=Hadoop:service=NameNode,name=NameNodeInfo", layout
    )["beans"][0]
    return not info.get("Safemode")


def yarn_ready(layout: Layout) -> bool:
    metrics = _get_json(f"{layout.rm_url}/ws/v1/cluster/metrics", layout)["clusterMetrics"]
    return metrics.get("activeNodes", 0) >= layout.nodemanagers


def rm_nodes(layout: Layout) -> dict[str, dict]:
    """The ResourceManager's view of its nodes, by node id."""
    nodes = (
        _get_json(
            f"{layout.rm_url}/ws/v1/cluster/nodes?states=NEW,RUNNING,UNHEALTHY,LOST,"
            "SHUTDOWN,DECOMMISSIONING,DECOMMISSIONED,REBOOTED",
            layout,
        ).get("nodes")
        or {}
    ).get("node") or []
    return {node["id"]: node for node in nodes}


def nm_ready(layout: Layout, index: int, since_ms: int) -> bool:
    """NodeManager ``index`` is RUNNING in the RM and has reported since ``since_ms``."""
    node = rm_nodes(layout).get(layout.nm_id(index))
    return bool(node) and node["state"] == "RUNNING" and node.get("lastHealthUpdate", 0) >= since_ms


def _rm_post(layout: Layout, path: str, body: dict) -> None:
    # The RM's web filter makes an unauthenticated caller the static web user;
    # with ACLs off (yarn-site) that user may change node labels.
    req = urllib.request.Request(
        f"{layout.rm_url}/ws/v1/cluster/{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()
    except urllib.error.HTTPError as exc:
        raise ClusterError(
            f"the ResourceManager refused POST {path}: HTTP {exc.code} {exc.read()[:500].decode(errors='replace')}"
        ) from exc


def ensure_gpu_label(layout: Layout) -> None:
    """Create the ``gpu`` node label and put it on the GPU NodeManager, and on no other node.

    Idempotent: the labels are kept in the RM's file store under the state
    directory, so a restarted RM already has them.
    """
    if layout.gpu_node is None:
        return
    labels = _get_json(f"{layout.rm_url}/ws/v1/cluster/get-node-labels", layout)
    names = [label["name"] for label in _as_list((labels.get("nodeLabelInfo") if labels else None) or [])]
    if GPU_LABEL not in names:
        _rm_post(layout, "add-node-labels", {"nodeLabelInfo": [{"name": GPU_LABEL, "exclusivity": False}]})
    node_id = layout.nm_id(layout.gpu_node)
    nodes = rm_nodes(layout)
    if GPU_LABEL not in (nodes.get(node_id, {}).get("nodeLabels") or []):
        # This endpoint takes the labels as a query parameter, not a body.
        _rm_post(layout, f"nodes/{node_id}/replace-labels?labels={GPU_LABEL}", {})
    # Only that node: a home first started with fewer NodeManagers had its GPU node at
    # another index, and the RM's label store still puts `gpu` there (no labels = none).
    for other, node in nodes.items():
        if other != node_id and GPU_LABEL in (node.get("nodeLabels") or []):
            _rm_post(layout, f"nodes/{other}/replace-labels", {})


def _as_list(value: object) -> list:
    # Jersey's JSON renders a one-element list as the element itself.
    return value if isinstance(value, list) else [value]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(line[:400] for line in tail)
    except OSError:
        return "(no log)"


def wait_for(
    what: str, check: Callable[[], bool], layout: Layout, daemons: tuple[Daemon, ...], timeout: float = 180.0
) -> None:
    """Poll `check` until it holds; fail naming the daemon that died or stalled."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for daemon in daemons:
            if running_pid(layout, daemon) is None:
                raise ClusterError(
                    f"{daemon.name} exited while waiting for {what}; "
                    f"tail of {layout.logs / (daemon.name + '.log')}:\n"
                    f"{_tail(layout.logs / (daemon.name + '.log'))}"
                )
        try:
            if check():
                return
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.5)
    culprit = daemons[-1]
    raise ClusterError(
        f"timed out after {timeout:.0f}s waiting for {what}; tail of "
        f"{layout.logs / (culprit.name + '.log')}:\n{_tail(layout.logs / (culprit.name + '.log'))}"
    )


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


def start_kdc(layout: Layout) -> None:
    """The realm (created once) and its KDC, before any daemon needs a ticket."""
    realm = layout.realm
    try:
        kdc.check_installed()
        kdc.write_confs(realm, layout.logs)
        kdc.create_database(realm)
    except kdc.KdcError as exc:
        raise ClusterError(str(exc)) from exc
    if _kdc_pid(layout) is None:
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
        if _kdc_pid(layout) is None:
            raise ClusterError(f"the KDC exited; tail of {layout.logs / 'kdc.log'}:\n{_tail(layout.logs / 'kdc.log')}")
        try:
            if _kdc_answers(layout):
                (layout.home / SECURE_MARKER).write_text(f"realm {kdc.REALM}\n")
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise ClusterError(f"the KDC did not listen on port {layout.port('kdc_port')} within 30s")


def up(layout: Layout) -> None:
    started = time.monotonic()
    jhome = java_home()
    for sub in (layout.home, layout.logs, layout.run, layout.home / "data"):
        sub.mkdir(parents=True, exist_ok=True)
    downloaded = fetch_jars(layout)
    if layout.secure:
        start_kdc(layout)
    render_conf(layout)
    env = daemon_env(layout, jhome)
    format_namenode(layout, jhome, env)
    by_name = {d.name: d for d in layout.daemons}
    for daemon in layout.daemons:
        if running_pid(layout, daemon) is None:
            start_daemon(layout, daemon, jhome)
    wait_for(
        "HDFS (a live DataNode, safe mode off)",
        lambda: hdfs_ready(layout),
        layout,
        (by_name["namenode"], by_name["datanode"]),
    )
    wait_for(
        f"YARN ({layout.nodemanagers} active NodeManager(s))",
        lambda: yarn_ready(layout),
        layout,
        (by_name["resourcemanager"], *[d for d in layout.daemons if d.node is not None]),
    )
    if layout.multi_node:
        ensure_gpu_label(layout)
    print(
        f"devcluster up in {time.monotonic() - started:.1f}s "
        f"({'jars fetched' if downloaded else 'jars cached'}); state in {layout.home}",
        file=sys.stderr,
    )
    print_status(layout, stream=sys.stderr)


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


def down(layout: Layout) -> None:
    # YARN first (its NodeManager kills the containers it runs), then HDFS.
    # Every NodeManager this home ever ran, whatever the setting now says.
    started = {p.stem for p in layout.run.glob("nodemanager-*.pid")}
    extra = tuple(
        nodemanager(int(name.rpartition("-")[2])) for name in sorted(started) if name.rpartition("-")[2].isdigit()
    )
    # The NodeManagers together, then the RM, the DataNode and the NameNode.
    nodemanagers = [d for d in DAEMONS + extra if d.node is not None]
    for group in [nodemanagers, *([d] for d in reversed(DAEMONS) if d.node is None)]:
        running = {daemon: pid for daemon in group if (pid := running_pid(layout, daemon)) is not None}
        _stop_pids(list(running.values()))
        for daemon in group:
            if daemon in running:
                print(f"stopped {daemon.name} (pid {running[daemon]})", file=sys.stderr)
            _pid_file(layout, daemon).unlink(missing_ok=True)
    leftovers = _descendants_in(layout)
    _stop_pids(leftovers, grace=3.0)
    if leftovers:
        print(f"stopped {len(leftovers)} leftover container process(es)", file=sys.stderr)
    kdc_pid = _kdc_pid(layout)
    if kdc_pid is not None:
        _stop_pid(kdc_pid)
        print(f"stopped the KDC (pid {kdc_pid})", file=sys.stderr)
    (layout.run / "kdc.pid").unlink(missing_ok=True)


def print_status(layout: Layout, stream=sys.stdout) -> bool:
    urls = {
        "namenode": f"{layout.webhdfs_url}/  (fs.defaultFS {layout.fs_default})",
        "datanode": f"http://localhost:{layout.port('dn_http_port')}/",
        "resourcemanager": f"{layout.rm_url}/cluster",
    }
    for index in range(layout.nodemanagers):
        label = "  (label gpu)" if index == layout.gpu_node else ""
        urls[nodemanager(index).name] = f"{layout.nm_url_of(index)}/node{label}"
    all_up = True
    for daemon in layout.daemons:
        pid = running_pid(layout, daemon)
        all_up &= pid is not None
        state = f"up (pid {pid})" if pid else "down"
        print(f"{daemon.name:16} {state:18} {urls[daemon.name]}", file=stream)
    if layout.secure:
        pid = _kdc_pid(layout)
        all_up &= pid is not None
        state = f"up (pid {pid})" if pid else "down"
        print(f"{'kdc':16} {state:18} realm {kdc.REALM} on 127.0.0.1:{layout.port('kdc_port')}", file=stream)
    return all_up


def env_lines(layout: Layout) -> list[str]:
    """Shell exports that point skein, the hdfs package and Airflow at this cluster."""
    jhome = java_home()
    user = getpass.getuser()
    yarn_conn = {
        "conn_type": "tony_yarn",
        "host": "127.0.0.1",
        "port": layout.port("rm_http_port"),
        "extra": {
            "hadoop_conf_dir": str(layout.conf),
            "queue": "default",
            "webhdfs_url": layout.webhdfs_url,
            "webhdfs_user": user,
            "skein_config": str(layout.skein),
            "java_home": str(jhome),
            "base_path": "/user/" + user + "/tony",
        },
    }
    webhdfs_conn = {"conn_type": "webhdfs", "host": "localhost", "port": layout.port("nn_http_port"), "login": user}
    exports = {
        "TONY_DEVCLUSTER_HOME": str(layout.home),
        "JAVA_HOME": str(jhome),
        "HADOOP_CONF_DIR": str(layout.conf),
        "HADOOP_USER_NAME": user,
        "SKEIN_CONFIG": str(layout.skein),
        "TONY_WEBHDFS_URL": layout.webhdfs_url,
        "TONY_WEBHDFS_USER": user,
        "TONY_RM_URL": layout.rm_url,
        "TONY_NM_URL": layout.nm_url,
        "AIRFLOW_CONN_TONY_YARN_DEFAULT": json.dumps(yarn_conn, separators=(",", ":")),
        "AIRFLOW_CONN_WEBHDFS_DEFAULT": json.dumps(webhdfs_conn, separators=(",", ":")),
    }
    if layout.multi_node:
        # Tests and fault scripts that call `stop-nm`/`start-nm` need the same layout.
        exports["TONY_DEVCLUSTER_PORT_BASE"] = str(layout.port_base)
        exports["TONY_DEVCLUSTER_NODEMANAGERS"] = str(layout.nodemanagers)
        exports["TONY_DEVCLUSTER_GPUS"] = str(layout.gpus)
    if layout.secure:
        realm = layout.realm
        yarn_conn["extra"].update(principal=realm.user_principal, keytab=str(realm.keytab(realm.user)))
        webhdfs_conn["extra"] = {"use_ssl": False}
        exports.update(
            {
                "AIRFLOW_CONN_TONY_YARN_DEFAULT": json.dumps(yarn_conn, separators=(",", ":")),
                "AIRFLOW_CONN_WEBHDFS_DEFAULT": json.dumps(webhdfs_conn, separators=(",", ":")),
                "KRB5_CONFIG": str(realm.krb5_conf),
                # Our own ticket cache, so the realm never mixes with a user's other tickets.
                "KRB5CCNAME": f"FILE:{realm.ccache}",
                # The JVMs skein starts read krb5.conf from this property only.
                "JDK_JAVA_OPTIONS": f"-Djava.security.krb5.conf={realm.krb5_conf}",
                "TONY_KERBEROS_PRINCIPAL": realm.user_principal,
                "TONY_KERBEROS_KEYTAB": str(realm.keytab(realm.user)),
                "TONY_KERBEROS_OTHER_PRINCIPAL": realm.other_principal,
                "TONY_KERBEROS_OTHER_KEYTAB": str(realm.keytab("other")),
            }
        )
        del exports["HADOOP_USER_NAME"]
    lines = [f"export {k}={shlex.quote(v)}" for k, v in exports.items()]
    lines.append(f'export PATH={shlex.quote(str(layout.bin))}:"$PATH"')
    return lines


def _node_containers(layout: Layout, index: int) -> list[int]:
    """Processes of the containers NodeManager ``index`` launched (cwd in its local dir)."""
    local = f"{layout.nm_local_dir(index)}/"
    return [pid for pid in _descendants_in(layout) if os.readlink(f"/proc/{pid}/cwd").startswith(local)]


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


def start_nm(layout: Layout, index: int) -> None:
    """Start one NodeManager again and wait until the RM schedules on it."""
    daemon = nodemanager(index)
    if running_pid(layout, daemon) is not None:
        return
    since_ms = int(time.time() * 1000)
    start_daemon(layout, daemon, java_home())
    wait_for(
        f"{daemon.name} ({layout.nm_id(index)}) RUNNING in the ResourceManager",
        lambda: nm_ready(layout, index, since_ms),
        layout,
        (daemon,),
    )


def _node_index(layout: Layout, raw: str | None, parser: argparse.ArgumentParser) -> int:
    if raw is None or not raw.isdigit() or not 0 <= int(raw) < layout.nodemanagers:
        parser.error(
            f"give a NodeManager index from 0 to {layout.nodemanagers - 1} "
            f"(TONY_DEVCLUSTER_NODEMANAGERS={layout.nodemanagers}); got {raw!r}"
        )
    return int(raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status", "env", "stop", "stop-nm", "start-nm"])
    parser.add_argument(
        "daemon",
        nargs="?",
        help="with `stop`: stop only this daemon (`up` starts it again); with "
        "`stop-nm`/`start-nm`: the NodeManager's index; for outage tests",
    )
    parser.add_argument(
        "--lose",
        action="store_true",
        help="with `stop-nm`: SIGKILL the NodeManager and its containers (a lost machine)",
    )
    args = parser.parse_args(argv)
    try:
        layout = Layout.from_env(args.command)
    except ClusterError as exc:
        print(f"devcluster {args.command} failed: {exc}", file=sys.stderr)
        return 1
    try:
        if args.command == "stop-nm":
            stop_nm(layout, _node_index(layout, args.daemon, parser), args.lose)
        elif args.command == "start-nm":
            start_nm(layout, _node_index(layout, args.daemon, parser))
        elif args.command == "up":
            up(layout)
        elif args.command == "down":
            down(layout)
        elif args.command == "stop":
            names = [d.name for d in layout.daemons]
            if args.daemon not in names:
                parser.error(f"stop needs a daemon name, one of {names}; got {args.daemon!r}")
            daemon = next(d for d in layout.daemons if d.name == args.daemon)
            pid = running_pid(layout, daemon)
            if pid is not None:
                _stop_pid(pid)
            _pid_file(layout, daemon).unlink(missing_ok=True)
        elif args.command == "status":
            return 0 if print_status(layout) else 3
        else:
            print("\n".join(env_lines(layout)))
    except ClusterError as exc:
        print(f"devcluster {args.command} failed: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
