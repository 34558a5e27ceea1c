"""The source-directory packer: what goes in, reproducibility, and the errors before submit."""

from __future__ import annotations

import hashlib
import os
import tarfile
from pathlib import Path

import pytest

from airflow_provider_tony.runtime.errors import SpecError
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.yarn import source


def _tree(root: Path) -> Path:
    files = {
        "main.py": "import pkg.util\n",
        "pkg/__init__.py": "",
        "pkg/util.py": "X = 1\n",
        "conf/settings.json": "{}\n",
        ".git/HEAD": "ref\n",
        "pkg/__pycache__/util.cpython-311.pyc": "bytecode",
        "old.pyc": "bytecode",
        ".venv/bin/python": "#!",
        "data/big.bin": "x" * 4096,
        "notes/scratch.ipynb": "{}",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    return root


def _spec(root: Path, **role: object) -> JobSpec:
    return JobSpec.from_dict({"src_dir": str(root), "roles": {"worker": {"script": "main.py", **role}}})


def test_default_excludes_and_tonyignore(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / source.IGNORE_FILE).write_text("# data lives on HDFS\ndata/\nnotes/scratch.ipynb\n")
    shipped = source.scan(root).files()
    assert shipped == {"main.py", "pkg/__init__.py", "pkg/util.py", "conf/settings.json", "run.sh", source.IGNORE_FILE}


def test_archive_is_reproducible_and_keeps_modes(tmp_path: Path) -> None:
    root = _tree(tmp_path / "a")
    first = source.pack(source.scan(root), tmp_path / "one.tar.gz").read_bytes()
    for path in root.rglob("*"):  # new mtimes change nothing
        os.utime(path, (1_900_000_000, 1_900_000_000))
    second = source.pack(source.scan(root), tmp_path / "two.tar.gz").read_bytes()
    assert hashlib.sha256(first).digest() == hashlib.sha256(second).digest()
    with tarfile.open(tmp_path / "one.tar.gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["run.sh"].mode == 0o755 and members["main.py"].mode == 0o644
    assert {m.uid for m in members.values()} == {0} and {m.uname for m in members.values()} == {""}
    assert list(members) == sorted(members)


def test_digest_follows_content_not_time(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    digest = source.scan(root).digest()
    os.utime(root / "main.py", (1_900_000_000, 1_900_000_000))
    assert source.scan(root).digest() == digest
    (root / "pkg" / "util.py").write_text("X = 2\n")
    assert source.scan(root).digest() != digest
    (root / "pkg" / "util.py").write_text("X = 1\n")
    (root / "main.py").chmod(0o755)
    assert source.scan(root).digest() != digest, "the executable bit is part of the archive"


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"src_dir: '.*nope' is not a directory on this machine"):
        source.validate_source(_spec(tmp_path / "nope"))


def test_script_outside_the_tree_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path / "project")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("")
    with pytest.raises(SpecError, match=r"roles\.worker\.script: .*elsewhere\.py' is outside src_dir"):
        source.validate_source(_spec(root, script=str(outside)))


def test_script_missing_or_excluded_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with pytest.raises(SpecError, match=r"roles\.worker\.script: 'train\.py' is not in src_dir .*no such file"):
        source.validate_source(_spec(root, script="train.py"))
    (root / source.IGNORE_FILE).write_text("main.py\n")
    with pytest.raises(SpecError, match=r"'main\.py' is not in src_dir .*excluded"):
        source.validate_source(_spec(root))


def test_absolute_script_inside_the_tree_becomes_relative(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    spec = _spec(root, script=str(root / "pkg" / "util.py"))
    source.validate_source(spec)
    assert source.relative_scripts(spec).roles["worker"].script == "pkg/util.py"


def test_too_large_a_tree_names_its_biggest_entries(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    with pytest.raises(SpecError) as err:
        source.validate_source(_spec(root), limit=1024)
    text = str(err.value)
    assert text.startswith("src_dir: ")
    assert "the biggest entries are data/ (4.0 KiB)" in text, text
    assert source.IGNORE_FILE in text and "HDFS" in text


def test_hdfs_archive_needs_no_local_checks() -> None:
    spec = JobSpec.from_dict({"src_dir": "hdfs:///projects/p.tar.gz", "roles": {"worker": {"script": "main.py"}}})
    assert source.validate_source(spec) is None


@pytest.mark.parametrize(
    "value, message",
    [
        ("project", "neither an absolute path nor an hdfs:// URL"),
        ("hdfs:///projects/p", "not an archive"),
    ],
)
def test_src_dir_field_errors(value: str, message: str) -> None:
    with pytest.raises(SpecError, match=rf"^src_dir: .*{message}"):
        JobSpec.from_dict({"src_dir": value, "roles": {"worker": {"script": "main.py"}}})


def test_symlinks_are_shipped_as_links_never_followed_out_of_the_tree(tmp_path: Path) -> None:
    """A link to a folder or file outside src_dir (a home directory, keys) ships as a link: the
    files behind it are never read, packed or counted."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "id_rsa").write_text("PRIVATE KEY")
    (outside / "deep" / "data.csv").write_text("OUTSIDE-DATA," * 1000)
    root = _tree(tmp_path / "project")
    (root / "home").symlink_to(outside, target_is_directory=True)
    (root / "pkg" / "key").symlink_to(outside / "id_rsa")
    tree = source.scan(root)
    by_path = {e.path: e for e in tree.entries}
    assert (by_path["home"].kind, by_path["home"].link) == ("link", str(outside))
    assert (by_path["pkg/key"].kind, by_path["pkg/key"].link) == ("link", str(outside / "id_rsa"))
    assert not [p for p in by_path if p.startswith("home/")], sorted(by_path)
    assert tree.size == sum(e.size for e in source.scan(_tree(tmp_path / "plain")).entries)
    archive = source.pack(tree, tmp_path / "src.tar.gz")
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        packed = b"".join(tar.extractfile(m).read() for m in members.values() if m.isfile())  # type: ignore[union-attr]
    assert members["home"].issym() and members["home"].linkname == str(outside)
    assert members["pkg/key"].issym() and not [n for n in members if n.startswith("home/")]
    assert b"PRIVATE KEY" not in packed and b"OUTSIDE-DATA" not in packed


def _sized(root: Path, sizes: dict[str, int]) -> source.SourceTree:
    for rel, size in sizes.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"x" * size)
    return source.scan(root)


def test_the_size_limit_is_inclusive_and_the_message_names_sizes_exactly(tmp_path: Path) -> None:
    tree = _sized(tmp_path, {"a/one.bin": 1536, "a/two.bin": 512, "b.bin": 1024})
    source.check_size(tree, limit=tree.size)  # exactly at the limit: shipped
    with pytest.raises(SpecError) as err:
        source.check_size(tree, limit=tree.size - 1)
    assert str(err.value) == (
        f"src_dir: {str(tmp_path)!r} holds 3.0 KiB to ship, more than the 3.0 KiB a source directory may (every"
        " container unpacks it); the biggest entries are a/ (2.0 KiB), b.bin (1.0 KiB). Exclude data, checkpoints"
        f" and outputs with glob patterns in {str(tmp_path / source.IGNORE_FILE)!r} (one a line, e.g. 'data/' or"
        " '*.ckpt') and read them from HDFS instead"
    )


@pytest.mark.parametrize(
    ("size", "text"),
    [(1023, "1.0 KiB"), (1536, "1.5 KiB"), (2**20 - 1, "1024.0 KiB"), (2**20, "1.0 MiB"), (3 * 2**19, "1.5 MiB")],
)
def test_sizes_read_in_kib_below_a_mib_and_in_mib_from_one(size: int, text: str) -> None:
    assert source._human(size) == text


def test_the_biggest_entries_are_top_level_totals_largest_first_then_by_name(tmp_path: Path) -> None:
    sizes = {"d/1": 30, "d/2": 30, "c": 60, "b": 60, "a": 5, "e": 4, "f": 3, "g/h/i": 1}
    tree = _sized(tmp_path, sizes)
    assert tree.biggest() == [("b", 60), ("c", 60), ("d/", 60), ("a", 5), ("e", 4)]
    assert tree.biggest(2) == [("b", 60), ("c", 60)]


def test_the_archive_header_carries_no_time_name_or_owner(tmp_path: Path) -> None:
    """gzip's header (mtime 0, no file name, fastest level) and GNU tar members owned by nobody in
    particular: what keeps the archive's bytes, and so its content hash, the same everywhere."""
    root = _tree(tmp_path / "p")
    (root / ("long_" * 25 + ".py")).write_text("x = 1\n")  # > 100 characters: GNU's long-name record
    raw = source.pack(source.scan(root), tmp_path / "src.tar.gz").read_bytes()
    assert raw[:4] == b"\x1f\x8b\x08\x00", "gzip, deflate, no FNAME flag"
    assert raw[4:8] == b"\x00\x00\x00\x00" and raw[8] == 4, "mtime 0, XFL 4 (compresslevel 1)"
    import gzip

    tar_bytes = gzip.decompress(raw)
    assert b"././@LongLink" in tar_bytes and b"PaxHeader" not in tar_bytes, "GNU format, not PAX"
    with tarfile.open(tmp_path / "src.tar.gz") as tar:
        members = tar.getmembers()
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, "", "")}
    assert {m.mtime for m in members} == {1577836800}


def test_relative_scripts_leaves_hdfs_trees_outside_scripts_and_relative_ones_alone(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    hdfs = JobSpec.from_dict({"src_dir": "hdfs:///p.tar.gz", "roles": {"worker": {"script": "/abs/main.py"}}})
    assert source.relative_scripts(hdfs) is hdfs
    outside = _spec(root, script=str(tmp_path / "elsewhere.py"))
    assert source.relative_scripts(outside).roles["worker"].script == str(tmp_path / "elsewhere.py")
    assert source.relative_scripts(_spec(root)).roles["worker"].script == "main.py"


def test_paths_beside_a_job_file(tmp_path: Path) -> None:
    """The one rule `tony submit` and `job="x.yaml"` share, case by case."""
    (tmp_path / "train.py").write_text("")
    (tmp_path / "shipped.py").write_text("")  # beside the file too, but named in files: shipped as is
    beside = str((tmp_path / "train.py").resolve())
    f = source.paths_beside_job_file
    assert f(["a"], tmp_path) == ["a"] and f(None, tmp_path) is None
    assert f({"src_dir": "proj", "roles": {"w": {"script": "train.py"}}}, tmp_path) == {
        "src_dir": str((tmp_path / "proj").resolve()),
        "roles": {"w": {"script": "train.py"}},  # with a src_dir, scripts stay relative to it
    }
    for fixed in ("/abs/proj", "hdfs:///p.tar.gz"):
        assert f({"src_dir": fixed, "roles": {}}, tmp_path) == {"src_dir": fixed, "roles": {}}
    job = {
        "files": {"shipped.py": "/x/shipped.py"},
        "roles": {
            "a": {"script": "train.py", "memory": 1},
            "b": {"script": "missing.py"},
            "c": {"script": "/abs/train.py"},
            "d": {"script": "shipped.py"},
            "e": {"module": "pkg.main"},
            "f": "not a mapping",
        },
    }
    assert f(job, tmp_path)["roles"] == {
        "a": {"script": beside, "memory": 1},
        "b": {"script": "missing.py"},
        "c": {"script": "/abs/train.py"},
        "d": {"script": "shipped.py"},
        "e": {"module": "pkg.main"},
        "f": "not a mapping",
    }
    assert job["roles"]["a"]["script"] == "train.py", "the caller's dict is not changed"
    assert (
        f({"files": ["train.py"], "roles": {"a": {"script": "train.py"}}}, tmp_path)["roles"]["a"]["script"] == beside
    )
    assert f({"roles": "x"}, tmp_path) == {"roles": "x"}


@pytest.mark.parametrize(
    ("rel", "is_dir", "patterns", "excluded"),
    [
        ("a/b/old.pyc", False, ["*.pyc"], True),  # a name pattern matches at any depth
        ("a/b/old.pyc", False, ["old.pyc"], True),
        ("a/data", False, ["data/"], False),  # a trailing / matches folders only
        ("a/data", True, ["data/"], True),
        ("conf/settings.json", False, ["conf/settings.json"], True),  # a path pattern matches the path
        ("x/conf/settings.json", False, ["conf/settings.json"], False),
        ("conf/settings.json", False, ["settings.json"], True),
        ("a/b/c.txt", False, ["b/c.txt"], False),
        ("notes", True, ["/notes/"], True),
    ],
)
def test_ignore_patterns(rel: str, is_dir: bool, patterns: list[str], excluded: bool) -> None:
    assert source._excluded(rel, is_dir, patterns) is excluded


def test_tonyignore_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    (tmp_path / source.IGNORE_FILE).write_text("# a comment\n\n   \n*.log\n  data/  \n")
    assert source._patterns(tmp_path)[-2:] == ["*.log", "data/"]
    assert "# a comment" not in source._patterns(tmp_path) and "" not in source._patterns(tmp_path)


def test_entries_say_what_is_executable(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "link.sh").symlink_to("run.sh")
    kinds = {e.path: (e.kind, e.executable) for e in source.scan(root).entries}
    assert kinds["pkg"] == ("dir", True) and kinds["run.sh"] == ("file", True)
    assert kinds["main.py"] == ("file", False) and kinds["link.sh"] == ("link", False)


def test_a_file_named_like_an_excluded_folder_is_shipped(tmp_path: Path) -> None:
    (tmp_path / source.IGNORE_FILE).write_text("data/\n")
    (tmp_path / "data").write_text("a file, not the data folder")
    assert "data" in source.scan(tmp_path).files()


def test_script_errors_say_exactly_why(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    (root / "scratch.py").write_text("")
    (root / source.IGNORE_FILE).write_text("scratch.py\n")
    spec = JobSpec.from_dict(
        {"src_dir": str(root), "roles": {"ok": {"script": "main.py"}, "worker": {"script": "scratch.py"}}}
    )
    with pytest.raises(SpecError) as err:
        source.validate_source(spec)
    assert str(err.value) == (
        f"roles.worker.script: 'scratch.py' is not in src_dir {str(root)!r} (it exists but is excluded (the"
        f" defaults or {source.IGNORE_FILE})); give the script's path relative to src_dir, like 'trainer/main.py'"
    )
    spec = JobSpec.from_dict(
        {"src_dir": str(root), "roles": {"ps": {"command": ["true"]}, "worker": {"script": "nope.py"}}}
    )
    with pytest.raises(SpecError, match=r"'nope.py' is not in src_dir .* \(no such file\)"):
        source.validate_source(spec)
    outside = str(tmp_path / "elsewhere.py")
    spec = JobSpec.from_dict({"src_dir": str(root), "roles": {"worker": {"script": outside}}})
    with pytest.raises(SpecError) as err:
        source.validate_source(spec)
    assert str(err.value) == (
        f"roles.worker.script: {outside!r} is outside src_dir {str(root)!r}; roles run from the source tree: move"
        " the script into it, or give its path relative to src_dir"
    )
    with pytest.raises(SpecError) as err:
        source.scan(tmp_path / "nope")
    assert str(err.value).endswith(
        "is not a directory on this machine; fix the path (a relative src_dir is read from the JobSpec YAML's or"
        " the DAG file's folder)"
    )


def test_the_digest_reads_big_files_whole(tmp_path: Path) -> None:
    (tmp_path / "big.bin").write_bytes(b"a" * (1 << 20) + b"b" * 10)
    one = source.scan(tmp_path).digest()
    (tmp_path / "big.bin").write_bytes(b"a" * (1 << 20) + b"c" * 10)  # differs past the first MiB
    assert source.scan(tmp_path).digest() != one


def test_every_role_script_is_checked_not_only_the_first(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p")
    for first in ({"command": ["true"]}, {"script": "main.py"}):
        spec = JobSpec.from_dict({"src_dir": str(root), "roles": {"worker": first, "ps": {"script": "nope.py"}}})
        with pytest.raises(SpecError, match=r"^roles\.ps\.script: 'nope.py' is not in src_dir"):
            source.validate_source(spec)
