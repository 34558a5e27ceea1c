"""The Layout section (docs/development.md) against the tree: every module listed, nothing listed that is gone.

A newcomer reads the Layout to find where something lives; one that misses a module (as it once
missed follower, checks, kerberos and the e2e and chaos suites) sends them to read the tree instead.
"""

from __future__ import annotations

import re

from tests.unit.support.paths import REPO

#: Where the Layout section lives: the development page, not the README.
LAYOUT_PAGE = REPO / "docs" / "development.md"
PACKAGE = REPO / "airflow_provider_tony"
#: Listed as a folder with what it holds, not module by module: the container side.
LISTED_AS_A_FOLDER = ("runtime/",)


def _layout() -> list[str]:
    page = LAYOUT_PAGE.read_text()
    block = re.search(r"^## Layout\n.*?^```\n(.*?)^```", page, flags=re.S | re.M)
    assert block, f"{LAYOUT_PAGE.relative_to(REPO)} has no Layout section with a code block"
    return block.group(1).splitlines()


def _package_entries(lines: list[str]) -> list[str]:
    """The first word of each line indented under ``airflow_provider_tony/`` (two spaces, a name)."""
    entries = []
    for line in lines[lines.index("airflow_provider_tony/") + 1 :]:
        if not line.startswith("  "):
            break
        first = line.split()[0] if line.strip() else ""
        if re.fullmatch(r"[\w/]+(\.py|/)", first):
            entries.append(first)
    return entries


def test_every_module_of_the_package_is_in_the_layout_and_every_entry_exists() -> None:
    entries = _package_entries(_layout())
    modules = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and not str(path.relative_to(PACKAGE)).startswith(LISTED_AS_A_FOLDER)
    )
    assert len(modules) > 30
    assert [m for m in modules if m not in entries] == [], "modules missing from the Layout (docs/development.md)"
    assert [e for e in entries if not (PACKAGE / e).exists()] == [], "Layout entries that are not in the tree"


def test_the_layouts_top_level_folders_exist() -> None:
    folders = [line.split()[0] for line in _layout() if line and not line.startswith(" ")]
    assert "airflow_provider_tony/" in folders and "tests/e2e" in folders
    assert [f for f in folders if not (REPO / f).exists()] == []
