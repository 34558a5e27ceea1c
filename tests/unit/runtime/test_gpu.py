"""GPU discovery and assignment, with fake nodes and a fake nvidia-smi."""

from __future__ import annotations

import shutil
import subprocess
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.runtime import gpu
from airflow_provider_tony.runtime.errors import TonyError
from airflow_provider_tony.runtime.gpu import (
    GpuAssignmentError,
    assign_gpus,
    cuda_visible_devices,
    discover_local_gpus,
    gpu_env,
    parse_visible_devices,
)

FOUR = ["0", "1", "2", "3"]
EIGHT = [str(i) for i in range(8)]


def assert_disjoint_per_host(requests: list[tuple[str, str, int]], result: dict[str, list[str]]) -> None:
    host_of = {task: host for task, host, _ in requests}
    for a, b in combinations(result, 2):
        if host_of[a] == host_of[b]:
            assert not set(result[a]) & set(result[b]), (a, b, result)


# --- assign_gpus: successful layouts -------------------------------------------------

ASSIGN_CASES = {
    "two-containers-share-4-gpu-node": (
        [("worker:0", "n1", 2), ("worker:1", "n1", 2)],
        {"n1": FOUR},
        None,
        {"worker:0": ["0", "1"], "worker:1": ["2", "3"]},
    ),
    "ps-with-zero-gpus": (
        [("worker:0", "n1", 2), ("ps:0", "n1", 0)],
        {"n1": FOUR},
        None,
        {"worker:0": ["0", "1"], "ps:0": []},
    ),
    "hosts-are-independent": (
        [("worker:0", "n1", 4), ("worker:1", "n2", 4), ("worker:2", "n1", 0)],
        {"n1": FOUR, "n2": FOUR},
        None,
        {"worker:0": FOUR, "worker:1": FOUR, "worker:2": []},
    ),
    "numeric-task-order": (
        [("worker:10", "n1", 1), ("worker:2", "n1", 1)],
        {"n1": ["1", "0"]},
        None,
        {"worker:2": ["0"], "worker:10": ["1"]},
    ),
    "fixed-honoured-others-avoid": (
        [("worker:0", "n1", 2), ("worker:1", "n1", 2)],
        {"n1": FOUR},
        {"worker:0": ["1", "3"]},
        {"worker:0": ["1", "3"], "worker:1": ["0", "2"]},
    ),
    "fixed-on-other-host-does-not-block": (
        [("worker:0", "n1", 2), ("worker:1", "n2", 2)],
        {"n1": FOUR, "n2": FOUR},
        {"worker:0": ["0", "1"]},
        {"worker:0": ["0", "1"], "worker:1": ["0", "1"]},
    ),
    "fixed-none-pinned": (
        [("ps:0", "n1", 0), ("worker:0", "n1", 4)],
        {"n1": FOUR},
        {"ps:0": []},
        {"ps:0": [], "worker:0": FOUR},
    ),
    "uuids-after-indices": (
        [("worker:0", "n1", 1), ("worker:1", "n1", 1)],
        {"n1": ["GPU-b", "GPU-a"]},
        None,
        {"worker:0": ["GPU-a"], "worker:1": ["GPU-b"]},
    ),
    "no-gpus-needed-no-gpus-present": (
        [("ps:0", "cpu1", 0)],
        {},
        None,
        {"ps:0": []},
    ),
    # Text order would put "10" before "2": a node with ten or more GPUs must still hand out the lowest first.
    "devices-in-numeric-order": (
        [("worker:0", "n1", 1), ("worker:1", "n1", 1)],
        {"n1": ["10", "2"]},
        None,
        {"worker:0": ["2"], "worker:1": ["10"]},
    ),
    "numeric-indices-before-uuids": (
        [("worker:0", "n1", 1), ("worker:1", "n1", 1)],
        {"n1": ["GPU-a", "5"]},
        None,
        {"worker:0": ["5"], "worker:1": ["GPU-a"]},
    ),
    # Ids that are not role:index still get a stable place: "chief" before "chief:0", "worker:x" after "worker:0".
    "plain-id-before-its-indexed-kin": (
        [("chief:0", "n1", 1), ("chief", "n1", 1)],
        {"n1": FOUR},
        None,
        {"chief": ["0"], "chief:0": ["1"]},
    ),
    "non-numeric-index-sorts-by-text": (
        [("worker:x", "n1", 1), ("worker:0", "n1", 1)],
        {"n1": FOUR},
        None,
        {"worker:0": ["0"], "worker:x": ["1"]},
    ),
    # Only the part after the last colon is the index: "job:worker:2" before "job:worker:10".
    "colon-in-the-role": (
        [("job:worker:10", "n1", 1), ("job:worker:2", "n1", 1)],
        {"n1": FOUR},
        None,
        {"job:worker:2": ["0"], "job:worker:10": ["1"]},
    ),
    "eight-gpus-mixed": (
        [("chief:0", "n1", 1), ("worker:0", "n1", 3), ("worker:1", "n1", 4)],
        {"n1": EIGHT},
        None,
        {"chief:0": ["0"], "worker:0": ["1", "2", "3"], "worker:1": ["4", "5", "6", "7"]},
    ),
}


