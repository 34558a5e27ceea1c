"""Ask a task's NodeManager whether its container has ended, before calling the task lost.

A container YARN killed (over its memory, say) dies without a word to the AM,
and its peers fail at once blaming it: to the AM that looks like a lost node.
YARN's own word (the exit status and why) reaches the AM only after the
NodeManager's next heartbeat to the ResourceManager and skein's next allocate,
which on a loaded machine takes longer than the silence that declares a
blamed task lost (``runtime/blame.py``). The NodeManager knows at once: when it
answers that the container is no longer running, the node is alive and YARN's
word is on its way, so the AM waits for it (at most the heartbeat timeout)
instead of spending a restart on a "lost" task. A NodeManager that does not
answer (the node gone), or answers anything else, changes nothing.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable

log = logging.getLogger("tony.am")

#: The NodeManager's container states (its REST ``state``) of a container that stopped or is being stopped.
ENDED_STATES = frozenset(
    {
        "KILLING",
        "EXITED_WITH_SUCCESS",
        "EXITED_WITH_FAILURE",
        "CONTAINER_CLEANEDUP_AFTER_KILL",
        "CONTAINER_RESOURCES_CLEANINGUP",
        "DONE",
    }
)
#: A dead node's NodeManager must not hold up the AM's loop: a look is short.
PROBE_TIMEOUT_S = 1.0
_MAX_ANSWER_BYTES = 1 << 16


def container_url(host: str, nm_http_port: int, container_id: str) -> str:
    return f"http://{host}:{nm_http_port}/ws/v1/node/containers/{urllib.parse.quote(container_id)}"


def container_ended(
    host: str | None,
    nm_http_port: int | None,
    container_id: str | None,
    opener: Callable[..., object] = urllib.request.urlopen,
) -> bool:
    """Whether the NodeManager at ``host:nm_http_port`` answers that ``container_id`` no longer runs.

    True for a state in ``ENDED_STATES``, or a 404 (the NodeManager already reported the
    container to the ResourceManager and forgot it). False for a running container, an
    unreachable NodeManager, a refusal (a Kerberized web UI) or an answer it cannot read.
    """
    if not host or not nm_http_port or not container_id:
        return False
    url = container_url(host, nm_http_port, container_id)
    try:
        with opener(url, timeout=PROBE_TIMEOUT_S) as answer:  # type: ignore[attr-defined]
            body = answer.read(_MAX_ANSWER_BYTES)
    except urllib.error.HTTPError as exc:
        return exc.code == 404
    except (OSError, ValueError) as exc:  # refused, timed out, reset: the node may be gone
        log.debug("NodeManager at %s:%s did not answer: %s", host, nm_http_port, exc)
        return False
    try:
        state = json.loads(body)["container"]["state"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(state, str) and state.upper() in ENDED_STATES
