"""Options for the two JVMs skein starts for us: its driver beside Airflow and its AM on YARN.

Both live for one job (or one worker/triggerer), serve a few small calls a
second, and share their machine with work that matters more: training on
the AM's node, Airflow on the driver's. With HotSpot's default tiered JIT,
the C1 and C2 compiler threads were the largest part of both JVMs' CPU in
the first minutes of a job, more than the work they serve. Stopping at the
quick C1 compiler (tier 1) is the usual setting for a small control-plane
JVM: the driver starts sooner on less CPU and the AM JVM takes less from
the training beside it (the figures are in CHANGELOG.md and bench/).
"""

from __future__ import annotations

JVM_OPTIONS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1",)


def java_tool_options() -> str:
    """For a container's ``JAVA_TOOL_OPTIONS``: read by every JVM since Java 5 and added to
    (not replacing) a cluster's own ``JDK_JAVA_OPTIONS``."""
    return " ".join(JVM_OPTIONS)
