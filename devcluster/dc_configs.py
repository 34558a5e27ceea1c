"""The Hadoop jars (fetched once with Maven) and the rendered configuration of a local cluster.

Part of ``devcluster.py``; standard library only.
"""

from __future__ import annotations

import getpass
import hashlib
import platform
import shutil
import string
import subprocess
import sys
import zipfile

from dc_layout import (
    CONF_TEMPLATES,
    GPU_LABEL,
    NM_PORT_KEYS,
    POM,
    PORT_OFFSETS,
    SECURE_FRAGMENTS,
    TOKEN_MAX_LIFETIME_MS,
    TOKEN_RENEW_MS,
    ClusterError,
    Layout,
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
    print(f"fetching Hadoop jars with Maven into {layout.jars} ...", file=sys.stderr)
    _maven(
        "resolve the Hadoop jars",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={layout.jars}",
    )
    _unpack_webapps(layout)
    stamp.write_text(digest + "\n")
    return True


#: Hadoop's native library (libhadoop.so) is not among Apache's Maven Central
#: artifacts; Trino's repackaged Hadoop jar carries a build of it. Only the
#: secure NodeManager loads it: with Kerberos on, it opens container log files
#: through SecureIOUtils, which refuses to work without native code, so
#: without it `tony logs` could list a secure job's containers but never print
#: them. Its Hadoop release is older than the daemons' jars; the JNI calls the
#: NodeManager makes (stat, open, user and group names) are the same.
NATIVE_ARTIFACT = "io.trino.hadoop:hadoop-apache:3.3.5-3"
_NATIVE_ARCH = {"x86_64": "Linux-amd64", "aarch64": "Linux-aarch64", "ppc64le": "Linux-ppc64le"}


def fetch_native(layout: Layout) -> bool:
    """Put libhadoop.so in ``layout.native_dir`` once; returns True when Maven had to run."""
    target = layout.native_dir / "libhadoop.so"
    if target.exists():
        return False
    arch = _NATIVE_ARCH.get(platform.machine())
    if arch is None:
        raise ClusterError(f"no native Hadoop library for {platform.machine()}: the secure profile needs one")
    if shutil.which("mvn") is None:
        raise ClusterError("Maven is needed once to fetch Hadoop's native library: apt-get install maven")
    layout.native_dir.mkdir(parents=True, exist_ok=True)
    work = layout.native_dir / ".download"
    shutil.rmtree(work, ignore_errors=True)
    print(f"fetching Hadoop's native library with Maven into {layout.native_dir} ...", file=sys.stderr)
    _maven(f"fetch {NATIVE_ARTIFACT}", "dependency:copy", f"-Dartifact={NATIVE_ARTIFACT}", f"-DoutputDirectory={work}")
    (jar,) = work.glob("*.jar")
    with zipfile.ZipFile(jar) as zf:
        data = zf.read(f"nativelib/{arch}/libhadoop.so")
    # Write-then-rename: an interrupted download is redone on the next `up`.
    partial = target.with_suffix(".partial")
    partial.write_bytes(data)
    partial.rename(target)
    shutil.rmtree(work)
    return True


def _maven(what: str, *goal: str) -> None:
    """One quiet Maven run over devcluster/pom.xml (its plugin versions); the failure names ``what``."""
    proc = subprocess.run(["mvn", "-B", "-q", "-f", str(POM), *goal], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"Maven could not {what}:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")


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
