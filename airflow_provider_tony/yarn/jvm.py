"""Options for the one JVM a job runs on our behalf: skein's ApplicationMaster on YARN.

(The submitting side runs no JVM: yarn/submit.py submits over HTTP.) The AM
lives for one job, serves a few small calls a second, and shares its node
with the training that matters more. With HotSpot's default tiered JIT, the
C1 and C2 compiler threads were the largest part of its CPU in the first
minutes of a job, more than the work it serves. Stopping at the quick C1
compiler (tier 1) is the usual setting for a small control-plane JVM: it
takes less from the training beside it (the figures are in CHANGELOG.md and bench/).
"""

from __future__ import annotations

JVM_OPTIONS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1",)


def java_tool_options() -> str:
    """For a container's ``JAVA_TOOL_OPTIONS``: read by every JVM since Java 5 and added to
    (not replacing) a cluster's own ``JDK_JAVA_OPTIONS``."""
    return " ".join(JVM_OPTIONS)
