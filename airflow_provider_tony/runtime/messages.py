"""Every message the components of a job exchange, as typed objects.

The executors, the AM and the submitting side (client, operator, trigger,
benchmarks) run different code on different hosts and talk through skein's
key-value store. Each message has one class here, built on the JobSpec's
``Model`` base, so that a field is spelt once, producers and consumers share
the spelling, and nobody reads another component's dict by string key:

=====================  ========================  =================================
message                written by                read by
=====================  ========================  =================================
``Progress``           user code (progress.py)   executor -> AM -> clients
``Registration``       executor                  AM (``JobTracker.register``)
``Heartbeat``          executor                  AM (``JobTracker.heartbeat``)
``ExitRecord``         executor                  AM (``JobTracker.exited``)
``EventRecord``        executor                  AM (its event list)
``ClusterDocument``    AM                        executors (TF_CONFIG, GPUs)
``Slot``               AM                        a restarted gang's executors (who they are)
``TokenPointer``       AM (token_refresh.py)     executors (where to read the token)
``DelegationToken``    AM (a 0600 HDFS file)     executors (their WebHDFS client)
``RestartRecord``      AM                        clients (inside the state document)
``Failure``            AM                        clients (the verdict's root cause)
``EarlyStop``          AM                        clients (a trial the median rule stopped)
``TaskSummary``        AM                        clients (inside the state document)
``StateDocument``      AM                        client, operator, trigger, bench
``JobHistory``         AM (HTTP, HDFS)           job page, ``tony status``, operator
=====================  ========================  =================================

Compatibility rules (why ``from_dict`` here is lenient where the JobSpec is strict):

* A JobSpec is written by a person, so an unknown key is a typo and is refused.
  A message is written by a program that may be newer than its reader: a
  provider upgraded on the Airflow side re-attaches to an application whose AM
  runs the previous version, and the other way round. So unknown keys are
  ignored and missing keys take their defaults.
* ``StateDocument.version`` is raised when a field changes meaning or is
  removed; adding a field does not raise it. A document without ``version``
  is version 1 (the first layout had none).

This module is the index and the one place to import them from; the classes
live in three modules of one purpose each: ``messages_base.py`` (``Message``
and the caps every field is held to), ``messages_tasks.py`` (inside the
application: ``Progress`` to ``Drained``, ``Usage``, the token messages) and
``messages_state.py`` (the AM's account for the submitting side: the state
document and its parts, ``JobHistory``, ``Cost``, ``GateResult``).

Like the rest of ``runtime/``, these modules import only the standard library
(and the model module), because they are shipped into YARN containers.
"""

from __future__ import annotations

from airflow_provider_tony.runtime.messages_base import MAX_BEAT_POINTS as MAX_BEAT_POINTS
from airflow_provider_tony.runtime.messages_base import MAX_DIAGNOSTICS_CHARS as MAX_DIAGNOSTICS_CHARS
from airflow_provider_tony.runtime.messages_base import MAX_DOCUMENT_BYTES as MAX_DOCUMENT_BYTES
from airflow_provider_tony.runtime.messages_base import MAX_EVENTS as MAX_EVENTS
from airflow_provider_tony.runtime.messages_base import MAX_HISTORY_BYTES as MAX_HISTORY_BYTES
from airflow_provider_tony.runtime.messages_base import MAX_HISTORY_POINTS as MAX_HISTORY_POINTS
from airflow_provider_tony.runtime.messages_base import MAX_METRICS as MAX_METRICS
from airflow_provider_tony.runtime.messages_base import MAX_NAME_CHARS as MAX_NAME_CHARS
from airflow_provider_tony.runtime.messages_base import MAX_PROGRESS_BYTES as MAX_PROGRESS_BYTES
from airflow_provider_tony.runtime.messages_base import MAX_STDERR_LINES as MAX_STDERR_LINES
from airflow_provider_tony.runtime.messages_base import MAX_TASKS as MAX_TASKS
from airflow_provider_tony.runtime.messages_base import MAX_TEXT_CHARS as MAX_TEXT_CHARS
from airflow_provider_tony.runtime.messages_base import MAX_VALUE_CHARS as MAX_VALUE_CHARS
from airflow_provider_tony.runtime.messages_base import Message
from airflow_provider_tony.runtime.messages_base import _int_or_none as _int_or_none
from airflow_provider_tony.runtime.messages_state import MILESTONE_ALL_USER_STARTED as MILESTONE_ALL_USER_STARTED
from airflow_provider_tony.runtime.messages_state import MILESTONE_CLUSTER_PUBLISHED as MILESTONE_CLUSTER_PUBLISHED
from airflow_provider_tony.runtime.messages_state import MILESTONE_VERDICT as MILESTONE_VERDICT
from airflow_provider_tony.runtime.messages_state import (
    STATE_DOCUMENT_VERSION,
    AppState,
    Cost,
    EarlyStop,
    Failure,
    GateResult,
    JobHistory,
    RestartRecord,
    StateDocument,
    TaskState,
    TaskSummary,
)
from airflow_provider_tony.runtime.messages_tasks import MAX_POINTER_PATH_CHARS as MAX_POINTER_PATH_CHARS
from airflow_provider_tony.runtime.messages_tasks import (
    ClusterDocument,
    DelegationToken,
    Drain,
    Drained,
    EventRecord,
    ExitRecord,
    Heartbeat,
    Progress,
    Registration,
    Slot,
    TokenPointer,
)
from airflow_provider_tony.runtime.messages_tasks import Usage as Usage

__all__ = [
    "STATE_DOCUMENT_VERSION",
    "AppState",
    "ClusterDocument",
    "Cost",
    "DelegationToken",
    "TokenPointer",
    "Drain",
    "Drained",
    "EarlyStop",
    "EventRecord",
    "ExitRecord",
    "GateResult",
    "Failure",
    "Heartbeat",
    "JobHistory",
    "Message",
    "Progress",
    "Registration",
    "RestartRecord",
    "Slot",
    "StateDocument",
    "TaskState",
    "TaskSummary",
]
