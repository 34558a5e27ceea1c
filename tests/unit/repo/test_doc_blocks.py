"""Every shell block of the README and the docs is run by a named test, or says it is an example.

Issue 39: every command of the README's quick start and of the docs' walk-throughs runs in a test
as written. A new ```bash block therefore needs one of two things: an entry in ``WALKTHROUGHS``
naming the tests that run it (``tests/_docs.py`` reads the block for them), or the line
``<!-- example: not run -->`` above it on the page, for a block that only illustrates (a user's own
paths, a template). A block with no language tag fails too (nobody can tell whether it is shell), unless it is one of
the listings named in ``UNTAGGED_LISTINGS``.
A command of a registered block that no test runs yet is listed in ``NOT_RUN`` with the reason,
so the gap is written down where the check reads it, not forgotten.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests._docs import REPO, Block, blocks, commands, pages, shell_block

EXAMPLE_FIX = "<!-- example: not run -->"


@dataclass(frozen=True)
class Walkthrough:
    """The tests that run a block's commands (pytest node ids, or a CI script that runs the line)."""

    tests: tuple[str, ...]
    #: Commands of the block that no test runs (as the page writes them, less a trailing comment), and why.
    not_run: dict[str, str] = field(default_factory=dict)


#: (page, heading) -> who runs the one shell block under that heading.
WALKTHROUGHS: dict[tuple[str, str], Walkthrough] = {
    ("README.md", "Quick start"): Walkthrough(
        # CI's script ends with the README's `make test`; `make demo` runs as written in a test.
        tests=(".ci/run", "tests/integration/test_doc_walkthroughs.py::test_make_demo_as_written"),
    ),
    ("README.md", "Installing"): Walkthrough(
        tests=("tests/integration/test_doc_walkthroughs.py::test_install_then_validate",),
    ),
    ("docs/index.md", "Installing"): Walkthrough(
        tests=("tests/integration/test_doc_walkthroughs.py::test_install_then_validate",),
    ),
    ("README.md", "Trying it in the Airflow UI"): Walkthrough(
        tests=("tests/e2e/test_readme_commands.py::test_readme_airflow_ui_commands_work_as_written",),
    ),
    ("docs/cli.md", "Running a job without Airflow"): Walkthrough(
        tests=("tests/integration/test_doc_walkthroughs.py::test_cli_submit_of_the_example_job",),
    ),
    ("docs/devcluster.md", "The local cluster (`devcluster/`)"): Walkthrough(
        tests=("tests/integration/test_doc_walkthroughs.py::test_a_three_nodemanager_cluster_beside_the_default_one",),
    ),
    ("docs/quality-gate.md", "Quality gate"): Walkthrough(
        tests=(
            # The set-up lines as written; the two `airflow dags test` lines run in the nightly test.
            "tests/integration/test_doc_walkthroughs.py::test_quality_gate_setup_lines",
            "tests/integration/test_airflow.py::test_nightly_retrain_publishes_a_model_and_its_gate_refuses_a_worse_one",
        ),
    ),
}


#: Untagged blocks that are listings, not commands: (page, heading). The Layout's tree stays
#: untagged because tests/unit/test_layout.py reads it by its bare fence.
UNTAGGED_LISTINGS = {("docs/development.md", "Layout")}


def all_blocks() -> list[Block]:
    return [b for page in pages() for b in blocks(page)]


def _test_exists(node: str) -> bool:
    """``path::function`` names a function of that module (read, not imported); a plain path, a file."""
    path, _, name = node.partition("::")
    source = REPO / path
    if not source.is_file():
        return False
    if not name:
        return True
    tree = ast.parse(source.read_text())
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in tree.body)


