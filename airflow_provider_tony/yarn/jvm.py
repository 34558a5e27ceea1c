"""Options for the two JVMs skein starts for us: its driver beside Airflow and its AM on YARN.

Both live for one job (or one worker/triggerer), serve a few small calls a
second, and share their machine with work that matters more: training on
the AM's node, Airflow on the driver's. HotSpot's default tiered JIT spent
about half of the AM's CPU in the first minutes of a job in its C1 and C2
compiler threads, and half of the driver's start-up CPU. Stopping at the
quick C1 compiler (tier 1) is the usual setting for a small control-plane
JVM: the driver starts in 1.4 s instead of 1.8 s on half the CPU, and the
AM JVM of a 2-worker job used 0.006-0.010 cores instead of 0.013-0.014 in
its first minutes.
"""
from __future__ import annotations

JVM_OPTIONS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1",)


def java_tool_options() -> str:
    """For a container's ``JAVA_TOOL_OPTIONS``: read by every JVM since Java 5 and added to
    (not replacing) a cluster's own ``JDK_JAVA_OPTIONS``."""
    return " ".join(JVM_OPTIONS)
