"""The AM's failure rules against what torch 2.15 really prints, captured from two gloo processes.

Why: ``failure.py``'s PyTorch patterns were written from torch's sources; these are the tails a
survivor and a failing rank printed when one of two ``init_process_group("gloo")`` processes
(an ``all_reduce`` loop) raised a ValueError, exited 75, was SIGKILLed or hung, and when the
c10d store's host or its client never came. A survivor's error is a consequence (PEER), a
script's own ValueError its bug (CODE); judged together, the gang's verdict names the cause.
"""

from __future__ import annotations

import pytest

from airflow_provider_tony.runtime.failure import FailureKind, classify_exit, peer_failure
from tests.unit.support.tracker import FULL_GRACE, HB, T0, alive, failed, make_tracker, start

_SITE = "/work/main/.venv/lib/python3.11/site-packages/torch/distributed"
_WAIT = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/tmp/torchcap/cap.py", line 16, in <module>',
    "[rank0]:     dist.all_reduce(t)",
    f'[rank0]:   File "{_SITE}/distributed_c10d.py", line 4181, in all_reduce',
    "[rank0]:     work.wait()",
]
#: The survivor when its peer raised or exited (the peer's sockets closed).
CLOSED = [
    *_WAIT,
    "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection "
    "closed by peer [127.0.0.1]:64749. This is typically caused by a remote worker crashing. Check the logs of "
    "the remote worker before reporting an error. GLHF! 🏖️",
]
#: The survivor when its peer was SIGKILLed.
RESET = [
    *_WAIT,
    "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error "
    "[127.0.0.1]:46244: Connection reset by peer. This is typically caused by a remote worker hanging or bugs in "
    "the application. Check the logs of the remote worker before reporting an error. GLHF! 🏖️",
]
#: The survivor when its peer hung (gloo's timeout, 20 s in the capture).
TIMED_OUT = [
    *_WAIT,
    "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] "
    "Timed out waiting 20000ms for recv operation to complete",
]
#: Rank 1 when rank 0 (the store's host) never came.
NO_STORE = [
    f'  File "{_SITE}/rendezvous.py", line 215, in _create_c10d_store',
    "    return TCPStore(",
    "           ^^^^^^^^^",
    "torch.distributed.DistNetworkError: The client socket has timed out after 20000ms while trying to connect "
    "to (127.0.0.1, 31681).",
]
#: Rank 0 when rank 1 never came.
NO_CLIENT = [
    f'  File "{_SITE}/rendezvous.py", line 215, in _create_c10d_store',
    "    return TCPStore(",
    "           ^^^^^^^^^",
    "torch.distributed.DistStoreError: Timed out after 21 seconds waiting for clients. 1/2 clients joined.",
]
#: The rank whose script raised (torch prefixes each line with the rank).
RAISED = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/tmp/torchcap/cap.py", line 15, in <module>',
    '[rank1]:     raise ValueError(f"a bug at step {step} on rank {rank}")',
    "[rank1]: ValueError: a bug at step 5 on rank 1",
]


@pytest.mark.parametrize(
    ("tail", "names"),
    [(CLOSED, "Connection closed by peer"), (RESET, "Connection reset by peer"), (TIMED_OUT, "Timed out waiting")]
    + [(NO_STORE, "DistNetworkError"), (NO_CLIENT, "1/2 clients joined")],
    ids=["peer-raised-or-exited", "peer-killed", "peer-hung", "store-host-never-came", "client-never-came"],
)
def test_a_survivors_real_torch_error_is_a_consequence(tail: list[str], names: str) -> None:
    found = peer_failure(tail)
    assert found is not None and names in found, found
    assert classify_exit(1, tail) is FailureKind.PEER


def test_a_real_torch_traceback_of_the_scripts_own_valueerror_is_its_bug() -> None:
    assert peer_failure(RAISED) is None
    assert classify_exit(1, RAISED) is FailureKind.CODE


def test_a_rank_that_raised_is_the_cause_and_its_peers_gloo_error_the_consequence() -> None:
    tr = make_tracker({"worker": 2}, max_restarts=2, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:0", 1, CLOSED, T0 + 10.5)  # the survivor may be seen first
    tr.exited("worker:1", 1, RAISED, T0 + 11)
    assert tr.check(T0 + 10.5 + FULL_GRACE - 0.01) is None
    verdict = failed(tr.check(T0 + 10.5 + FULL_GRACE), "worker:1 exited with code 1", "ValueError", retryable=False)
    assert verdict.task_id == "worker:1" and verdict.cause is FailureKind.CODE
    assert verdict.consequences == ["worker:0"] and tr.restarts == []


def test_a_rank_exiting_75_is_the_retryable_cause_of_its_peers_gloo_error() -> None:
    tr = make_tracker({"worker": 2}, **HB)
    start(tr)
    alive(tr, T0 + 10)
    tr.exited("worker:0", 75, ["torch_ddp: rank 0 exits with 75 at step 12"], T0 + 10)
    tr.exited("worker:1", 1, CLOSED, T0 + 10.2)
    verdict = failed(tr.check(T0 + 10.2 + FULL_GRACE), "worker:0 exited with code 75", retryable=True)
    assert verdict.task_id == "worker:0" and verdict.cause is FailureKind.RETRYABLE_EXIT
    assert verdict.consequences == ["worker:1"]