def test_every_fenced_block_names_its_language() -> None:
    untagged = [b.where() for b in all_blocks() if not b.language and (b.page, b.heading) not in UNTAGGED_LISTINGS]
    listed = {(b.page, b.heading) for b in all_blocks() if not b.language}
    assert UNTAGGED_LISTINGS <= listed, f"UNTAGGED_LISTINGS names blocks that are gone: {UNTAGGED_LISTINGS - listed}"
    assert not untagged, (
        f"fenced blocks without a language: {untagged}. Tag each: ```bash for commands (then register or "
        "mark it, see this module), ```text for a listing or output"
    )


def test_every_shell_block_is_run_by_a_test_or_marked_as_an_example() -> None:
    unclaimed = [
        b.where() for b in all_blocks() if b.shell and not b.example and (b.page, b.heading) not in WALKTHROUGHS
    ]
    assert not unclaimed, (
        f"shell blocks no test runs: {unclaimed}. Either add a test that runs the block as written (read it "
        "with tests._docs.block_commands) and name it in WALKTHROUGHS in tests/unit/repo/test_doc_blocks.py, "
        f"or, for a block that only illustrates, put the line {EXAMPLE_FIX} above it on the page"
    )


@pytest.mark.parametrize("where", sorted(WALKTHROUGHS), ids=lambda w: f"{w[0]}#{w[1]}")
def test_each_registered_walkthrough_is_on_its_page_and_its_tests_exist(where: tuple[str, str]) -> None:
    page, heading = where
    block = shell_block(page, heading)  # fails naming the page's shell blocks when it moved
    assert not block.example, f"{block.where()} is registered as a walk-through but marked {EXAMPLE_FIX}"
    under = [b for b in blocks(page) if b.shell and b.heading == heading]
    assert len(under) == 1, f"{page} has {len(under)} shell blocks under '{heading}': the registry names one"
    walkthrough = WALKTHROUGHS[where]
    missing = [t for t in walkthrough.tests if not _test_exists(t)]
    assert walkthrough.tests and not missing, f"{block.where()}: the tests named to run it are gone: {missing}"
    modules = {t.partition("::")[0] for t in walkthrough.tests if "::" in t}
    unread = [m for m in modules if page not in (REPO / m).read_text()]
    assert not unread, f"{block.where()}: {unread} never name {page}: a walk-through test reads its block from the page"
    lines = [line.split(" #")[0].strip() for line in commands(block.text)]
    stale = [line for line in walkthrough.not_run if line not in lines]
    assert not stale, f"{block.where()}: NOT_RUN names lines the block no longer has: {stale}; its lines: {lines}"


def test_ci_runs_the_readmes_test_command_as_written() -> None:
    """``make test`` of the quick start is what CI runs: the script's own line, unchanged."""
    quick = commands(shell_block("README.md", "Quick start").text)
    make_test = [line for line in quick if line.split("#")[0].split() == ["make", "test"]]
    assert make_test, quick
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert "make test" in ci, "the README's quick start says `make test`; .ci/run must run exactly that"


def test_the_reader_finds_blocks_headings_and_marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader itself: the heading a block sits under, a continued line kept whole, the example mark."""
    import tests._docs as docs

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(
        "# Page\n\n## First\n\n```bash\n# a comment\nmake x   # trailing\n\na \\\n  b\n```\n\n"
        f"## Second\n\n{EXAMPLE_FIX}\n```sh\nrun me not\n```\n\n```\nuntagged\n```\n"
    )
    monkeypatch.setattr(docs, "REPO", tmp_path)
    first, second, third = docs.blocks("docs/page.md")
    assert (first.heading, first.line, first.language, first.example) == ("First", 5, "bash", False)
    assert docs.commands(first.text) == ["make x   # trailing", "a \\\n  b"]
    assert (second.heading, second.language, second.example, second.shell) == ("Second", "sh", True, True)
    assert (third.language, third.shell, third.text) == ("", False, "untagged\n")
    assert docs.move_ports("BASE=19700 http://127.0.0.1:19380/ 2026-01-02", 23000) == (
        "BASE=23700 http://127.0.0.1:23380/ 2026-01-02"
    )
