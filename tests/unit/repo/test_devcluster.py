"""`devcluster/devcluster.py`'s multi-node layout, rendered without starting anything (no Java needed)."""

from __future__ import annotations

import os
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

from airflow_provider_tony.runtime.gpu import discover_local_gpus
from tests._util import load_script
from tests.unit.support.paths import REPO


def _load() -> ModuleType:
    return load_script("devcluster/devcluster.py", "tony_devcluster_under_test")


dc = _load()


def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodemanagers: int) -> object:
    monkeypatch.setenv("TONY_DEVCLUSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TONY_DEVCLUSTER_JARS", str(tmp_path / "jars"))
    monkeypatch.setenv("TONY_DEVCLUSTER_PORT_BASE", "19700")
    monkeypatch.setenv("TONY_DEVCLUSTER_NODEMANAGERS", str(nodemanagers))
    return dc.Layout.from_env()


def props(path: Path) -> dict[str, str]:
    root = ET.parse(path).getroot()
    return {p.findtext("name"): p.findtext("value") for p in root.iter("property")}


def test_single_node_renders_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lay = layout(tmp_path, monkeypatch, 1)
    dc.render_conf(lay)
    assert not (lay.conf / "resource-types.xml").exists()
    yarn = props(lay.conf / "yarn-site.xml")
    assert yarn["yarn.nodemanager.address"] == "localhost:19740"
    assert yarn["yarn.nodemanager.local-dirs"] == str(lay.home / "data" / "nm-local")
    assert "yarn.node-labels.enabled" not in yarn and "yarn.nodemanager.resource-plugins" not in yarn
    assert not any("accessible-node-labels" in k for k in props(lay.conf / "capacity-scheduler.xml"))
    assert [d.name for d in lay.daemons] == ["namenode", "datanode", "resourcemanager", "nodemanager"]


def test_three_nodes_get_their_own_hosts_ports_and_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lay = layout(tmp_path, monkeypatch, 3)
    dc.render_conf(lay)
    sites = [props(lay.nm_conf(i) / "yarn-site.xml") for i in range(3)]
    keys = [
        "yarn.nodemanager.address",
        "yarn.nodemanager.webapp.address",
        "yarn.nodemanager.localizer.address",
        "yarn.nodemanager.local-dirs",
        "yarn.nodemanager.log-dirs",
    ]
    for key in keys:
        assert len({site[key] for site in sites}) == 3, key
    assert [s["yarn.nodemanager.hostname"] for s in sites] == ["localhost", "127.0.0.2", "127.0.0.3"]
    nm_ports = {int(s[k].rpartition(":")[2]) for s in sites for k in keys[:3]}
    others = {lay.port(k) for k in dc.PORT_OFFSETS if not k.startswith("nm_")}
    assert not nm_ports & others and all(19700 <= p < 19800 for p in nm_ports)
    # Only the last node has GPUs, through Hadoop's plugin and the stand-in on its containers' PATH.
    assert "yarn.nodemanager.resource-plugins" not in sites[1]
    gpu = sites[2]
    assert gpu["yarn.nodemanager.resource-plugins"] == "yarn.io/gpu"
    smi = gpu["yarn.nodemanager.resource-plugins.gpu.path-to-discovery-executables"]
    assert os.access(smi, os.X_OK)
    assert f"PATH={Path(smi).parent}:" in gpu["yarn.nodemanager.admin-env"]
    # this cluster's own leases: another cluster's GPU node on 127.0.0.3 must not share them
    assert f"TONY_GPU_LEASE_DIR={tmp_path / 'home'}/" in gpu["yarn.nodemanager.admin-env"]
    for i in range(3):
        assert (lay.nm_conf(i) / "resource-types.xml").exists()
        assert props(lay.nm_conf(i) / "yarn-site.xml")["yarn.node-labels.enabled"] == "true"
    cs = props(lay.conf / "capacity-scheduler.xml")
    assert cs["yarn.scheduler.capacity.root.training.accessible-node-labels"] == "gpu"
    assert cs["yarn.scheduler.capacity.resource-calculator"].endswith("DominantResourceCalculator")
    assert [d.name for d in lay.daemons][-2:] == ["nodemanager-1", "nodemanager-2"]


