"""``memory_retry``: a try after a container YARN killed for its memory asks for more.

What the operator decides from the previous try's typed failure (``runtime.messages.Failure``):
the request this try makes, whether another try is left, and the advice the failed try's
message ends with. Finding the previous try (its application, its stored history) is the
operator's; this module only reads the failure and the job's ``memory_retry``.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow_provider_tony.runtime.messages import Failure
from airflow_provider_tony.runtime.spec import JobSpec

#: ``Failure.kind`` of a container YARN killed for its memory (``runtime.failure.FailureKind.OUT_OF_MEMORY``).
OUT_OF_MEMORY = "out_of_memory"


def grown(spec: JobSpec, failure: Failure | None, app_id: str, warn: Callable[..., object]) -> JobSpec:
    """``spec`` with the killed role asking for more, after ``failure`` (the previous try's, in ``app_id``).

    The failure holds the request that was killed (already grown by an earlier retry)
    and the role to grow; the growth is said with ``warn`` (the task log's). Any other
    failure, or a request not grown, leaves the job as written.
    """
    if failure is None or failure.kind != OUT_OF_MEMORY:
        return spec
    role = (failure.fix_field or "").removeprefix("roles.").removesuffix(".memory")
    killed = failure.requested_mib
    request = spec.memory_retry.next_request(killed) if killed else None
    if role not in spec.roles or request is None or request <= spec.roles[role].memory:
        return spec
    warn(
        "memory_retry: %s was killed for memory in %s (peak %s MiB of %s MiB requested); this try asks for "
        "roles.%s.memory = %d MiB (factor %g, max %d MiB)",
        failure.task_id,
        app_id,
        failure.peak_mib,
        killed,
        role,
        request,
        spec.memory_retry.factor,
        spec.memory_retry.max,
    )
    return spec.with_memory(role, request)


def retry_left(spec: JobSpec | None, requested_mib: int | None) -> bool:
    """Whether ``memory_retry`` grants another try a larger request than ``requested_mib``."""
    return spec is not None and requested_mib is not None and spec.memory_retry.next_request(requested_mib) is not None


def advice(spec: JobSpec | None, fix_field: str | None, requested_mib: int | None) -> str:
    """What an out-of-memory failure's message ends with: the field to raise, or what the retry asks for."""
    field_ = fix_field or "the role's memory"
    if spec is None or not spec.memory_retry.enabled or requested_mib is None:
        return (
            f"Out of memory: raise {field_} (it asked for {requested_mib} MiB), or set memory_retry "
            "(factor, max) for the next try to ask for more"
        )
    request = spec.memory_retry.next_request(requested_mib)
    if request is None:
        return (
            f"Out of memory at memory_retry.max ({spec.memory_retry.max} MiB): not retried; raise {field_} "
            "and memory_retry.max, or lower the job's memory use"
        )
    return f"Out of memory: retried by memory_retry, the next try asks for {field_} = {request} MiB"


__all__ = ["OUT_OF_MEMORY", "advice", "grown", "retry_left"]
