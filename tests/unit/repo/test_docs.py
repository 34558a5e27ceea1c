"""The documentation builds strict, and the README's links land on pages and anchors that exist.

mkdocs.yml makes a broken link or anchor between pages a build error; the README is not one of
the pages (it is the repository's front door), so its links into docs/ are checked here against
the built site. The build takes under a second.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.support.paths import REPO

#: A Markdown link's target: [text](target), not an image, not a web address.
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "-f",
            str(REPO / "mkdocs.yml"),
            "-d",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _page_html(site: Path, page: str) -> Path:
    """Where mkdocs (directory URLs) writes a page: index.md -> index.html, x.md -> x/index.html."""
    name = page.removesuffix(".md")
    return site / "index.html" if name == "index" else site / name / "index.html"


def test_every_page_is_built(site: Path) -> None:
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert "development.md" in pages and "jobspec.md" in pages
    assert [p for p in pages if not _page_html(site, p).is_file()] == []


def test_the_readmes_links_reach_files_and_anchors_that_exist(site: Path) -> None:
    targets = [t for t in LINK.findall((REPO / "README.md").read_text()) if "://" not in t]
    assert any(t.startswith("docs/") and "#" in t for t in targets)
    broken = []
    for target in targets:
        path, _, anchor = target.partition("#")
        if not (REPO / path).exists():
            broken.append(f"{target}: no such file")
        elif anchor:
            assert path.startswith("docs/") and path.endswith(".md"), f"{target}: an anchor outside docs/"
            html = _page_html(site, path.removeprefix("docs/")).read_text()
            if f'id="{anchor}"' not in html:
                broken.append(f"{target}: no such anchor")
    assert broken == []