def test_node_expiry_is_a_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fault tests that SIGKILL a NodeManager want the RM to call it LOST sooner than 60 s."""
    key = "yarn.nm.liveness-monitor.expiry-interval-ms"
    lay = layout(tmp_path, monkeypatch, 2)
    dc.render_conf(lay)
    assert props(lay.conf / "yarn-site.xml")[key] == "60000"
    monkeypatch.setenv("TONY_DEVCLUSTER_NM_EXPIRY_MS", "5000")
    lay = dc.Layout.from_env()
    dc.render_conf(lay)
    assert {props(lay.nm_conf(i) / "yarn-site.xml")[key] for i in range(2)} == {"5000"}


def test_stand_in_nvidia_smi_answers_like_the_real_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lay = layout(tmp_path, monkeypatch, 2)
    dc.render_conf(lay)
    smi = lay.nm_gpu_bin(1) / "nvidia-smi"
    xml = subprocess.run([str(smi), "-q", "-x"], capture_output=True, text=True, check=True).stdout
    root = ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", xml))
    assert root.tag == "nvidia_smi_log" and root.findtext("attached_gpus") == "4"
    gpus = root.findall("gpu")
    assert [g.findtext("minor_number") for g in gpus] == ["0", "1", "2", "3"]
    assert len({g.findtext("uuid") for g in gpus}) == 4
    assert all(g.find("fb_memory_usage/total") is not None for g in gpus)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    assert discover_local_gpus() == ["0", "1", "2", "3"]  # what the executors run on that node


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("TONY_DEVCLUSTER_NODEMANAGERS", "5", "1 to 4"),
        ("TONY_DEVCLUSTER_NODEMANAGERS", "two", "not a whole number"),
        ("TONY_DEVCLUSTER_GPUS", "-1", "0 to 64"),
        ("TONY_DEVCLUSTER_NM_EXPIRY_MS", "500", "at least 1000"),
    ],
)
def test_bad_settings_are_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, words: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(dc.ClusterError, match=words):
        dc.Layout.from_env()


def _ports(base: int, nodemanagers: int) -> set[int]:
    """Every port a cluster at ``base`` listens on (the KDC's included), and its Airflow stack's."""
    fixed = {base + offset for key, offset in dc.PORT_OFFSETS.items() if key not in dc.NM_PORT_KEYS}
    per_node = {
        base + dc.PORT_OFFSETS[key] + dc.NM_PORT_STRIDE * index
        for key in dc.NM_PORT_KEYS
        for index in range(nodemanagers)
    }
    return fixed | per_node | {base + 380, base + 432}  # devcluster/airflow_stack.py's API and PostgreSQL


def test_the_clusters_of_one_make_test_never_share_a_port() -> None:
    """`make test` runs the open, secure and chaos clusters (and test_two_clusters' second one) from one
    port base; the Makefile and the chaos conftest must agree on the offsets, and the ranges never meet."""
    from tests._cluster import CHAOS_NODEMANAGERS, CHAOS_PORT_OFFSET, SECOND_PORT_BASE

    makefile = (REPO / "Makefile").read_text()
    secure = int(re.search(r"^SECURE_PORT_BASE \?= .*\+ (\d+)", makefile, re.M).group(1))
    chaos = int(re.search(r"^CHAOS_PORT_BASE \?= .*\+ (\d+)", makefile, re.M).group(1))
    assert chaos == CHAOS_PORT_OFFSET, "the Makefile and tests/_cluster.py disagree on the chaos port base"
    second = int(SECOND_PORT_BASE) - int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", "19000"))
    base = 20400
    clusters = {
        "open": _ports(base, 1),
        "secure": _ports(base + secure, 1),
        "second": _ports(base + second, 1),
        "chaos": _ports(base + chaos, max(CHAOS_NODEMANAGERS, dc.MAX_NODEMANAGERS)),
    }
    names = sorted(clusters)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not clusters[a] & clusters[b], f"{a} and {b} share ports {sorted(clusters[a] & clusters[b])}"


@pytest.mark.parametrize("nodemanagers", [1, 4])
def test_queue_urgent_can_take_its_share_back_from_default_by_preemption(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodemanagers: int
) -> None:
    """The preemption test's layout: three queues whose guarantees add up, the monitor on short clocks."""
    monkeypatch.delenv("TONY_DEVCLUSTER_PREEMPTION", raising=False)
    lay = layout(tmp_path, monkeypatch, nodemanagers)
    dc.render_conf(lay)
    cs = props(lay.conf / "capacity-scheduler.xml")
    root = "yarn.scheduler.capacity.root"
    queues = cs[f"{root}.queues"].split(",")
    assert queues == ["default", "training", "urgent"]
    assert sum(float(cs[f"{root}.{q}.capacity"]) for q in queues) == 100
    assert float(cs[f"{root}.urgent.capacity"]) > 0 and cs[f"{root}.urgent.acl_submit_applications"] == "*"
    # each queue may still fill the cluster alone (one user: capacity x user-limit-factor >= 100)
    for q in queues:
        assert cs[f"{root}.{q}.maximum-capacity"] == "100", q
        assert float(cs[f"{root}.{q}.capacity"]) * float(cs[f"{root}.{q}.user-limit-factor"]) >= 100, q
    assert cs[f"{root}.training.disable_preemption"] == "true"
    yarn = props(lay.conf / "yarn-site.xml")
    assert yarn["yarn.resourcemanager.scheduler.monitor.enable"] == "true"
    assert yarn["yarn.resourcemanager.scheduler.monitor.policies"].endswith(".ProportionalCapacityPreemptionPolicy")
    assert int(yarn["yarn.resourcemanager.monitor.capacity.preemption.monitoring_interval"]) <= 1000
    assert int(yarn["yarn.resourcemanager.monitor.capacity.preemption.max_wait_before_kill"]) <= 5000

    monkeypatch.setenv("TONY_DEVCLUSTER_PREEMPTION", "0")
    lay = dc.Layout.from_env()
    dc.render_conf(lay)
    assert "yarn.resourcemanager.scheduler.monitor.enable" not in props(lay.conf / "yarn-site.xml")


def test_each_profile_keeps_its_own_home_and_a_plain_up_never_turns_secure(tmp_path: Path) -> None:
    """The sticky profile: after `make cluster-up SECURE=1`, a plain `make cluster-up` (and so
    `make demo`) must be the open cluster, not the Kerberized one brought back by the home's marker."""
    secure = {"TONY_DEVCLUSTER_SECURE": "1"}
    assert dc.choose_profile({}, tmp_path, "up") == ((tmp_path / ".devcluster").resolve(), False)
    assert dc.choose_profile(secure, tmp_path, "up") == ((tmp_path / ".devcluster-secure").resolve(), True)
    # The secure cluster came up (its marker is in its home): the open profile's home is untouched.
    (tmp_path / ".devcluster-secure").mkdir()
    (tmp_path / ".devcluster-secure" / dc.SECURE_MARKER).write_text("realm TONY.LOCAL\n")
    assert dc.choose_profile({}, tmp_path, "up") == ((tmp_path / ".devcluster").resolve(), False)
    assert dc.choose_profile({}, tmp_path, "env") == ((tmp_path / ".devcluster").resolve(), False)


def test_a_secure_home_is_read_as_secure_but_not_started_plain(tmp_path: Path) -> None:
    home = tmp_path / "mine"
    home.mkdir()
    (home / dc.SECURE_MARKER).write_text("realm TONY.LOCAL\n")
    env = {"TONY_DEVCLUSTER_HOME": str(home)}
    for command in ("env", "status", "down"):  # describe the home as it is
        assert dc.choose_profile(env, tmp_path, command) == (home.resolve(), True)
    with pytest.raises(dc.ClusterError, match="TONY_DEVCLUSTER_SECURE=1"):
        dc.choose_profile(env, tmp_path, "up")
    assert dc.choose_profile({**env, "TONY_DEVCLUSTER_SECURE": "1"}, tmp_path, "up") == (home.resolve(), True)


def test_an_open_home_left_secure_by_an_older_checkout_says_how_to_clean_it(tmp_path: Path) -> None:
    (tmp_path / ".devcluster").mkdir()
    (tmp_path / ".devcluster" / dc.SECURE_MARKER).write_text("realm TONY.LOCAL\n")
    with pytest.raises(dc.ClusterError, match="the jar cache stays"):
        dc.choose_profile({}, tmp_path, "up")
    # Reading it still describes it as it is, so `make cluster-down` stops the Kerberized daemons.
    assert dc.choose_profile({}, tmp_path, "down") == ((tmp_path / ".devcluster").resolve(), True)


def test_no_launcher_module_grows_back_into_a_monolith() -> None:
    """devcluster.py was 1,266 lines mixing jars, configs, processes, readiness, Kerberos and the
    command line; it is split by concern and each part stays readable on its own."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in (REPO / "devcluster").glob("*.py")}
    assert {"dc_layout.py", "dc_configs.py", "dc_processes.py", "dc_readiness.py", "dc_kerberos.py"} <= set(sizes)
    assert not {name: n for name, n in sizes.items() if n > 400}


@pytest.mark.parametrize(
    ("nodemanagers", "secure"), [(1, False), (4, False), (1, True)], ids=["open", "chaos", "secure"]
)
def test_every_profile_enforces_memory_as_production_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodemanagers: int, secure: bool
) -> None:
    """Hadoop's physical-memory check on, vmem off, and memory.enforced off: with it on (Hadoop's
    default) the NodeManager's own check is skipped in favour of cgroups, which are not used here."""
    if secure:
        monkeypatch.setenv("TONY_DEVCLUSTER_SECURE", "1")
    lay = layout(tmp_path, monkeypatch, nodemanagers)
    assert bool(getattr(lay, "secure", False)) is secure
    dc.render_conf(lay)
    for i in range(nodemanagers):
        site = props(lay.nm_conf(i) / "yarn-site.xml")
        assert site["yarn.nodemanager.pmem-check-enabled"] == "true"
        assert site["yarn.nodemanager.vmem-check-enabled"] == "false"
        assert site["yarn.nodemanager.resource.memory.enforced"] == "false"


def _ha_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("TONY_DEVCLUSTER_HA", "1")
    monkeypatch.setenv("TONY_DEVCLUSTER_HOME", str(tmp_path / "ha"))
    monkeypatch.setenv("TONY_DEVCLUSTER_JARS", str(tmp_path / "jars"))
    monkeypatch.setenv("TONY_DEVCLUSTER_PORT_BASE", "27200")
    return dc.Layout.from_env("up")


def test_the_ha_conf_is_written_as_ha_clusters_write_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No plain RM or NameNode address: the provider must find both of each through the per-id
    keys (hadoop_conf.py), as on a production HA cluster; each daemon's copy carries its own id."""
    from airflow_provider_tony.yarn.hadoop_conf import namenode_addresses, rm_addresses

    ha = load_script("devcluster/dc_ha.py", "tony_dc_ha_under_test")
    lay = _ha_layout(tmp_path, monkeypatch)
    ha.render_ha_conf(lay)
    yarn, hdfs, core = (props(lay.conf / f) for f in ("yarn-site.xml", "hdfs-site.xml", "core-site.xml"))
    assert "yarn.resourcemanager.webapp.address" not in yarn and "yarn.resourcemanager.address" not in yarn
    assert "dfs.namenode.http-address" not in hdfs and "dfs.namenode.rpc-address" not in hdfs
    assert core["fs.defaultFS"] == "hdfs://tony"
    assert yarn["yarn.resourcemanager.recovery.enabled"] == "true"
    assert yarn["yarn.resourcemanager.work-preserving-recovery.enabled"] == "true"
    assert yarn["yarn.resourcemanager.store.class"].endswith("ZKRMStateStore")
    assert rm_addresses(str(lay.conf)) == ("http://127.0.0.1:27288", "http://127.0.0.1:27289")
    assert namenode_addresses(str(lay.conf)) == ("http://127.0.0.1:27270", "http://127.0.0.1:27271")
    for ident, key in (("nn1", "dfs.ha.namenode.id"), ("nn2", "dfs.ha.namenode.id")):
        assert props(tmp_path / "ha" / f"conf-{ident}" / "hdfs-site.xml")[key] == ident
    assert props(tmp_path / "ha" / "conf-rm2" / "yarn-site.xml")["yarn.resourcemanager.ha.id"] == "rm2"
    assert "ha.id" not in " ".join(yarn)  # the shared conf (clients, NodeManager, containers) names no id
    assert "clientPort=27221" in (tmp_path / "ha" / "conf-zk" / "zoo.cfg").read_text()
    # Every port of the profile is distinct and inside the cluster's hundred.
    ports = [lay.port(k) for k in dc.PORT_OFFSETS]
    assert len(set(ports)) == len(ports) and all(27200 <= p < 27300 for p in ports)


def test_the_ha_profiles_have_their_own_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TONY_DEVCLUSTER_HOME", raising=False)
    monkeypatch.delenv("TONY_DEVCLUSTER_PORT_BASE", raising=False)
    monkeypatch.setenv("TONY_DEVCLUSTER_HA", "1")
    lay = dc.Layout.from_env("status")
    assert lay.home == (REPO / ".devcluster-ha").resolve() and lay.ha and lay.port_base == 20200
    assert [d.name for d in lay.daemons][:2] == ["zookeeper", "journalnode"]
    assert not lay.secure and "namenode-warehouse" not in [d.name for d in lay.daemons]
    # Kerberized: its own home and ports, and the second HDFS.
    monkeypatch.setenv("TONY_DEVCLUSTER_SECURE", "1")
    lay = dc.Layout.from_env("status")
    assert lay.home == (REPO / ".devcluster-ha-secure").resolve() and lay.ha and lay.secure
    assert lay.port_base == 20500
    assert [d.name for d in lay.daemons][-2:] == ["namenode-warehouse", "datanode-warehouse"]
    # A home started HA is read as HA, but a plain `up` of it is refused.
    monkeypatch.delenv("TONY_DEVCLUSTER_SECURE")
    monkeypatch.delenv("TONY_DEVCLUSTER_HA")
    home = tmp_path / "ha-home"
    home.mkdir()
    (home / dc.HA_MARKER).write_text("ha\n")
    monkeypatch.setenv("TONY_DEVCLUSTER_HOME", str(home))
    assert dc.Layout.from_env("down").ha
    with pytest.raises(dc.ClusterError, match="TONY_DEVCLUSTER_HA=1"):
        dc.Layout.from_env("up")


def test_the_kerberized_ha_conf_adds_the_journalnodes_principal_and_a_second_hdfs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients see nameservice ``warehouse`` (one NameNode) beside ``tony``; this cluster's DataNode
    and each NameNode/ZKFC copy keep to ``tony``; the second HDFS has a conf of its own."""
    from airflow_provider_tony.yarn.hadoop_conf import namenode_addresses

    ha = load_script("devcluster/dc_ha.py", "tony_dc_ha_under_test")
    monkeypatch.setenv("TONY_DEVCLUSTER_SECURE", "1")
    lay = _ha_layout(tmp_path, monkeypatch)
    ha.render_ha_conf(lay)
    hdfs = props(lay.conf / "hdfs-site.xml")
    assert hdfs["dfs.journalnode.kerberos.principal"] == "nn/localhost@TONY.LOCAL"
    assert hdfs["dfs.nameservices"] == "tony,warehouse" and hdfs["dfs.internal.nameservices"] == "tony"
    assert namenode_addresses(str(lay.conf), "warehouse") == ("http://localhost:27273",)
    assert namenode_addresses(str(lay.conf)) == ("http://127.0.0.1:27270", "http://127.0.0.1:27271")
    assert props(tmp_path / "ha" / "conf-nn2" / "hdfs-site.xml")["dfs.nameservice.id"] == "tony"
    own = tmp_path / "ha" / "conf-warehouse"
    assert props(own / "core-site.xml")["fs.defaultFS"] == "hdfs://127.0.0.1:27272"
    assert props(own / "hdfs-site.xml")["dfs.datanode.address"] == "127.0.0.1:27274"
    assert "dfs.nameservices" not in props(own / "hdfs-site.xml")


def test_env_needs_no_jdk_only_up_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``devcluster.py env`` on a machine without a JDK prints every export but JAVA_HOME (make test-fast needs it)."""
    lay = layout(tmp_path, monkeypatch, 1)

    def no_jdk() -> Path:
        raise dc.ClusterError("no OpenJDK 17 found")

    monkeypatch.setattr(dc, "java_home", no_jdk)
    names = [line.split("=", 1)[0].removeprefix("export ") for line in dc.env_lines(lay)]
    assert "JAVA_HOME" not in names
    assert {"TONY_RM_URL", "TONY_WEBHDFS_URL", "SKEIN_CONFIG", "AIRFLOW_CONN_TONY_YARN_DEFAULT", "PATH"} <= set(names)
    monkeypatch.setattr(dc, "java_home", lambda: tmp_path / "jdk")
    assert f"export JAVA_HOME={tmp_path / 'jdk'}" in dc.env_lines(lay)


def test_a_kdc_port_taken_by_another_process_is_refused_not_taken_for_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KDC left by an earlier cluster answered on the port, so `up` took it for its own and every
    daemon failed to log in (Integrity check on decrypted field failed)."""
    import socket

    kerberos = load_script("devcluster/dc_kerberos.py", "tony_dc_kerberos_under_test")
    monkeypatch.setenv("TONY_DEVCLUSTER_SECURE", "1")
    lay = layout(tmp_path, monkeypatch, 1)
    for step in ("check_installed", "write_confs", "create_database"):
        monkeypatch.setattr(kerberos.kdc, step, lambda *a, **k: None)
    started: list[object] = []
    monkeypatch.setattr(kerberos.subprocess, "Popen", lambda *a, **k: started.append(a) or None)
    (tmp_path / "home" / "logs").mkdir(parents=True)
    (tmp_path / "home" / "run").mkdir(parents=True)
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", lay.port("kdc_port")))
        stranger.listen()
        with pytest.raises(dc.ClusterError, match=r"taken by another process, not this home's KDC"):
            kerberos.start_kdc(lay)
    assert started == []
