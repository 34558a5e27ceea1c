"""The e2e suite's helpers that a test module uses as well as its conftest: the stack's home, the README's
admin login."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path


def stack_home() -> Path:
    """Where the e2e stack lives (``airflow_stack.py``'s home under the session's cluster home): its
    logs, pid files and passwords. Every stack of a session appends to the same logs."""
    return Path(os.environ["TONY_DEVCLUSTER_HOME"]) / "airflow-stack"


def admin_login(url: str, home: Path) -> tuple[str, str]:
    """The README's login: user ``admin``, the password from the stack's ``passwords.json``; (password, API token)."""
    password = json.loads((home / "passwords.json").read_text())["admin"]
    req = urllib.request.Request(
        f"{url}/auth/token",
        data=json.dumps({"username": "admin", "password": password}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return password, json.load(resp)["access_token"]
