"""Which staging folders (``~/.skein/<app>``) ``tony gc`` removes: the pure selection of ``yarn/staging.py``."""

from __future__ import annotations

import pytest

from airflow_provider_tony.yarn import staging
from airflow_provider_tony.yarn.staging import Folder

NOW = 1_800_000_000.0
DAY = 86400.0


def test_only_ended_applications_folders_go_and_unknown_ones_only_when_old() -> None:
    folders = [
        Folder("application_1_0001", True, NOW - 1),  # finished
        Folder("application_1_0002", True, NOW - 90 * DAY),  # running for months: stays
        Folder("application_1_0003", True, NOW - 1),  # failed
        Folder("application_1_0004", True, NOW - 1),  # killed
        Folder("application_1_0005", True, NOW - 40 * DAY),  # the RM forgot it, old
        Folder("application_1_0006", True, NOW - 2 * DAY),  # the RM forgot it, recent: stays
        Folder("application_1_0007", True, NOW - 90 * DAY),  # accepted, waiting: stays
        Folder("skein.crt", False, NOW - 90 * DAY),  # not an application's folder
        Folder("application_1_0008", False, NOW - 90 * DAY),  # a file, not a folder
        Folder("application_1_0009.bak", True, NOW - 90 * DAY),
        Folder("notes", True, NOW - 90 * DAY),
    ]
    states = {
        "application_1_0001": "FINISHED",
        "application_1_0002": "RUNNING",
        "application_1_0003": "FAILED",
        "application_1_0004": "KILLED",
        "application_1_0007": "ACCEPTED",
        "application_1_0008": "FINISHED",
        "application_1_0009.bak": "FINISHED",
    }
    chosen = staging.select(folders, states, now=NOW, max_age_s=30 * DAY)
    assert [name for name, _ in chosen] == [
        "application_1_0001",
        "application_1_0003",
        "application_1_0004",
        "application_1_0005",
    ]
    assert dict(chosen)["application_1_0003"] == "the application is failed"
    assert "no longer knows it and it is older than 30 days" in dict(chosen)["application_1_0005"]
    # Without an age, a folder the RM does not know stays: it may be one the RM has not recovered yet.
    no_age = staging.select(folders, states, now=NOW, max_age_s=None)
    assert [name for name, _ in no_age] == ["application_1_0001", "application_1_0003", "application_1_0004"]


@pytest.mark.parametrize("bad", ["..", "../..", "application_1_0001/../..", "application_1", "", "/tmp", "app"])
def test_a_staging_folder_is_built_only_from_an_application_id(bad: str) -> None:
    with pytest.raises(ValueError, match="not a YARN application id"):
        staging.staging_folder(bad)
    assert staging.staging_folder("application_1796_0042") == ".skein/application_1796_0042"


def test_listing_entries_become_folders_with_their_times() -> None:
    listing = [
        ("application_1_0001", {"type": "DIRECTORY", "modificationTime": 1_800_000_000_500}),
        ("x", {"type": "FILE"}),
    ]
    assert staging.folders_of(listing) == [
        Folder("application_1_0001", True, 1_800_000_000.5),
        Folder("x", False, 0.0),
    ]
