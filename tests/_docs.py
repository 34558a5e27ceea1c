"""The shell blocks of the README and the docs' pages, read the way a user reads them.

The walk-through tests run a page's commands as the page writes them (one bash process per block,
in the checkout), so a page that drifts from what works fails a test instead of a user. This
module is their one reader: it finds the fenced blocks of a page, the heading each sits under and
whether the page marks it as an example that is not run; ``block_commands`` gives one block's
command lines. No test module imports another: the README test and the docs' tests share this.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The languages a user pastes into a shell.
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
#: Written on the line above a shell block that only illustrates (hypothetical paths, a user's own
#: files): the block is not a walk-through and no test runs it.
EXAMPLE_MARK = "<!-- example: not run -->"
#: devcluster's default port base: the ports the pages name are this base plus an offset.
DEFAULT_PORT_BASE = 19000
#: The ports under the default base that the pages name (the open cluster and the Airflow stack,
#: the profiles beside it: up to base + 1999).
_DEFAULT_PORT = re.compile(r"\b(19\d{3}|20\d{3})\b")
_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it is, what it says it is, and its text."""

    page: str  # relative to the repository: README.md, docs/cli.md
    heading: str  # the nearest heading above it, without its #s
    line: int  # the opening fence's line number (1-based)
    language: str  # the fence's tag; "" when it has none
    text: str
    example: bool  # EXAMPLE_MARK stands on the line above it

    @property
    def shell(self) -> bool:
        return self.language in SHELL_LANGUAGES

    def where(self) -> str:
        return f"{self.page}:{self.line} (under '{self.heading}')"


def pages() -> list[str]:
    """The README and every page of the docs site, relative to the repository."""
    return ["README.md", *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md"))]


def blocks(page: str) -> list[Block]:
    """Every fenced block of ``page`` (a path relative to the repository), in order."""
    lines = (REPO / page).read_text().splitlines()
    found: list[Block] = []
    heading = ""
    opened: tuple[int, str] | None = None  # (line, language) of the block being read
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        fence = _FENCE.match(line)
        if opened is None:
            if fence:
                opened, body = (number, fence.group(2)), []
            elif title := _HEADING.match(line):
                heading = title.group(1)
            continue
        if fence and not fence.group(2):
            start, language = opened
            example = start >= 2 and lines[start - 2].strip() == EXAMPLE_MARK
            found.append(Block(page, heading, start, language, "\n".join(body) + "\n", example))
            opened = None
        else:
            body.append(line)
    assert opened is None, f"{page}:{opened[0]}: a fenced block that is never closed"
    return found


def shell_block(page: str, heading: str, index: int = 0) -> Block:
    """The ``index``-th shell block under ``heading`` on ``page``; fails naming what the page has."""
    under = [b for b in blocks(page) if b.shell and b.heading == heading]
    assert len(under) > index, (
        f"{page} has no shell block #{index} under '{heading}'; its shell blocks: "
        f"{[b.where() for b in blocks(page) if b.shell]}"
    )
    return under[index]


def commands(text: str) -> list[str]:
    """A block's command lines as bash reads them: comments and blank lines left out, a line that
    ends in a backslash joined with the next (the backslash and newline kept, as bash takes them)."""
    joined: list[str] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line
        if line.endswith("\\"):
            pending += "\n"
            continue
        joined.append(pending)
        pending = ""
    assert not pending, f"the block ends inside a continued line: {pending!r}"
    return joined


def block_commands(page: str, heading: str, index: int = 0) -> list[str]:
    """The command lines of the ``index``-th shell block under ``heading`` on ``page``."""
    return commands(shell_block(page, heading, index).text)


def session_port_base() -> int:
    return int(os.environ.get("TONY_DEVCLUSTER_PORT_BASE", DEFAULT_PORT_BASE))


def move_ports(line: str, base: int | None = None) -> str:
    """``line`` with every port the page names under the default base moved to ``base`` (this
    session's, by default): the pages name devcluster's defaults, the tests run beside other
    checkouts on a port base of their own."""
    shift = (session_port_base() if base is None else base) - DEFAULT_PORT_BASE
    return _DEFAULT_PORT.sub(lambda m: str(int(m.group(1)) + shift), line)
