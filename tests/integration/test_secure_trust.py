"""Another principal's application with our tags, on the Kerberized profile (issue 27, point 2).

YARN authenticates who submits there: the second principal can put our task
run's tags on its own application, but not our user on it. ``find_by_tags``
(the operator's re-attach and re-use) must see only our own.
"""

from __future__ import annotations

from tests.integration._secure import MARKS, job

pytestmark = MARKS


def test_another_principals_succeeded_application_with_our_tags_is_not_ours(krb, other, tag) -> None:
    identity = [tag, "tony-dag:d", "tony-task:t", "tony-run:r"]
    squat = other.submit(job("pytest-secure-squat", "behave.py", "ok"), extra_tags=identity)
    done = other.wait(squat, poll_interval=0.5, emit=lambda _: None)
    assert done.succeeded, done.diagnostics
    assert [a.app_id for a in other.find_by_tags(identity, active_only=False)] == [squat], "the tags do match"
    assert krb.find_by_tags(identity, active_only=False) == []
    assert other.yarn_user != krb.yarn_user