@pytest.mark.parametrize(
    ("requests", "node_gpus", "fixed", "expected"),
    list(ASSIGN_CASES.values()),
    ids=list(ASSIGN_CASES),
)
def test_assign_gpus(
    requests: list[tuple[str, str, int]],
    node_gpus: dict[str, list[str]],
    fixed: dict[str, list[str]] | None,
    expected: dict[str, list[str]],
) -> None:
    result = assign_gpus(requests, node_gpus, fixed)
    assert result == expected
    assert set(result) == {task for task, _, _ in requests}
    assert_disjoint_per_host(requests, result)
    for task, host, wanted in requests:
        if not fixed or task not in fixed:
            assert len(result[task]) == wanted
            assert set(result[task]) <= set(node_gpus.get(host, ()))


def test_two_containers_cover_exactly_the_four_gpus() -> None:
    result = assign_gpus([("worker:1", "n1", 2), ("worker:0", "n1", 2)], {"n1": FOUR})
    assert sorted(result["worker:0"] + result["worker:1"]) == FOUR
    assert not set(result["worker:0"]) & set(result["worker:1"])


def test_assignment_is_deterministic_regardless_of_request_order() -> None:
    requests = [("worker:0", "n1", 1), ("worker:1", "n1", 2), ("chief:0", "n1", 1)]
    first = assign_gpus(requests, {"n1": FOUR})
    second = assign_gpus(list(reversed(requests)), {"n1": list(reversed(FOUR))})
    assert first == second


# --- assign_gpus: refusals -----------------------------------------------------------

REFUSALS = {
    "not-enough-on-node": (
        [("worker:0", "n1", 2), ("worker:1", "n1", 3)],
        {"n1": FOUR},
        None,
        # the tasks as one readable list, and the two ways out
        [
            "'n1'",
            "worker:0 wants 2, worker:1 wants 3",
            "want 5",
            "lower the GPUs per task",
            "request more nodes with YARN GPU resources",
        ],
    ),
    "fixed-leaves-too-few": (
        [("worker:0", "n1", 2), ("worker:1", "n1", 3)],
        {"n1": FOUR},
        {"worker:0": ["0", "1"]},
        ["'n1'", "2 free", "worker:1 wants 3"],
    ),
    "host-unknown": (
        [("worker:0", "ghost", 1)],
        {"n1": FOUR},
        None,
        ["'ghost'", "0 free", "worker:0 wants 1"],
    ),
    "overlapping-fixed": (
        [("worker:0", "n1", 2), ("worker:1", "n1", 2)],
        {"n1": FOUR},
        {"worker:0": ["0", "1"], "worker:1": ["1", "2"]},
        ["'n1'", "'1'", "worker:0", "worker:1", "NVIDIA_VISIBLE_DEVICES must not overlap"],
    ),
    "fixed-without-request": (
        [("worker:0", "n1", 1)],
        {"n1": FOUR},
        {"worker:9": ["2"]},
        ["worker:9", "no matching request", "include every pinned task in the requests"],
    ),
    "fixed-without-request-listed-in-task-order": (
        [("worker:0", "n1", 1)],
        {"n1": FOUR},
        {"worker:10": ["2"], "worker:2": ["3"]},
        ["['worker:2', 'worker:10']"],
    ),
    "negative-count": (
        [("worker:0", "n1", -1)],
        {"n1": FOUR},
        None,
        ["worker:0", "-1", ">= 0"],
    ),
    # True is an int to Python, but "gpus: true" in a job file is a mistake, not one GPU.
    "boolean-count": (
        [("worker:0", "n1", True)],
        {"n1": FOUR},
        None,
        ["worker:0", "True", ">= 0"],
    ),
    "duplicate-task": (
        [("worker:0", "n1", 1), ("worker:0", "n2", 1)],
        {"n1": FOUR, "n2": FOUR},
        None,
        ["worker:0", "twice"],
    ),
}


