"""``make test``'s closing lines: how many tests each part ran (``tests/conftest.py`` writes the counts).

python -m tests._summary open secure chaos
"""

from __future__ import annotations

import json
import sys

from tests.conftest import PARTS_DIR


def line(part: str) -> str:
    path = PARTS_DIR / f"{part}.json"
    if not path.exists():
        return f"  {part:<7} no result: its pytest did not run to the end (cluster start-up failed?)"
    c = json.loads(path.read_text())
    ran = c["passed"] + c["failed"]
    return (
        f"  {part:<7} {ran} ran: {c['passed']} passed, {c['failed']} failed, {c['error']} errors,"
        f" {c['skipped']} skipped (pytest exit {c['exit_status']})"
    )


def main(parts: list[str]) -> int:
    print("tests per part of make test:")
    for part in parts:
        print(line(part))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
