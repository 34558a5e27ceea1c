"""How the JobSpec travels to containers: base64 JSON in one environment variable.

YARN writes container environment into a generated shell script without
escaping quotes, so raw JSON arrives mangled; base64 has no characters a
shell cares about.
"""

from __future__ import annotations

import base64

from airflow_provider_tony.runtime.spec import JobSpec


def encode_spec(spec: JobSpec) -> str:
    return base64.b64encode(spec.to_json(indent=None).encode()).decode("ascii")


def decode_spec(value: str) -> JobSpec:
    return JobSpec.from_json(base64.b64decode(value.encode("ascii")).decode())