@pytest.mark.parametrize(
    ("requests", "node_gpus", "fixed", "fragments"),
    list(REFUSALS.values()),
    ids=list(REFUSALS),
)
def test_assign_gpus_refuses(
    requests: list[tuple[str, str, int]],
    node_gpus: dict[str, list[str]],
    fixed: dict[str, list[str]] | None,
    fragments: list[str],
) -> None:
    with pytest.raises(GpuAssignmentError) as info:
        assign_gpus(requests, node_gpus, fixed)
    assert isinstance(info.value, TonyError)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_overlapping_fixed_on_different_hosts_is_fine() -> None:
    requests = [("worker:0", "n1", 1), ("worker:1", "n2", 1)]
    fixed = {"worker:0": ["0"], "worker:1": ["0"]}
    assert assign_gpus(requests, {"n1": FOUR, "n2": FOUR}, fixed) == fixed


# --- env values ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("devices", "expected"),
    [([], ""), (["0"], "0"), (["0", "3"], "0,3"), (["GPU-abc", "GPU-def"], "GPU-abc,GPU-def")],
)
def test_cuda_visible_devices_and_env(devices: list[str], expected: str) -> None:
    assert cuda_visible_devices(devices) == expected
    assert gpu_env(devices) == {"CUDA_VISIBLE_DEVICES": expected}


def test_ps_with_zero_gpus_hides_every_gpu() -> None:
    result = assign_gpus([("ps:0", "n1", 0)], {"n1": FOUR})
    assert gpu_env(result["ps:0"]) == {"CUDA_VISIBLE_DEVICES": ""}


# --- parse_visible_devices -----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("all", None),
        (" ALL ", None),
        ("none", []),
        ("void", []),
        ("", []),
        ("  ", []),
        ("0", ["0"]),
        ("0,1", ["0", "1"]),
        (" 2 , 0 ", ["2", "0"]),
        ("1,1,0", ["1", "0"]),
        ("0,,1,", ["0", "1"]),
        ("GPU-aaaa,GPU-bbbb", ["GPU-aaaa", "GPU-bbbb"]),
    ],
)
def test_parse_visible_devices(value: str | None, expected: list[str] | None) -> None:
    assert parse_visible_devices(value) == expected


# --- discover_local_gpus -------------------------------------------------------------


class FakeRun:
    """Records the call and returns (or raises) what the test chose."""

    def __init__(self, returncode: int = 0, stdout: Any = "", raises: BaseException | None = None) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.raises = raises
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, args: list[str], **kwargs: Any) -> SimpleNamespace:
        self.calls.append((args, kwargs))
        if self.raises is not None:
            raise self.raises
        return SimpleNamespace(returncode=self.returncode, stdout=self.stdout, stderr="")


@pytest.fixture
def nvidia_smi_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        (FakeRun(stdout="0\n1\n2\n3\n"), FOUR),
        (FakeRun(stdout=b"0\n1\n"), ["0", "1"]),
        (FakeRun(stdout=b"0\n\xff\n1\n"), ["0", "1"]),  # a stray byte is skipped, never an exception
        (FakeRun(stdout=" 1 \n\n0\n"), ["1", "0"]),
        (FakeRun(stdout=""), []),
        (FakeRun(stdout="No devices were found\n"), []),
        (FakeRun(returncode=9, stdout="NVIDIA-SMI has failed\n"), []),
        (FakeRun(raises=subprocess.TimeoutExpired("nvidia-smi", 30)), []),
        (FakeRun(raises=PermissionError("denied")), []),
    ],
    ids=["four", "bytes", "bad-byte", "whitespace", "empty", "no-devices", "nonzero-exit", "timeout", "oserror"],
)
def test_discover_local_gpus(nvidia_smi_present: None, fake: FakeRun, expected: list[str]) -> None:
    fake.calls.clear()  # the parameters live as long as the module: a second run in one process (mutmut) reuses them
    assert discover_local_gpus(run=fake) == expected
    ((args, kwargs),) = fake.calls
    assert args == ["/usr/bin/nvidia-smi", "--query-gpu=index", "--format=csv,noheader"]
    assert kwargs.get("timeout")
    assert kwargs.get("check") is False


def test_discover_local_gpus_without_binary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    fake = FakeRun(stdout="0\n")
    assert discover_local_gpus(run=fake) == []
    assert fake.calls == []


def test_module_uses_shutil_which_from_shutil() -> None:
    # monkeypatching shutil.which above only works if gpu looks it up at call time
    assert gpu.shutil is shutil


def test_discover_local_gpus_runs_the_real_binary_and_survives_a_stray_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real subprocess.run on a planted nvidia-smi: its output is captured, and a byte that is not
    UTF-8 (a driver banner in another encoding) costs that line only, not the executor (text=True raised)."""
    smi = tmp_path / "nvidia-smi"
    smi.write_bytes(b"#!/bin/sh\nprintf '0\\n\\377\\n1\\n'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert discover_local_gpus() == ["0", "1"]
