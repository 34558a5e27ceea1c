"""One error hierarchy for the whole provider.

Every message names the value received and the fix, so that a data scientist
reading an Airflow task log knows what to change without reading our code.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class TonyError(Exception):
    """Base of every error this provider raises on purpose."""


class SpecError(TonyError, ValueError):
    """A JobSpec is invalid; raised before anything is submitted to YARN.

    ``field`` is the dotted path of the offending field (``roles.worker.memory``).
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}")


class InputMissing(SpecError):
    """A job's input is missing or empty on HDFS, found before submit (``inputs.<name>``).

    A late partition is a normal event, so whether the Airflow try may be
    retried is the input's own ``retryable_if_missing``: ``retryable``.
    ``path`` is the input's path as the job gave it.
    """

    def __init__(self, field: str, path: str, message: str, retryable: bool = True) -> None:
        self.path = path
        self.retryable = retryable
        super().__init__(field, message)


class InputTooLarge(SpecError):
    """A task's share of an input exceeds ``inputs.<name>.max_bytes_per_task`` or its container's free disk.

    Not retryable: a retry would stage the same bytes onto a disk of the same size (and fill a node
    that other users' containers share).
    """


class ClusterError(TonyError):
    """The YARN cluster or HDFS could not be reached or refused a request."""


class RenameFailed(ClusterError):
    """An HDFS rename was refused (source missing, destination taken, parent missing): both paths named."""

    def __init__(self, src: str, dst: str, cause: object) -> None:
        self.src, self.dst = src, dst
        super().__init__(f"could not rename {src} to {dst} on HDFS: {cause}")


class KeytabCopyLeft(ClusterError):
    """The AM could not remove the keytab's staged copy from HDFS (``kerberos.refresh_tokens``).

    The copy is readable with the job's HDFS token, so the AM ends the job
    before it hands out the cluster spec, before any job code runs.
    """


class ClusterUnreachable(ClusterError):
    """The ResourceManager did not answer (down, restarting, failing over): worth asking again."""


class ApplicationUnknown(ClusterError):
    """The ResourceManager answered that it does not know the application (HTTP 404).

    Final, except just after an outage: a restarted RM serves its REST API
    before it has recovered its applications from the state store.
    """


class TokenFileError(TonyError, ValueError):
    """A Hadoop token file (``HADOOP_TOKEN_FILE_LOCATION``) is missing, malformed or lacks the token needed."""


class NameNodeError(TonyError, ValueError):
    """A location is on a NameNode the job was not given, or ``$TONY_NAMENODES`` cannot be read.

    Raised inside the containers (``runtime/namenodes.py``) rather than read the
    location's path on the default NameNode, which would be another folder.
    """


class DocumentVersionError(SpecError):
    """A message was written in a newer major version of its layout than this reader knows.

    Reading it on would misread fields that changed meaning, so it is refused
    with the versions and the fix (upgrade the provider on the reading side),
    not taken for a malformed document.
    """


class TfConfigError(TonyError, ValueError):
    """The task addresses cannot form a valid TensorFlow cluster.

    A ``ValueError`` too, because it is always caused by a bad input value
    (a malformed task id, a gap in the indexes), never by the environment.
    """


class GpuAssignmentError(TonyError):
    """GPUs could not be divided among the containers of a node.

    Raised by the application master before any task starts, so the job fails
    with a clear message instead of tasks running out of GPU memory.
    """


class GpuLeaseError(TonyError):
    """The node has too few GPUs for this task, or they stayed taken too long."""


class JobFileError(TonyError, ValueError):
    """A job file that is not a YAML mapping; the message is one line: ``FILE:LINE:COLUMN: what; the fix``."""


class LockBusy(ClusterError):
    """Another live run holds the model's publish lock."""


class KerberosError(ClusterError):
    """Kerberos credentials could not be obtained or were refused; the message says which step."""


class ClusterForbidden(ClusterError):
    """The server answered 401/403: the caller is not authenticated or not allowed."""


class NotFound(ClusterError):
    """The server answered 404 for the thing asked about (an application: see ``ApplicationUnknown``)."""


class AmUnreachable(ClusterError):
    """The RM's proxy answered, but could not reach the AM (a 5xx for its page): not a stale document.

    Raised by a transport's ``am_fetch``; the look counts how long it lasts and
    then asks where the AM runs (``Request.AM_NODE``).
    """


class OutcomeUnknown(ClusterUnreachable):
    """A call that creates or changes something got no answer: it may or may not have taken effect.

    Failover does not send it again; the caller looks at what happened first (a
    submission: is the application known? a write: is the file there?).
    """


class StateUnavailable(TonyError):
    """The AM's state could not be read (not serving yet, already gone): not an error while following."""


@contextmanager
def cluster_errors(what: str) -> Iterator[None]:
    """The one place where skein's, gRPC's and HTTP's errors become ``ClusterError``.

    ``what`` says what was being done; the transport's own message follows it.
    Errors that are already ours pass through unchanged.
    """
    try:
        yield
    except TonyError:
        raise
    except Exception as exc:
        raise ClusterError(f"{what}: {exc}") from exc
