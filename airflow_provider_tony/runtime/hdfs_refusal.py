"""HDFS answers no retry can change: a folder over its quota, or not writable by the job's user.

An upload that fails because the NameNode is down or slow is worth retrying
(exit 75). One that fails because the checkpoint folder's space quota is used
up (``DSQuotaExceededException``), its name quota is (``NSQuotaExceededException``),
or the job's user may not write there (``AccessControlException``) is HDFS's
answer about the folder: the next try, and every Airflow retry, gets the same
answer. So the executor exits with its own code for it (``HDFS_REFUSED_EXIT_CODE``,
77: EX_NOPERM), which ``runtime/failure.py`` classifies as ``hdfs_refused``,
not retryable, and the verdict names the path and HDFS's own words.

WebHDFS reports the Java exception's simple name (the ``hdfs`` package keeps
it as ``HdfsError.exception``); a client that only has the text (the
provider's own WebHDFS client, an error wrapped by a rename) still carries
the name in it, so both are read.
"""

from __future__ import annotations

import re

__all__ = ["HDFS_REFUSED_EXIT_CODE", "REFUSING_EXCEPTIONS", "refusal", "refused_line"]

#: EX_NOPERM: what the executor exits with when HDFS refused a write for good.
HDFS_REFUSED_EXIT_CODE = 77

#: The NameNode's exceptions that answer for the folder, not for the moment.
REFUSING_EXCEPTIONS = (
    "DSQuotaExceededException",
    "NSQuotaExceededException",
    "QuotaByStorageTypeExceededException",
    "AccessControlException",
)
_NAMES = re.compile("|".join(REFUSING_EXCEPTIONS))

#: How a refusal's line starts in a task's stderr tail (and so in the verdict).
REFUSED_PREFIX = "HDFS refused"


def refusal(exc: BaseException | None) -> str | None:
    """HDFS's refusal in ``exc`` (or what caused it) as ``"<Exception>: <message>"``; None for any other error."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        named = getattr(exc, "exception", None)
        text = " ".join(str(exc).split("\n\tat ", 1)[0].split())[:400]  # the message, not the Java stack
        if isinstance(named, str) and named in REFUSING_EXCEPTIONS:
            return f"{named}: {text}"
        found = _NAMES.search(text)
        if found:
            return text if text.startswith(found.group(0)) else f"{found.group(0)}: {text}"
        exc = exc.__cause__ or exc.__context__
    return None


def refused_line(path: str, answer: str) -> str:
    """The one wording of a refusal in a task's stderr tail: the path first, then HDFS's answer."""
    return f"{REFUSED_PREFIX} {path}: {answer} (not retryable: fix the folder's quota or permissions)"
