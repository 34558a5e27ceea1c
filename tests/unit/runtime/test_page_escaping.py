"""The job page's escaping of what a task wrote: markup escaped, control characters shown, text kept.

``_e`` is the one function every task-written value goes through on the page
(``test_trust_messages`` renders a hostile document through the whole page);
here its exact output: printable text (any script) unchanged, newlines and tabs
kept for ``<pre>`` blocks, other control characters as Python escapes.
"""

from __future__ import annotations

import pytest

from airflow_provider_tony.runtime.page import _e


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("loss", "loss"),
        ("précision 0.9 ✓", "précision 0.9 ✓"),  # printable beyond ASCII is text, not escapes
        ("line1\nline2\tcol", "line1\nline2\tcol"),
        ("red\x1b[31m bell\x07", "red\\x1b[31m bell\\x07"),
        ("é\x1b", "é\\x1b"),
        ("<b>x</b> & 'q'", "&lt;b&gt;x&lt;/b&gt; &amp; &#x27;q&#x27;"),
        (None, ""),
        (3.5, "3.5"),
    ],
)
def test_a_task_written_value_is_shown_exactly(written: object, shown: str) -> None:
    assert _e(written) == shown
