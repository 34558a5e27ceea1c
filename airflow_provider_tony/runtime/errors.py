"""One error hierarchy for the whole provider.

Every message names the value received and the fix, so that a data scientist
reading an Airflow task log knows what to change without reading our code.
"""

from __future__ import annotations


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


class DocumentVersionError(SpecError):
    """A message was written in a newer major version of its layout than this reader knows.

    Reading it on would misread fields that changed meaning, so it is refused
    with the versions and the fix (upgrade the provider on the reading side),
    not taken for a malformed document.
    """
