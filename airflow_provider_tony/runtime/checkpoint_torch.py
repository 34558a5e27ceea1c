"""PyTorch's checkpoint rule: which ``torch.save`` file under ``$TONY_CHECKPOINT_DIR`` is whole.

Why a module of its own: :mod:`checkpoint` moves checkpoints between the
container and HDFS for every framework; what makes a checkpoint *complete* is
each framework's own rule. TensorFlow's (a state file naming a prefix whose
index and shards exist) stays in ``checkpoint.py``; this is PyTorch's.

The convention: one file per checkpoint, ``<name>-<step>.pt`` (or ``_<step>``,
or ``.pth``), holding everything the script needs to resume (model, optimizer,
step), written by global rank 0 only. ``torch.save``'s default format is a zip
archive whose end-of-central-directory record is written last, so a file that
opens as a zip archive was written to the end; a file still being written (or
cut short) does not. A hidden name (``.ckpt-5.pt.tmp``, a script's temporary
before its rename) never matches. The legacy pickle format
(``_use_new_zipfile_serialization=False``) has no such end and is never taken.

The rule is chosen by what is found, not by the job's ``framework``: the
uploader and the restore stay framework-free, a folder holds one framework's
checkpoints in practice, and of two at the same step TensorFlow's wins.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["FRAMEWORK", "holds_one", "newest_whole", "step_of", "why_not_whole", "written_to_the_end"]

#: The framework name a torch checkpoint carries (``LocalCheckpoint.framework``).
FRAMEWORK = "pytorch"
_NAME_RE = re.compile(r"^(?!\.)[^/]*?[-_](\d+)\.pth?$")


def step_of(name: str) -> int | None:
    """The step in a checkpoint file's name (``ckpt-20.pt`` -> 20), None for any other name."""
    match = _NAME_RE.match(name)
    return int(match.group(1)) if match else None


def written_to_the_end(path: Path) -> bool:
    """Whether ``torch.save`` finished ``path``: it opens as a zip archive (its central directory,
    written last, is there and consistent). Reads the directory only, not the tensors."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError):
        return False  # vanished, unreadable, or not yet (or never) a whole archive


def newest_whole(paths: Iterable[Path]) -> tuple[int, Path] | None:
    """The newest whole checkpoint file among ``paths`` (every file under the local checkpoint
    directory, in path order) as ``(step, path)``, None if none.

    Candidates are tried newest first, so a poll opens one archive when the
    newest is whole; of two with the same step the first in path order wins.
    """
    found = [(step, path) for path in paths if (step := step_of(path.name)) is not None]
    for step, path in sorted(found, key=lambda item: (-item[0], item[1])):
        if written_to_the_end(path):
            return step, path
    return None


def why_not_whole(files: Mapping[str, int]) -> str | None:
    """For a folder on HDFS without a manifest (a copy by hand): None when it holds at least one
    checkpoint file and none of them is empty, else why not. Sizes alone: reading a whole model
    back to open it as an archive would cost what the download costs."""
    found = {rel: size for rel, size in files.items() if step_of(posixpath.basename(rel)) is not None}
    if not found:
        return "it holds no <name>-<step>.pt file"
    for rel, size in sorted(found.items()):
        if size <= 0:
            return f"{rel} is empty"
    return None


def holds_one(files: Mapping[str, int]) -> bool:
    """Whether a folder listing has a PyTorch checkpoint file at all (which rule judges it)."""
    return any(step_of(posixpath.basename(rel)) is not None for rel in files)
