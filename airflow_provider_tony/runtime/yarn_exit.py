"""What YARN says about a container that ended: was it preempted?

skein's Java AM reports a container that ended with a negative YARN exit
status (``ContainerExitStatus``) as FAILED and passes YARN's diagnostics on as
the container's ``exit_message``. A container the scheduler took back for a
higher-priority queue ends with status -102 (PREEMPTED), whose diagnostics are
always Hadoop's ``SchedulerUtils.PREEMPTED_CONTAINER`` text: the one fact the
AM can read through skein, so it is recognised here, in one place.

A preempted container is the cluster's decision, not a fault of the job: the
AM restarts the gang without counting it against ``max_restarts``
(``runtime/state.py``).
"""

from __future__ import annotations

#: YARN's ``ContainerExitStatus.PREEMPTED``.
PREEMPTED_EXIT_STATUS = -102
#: The diagnostics the ResourceManager gives a preempted container.
PREEMPTED_DIAGNOSTICS = "Container preempted by scheduler"


def is_preempted(message: str | None) -> bool:
    """Whether a container's YARN diagnostics say the scheduler preempted it.

    The text may be embedded in a longer message (the AM prefixes the
    container id and state), so it is looked for, case-insensitively, not
    compared whole.
    """
    return bool(message) and PREEMPTED_DIAGNOSTICS.lower() in str(message).lower()
