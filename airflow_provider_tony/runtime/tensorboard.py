"""The ``tensorboard`` role: serve the chief's event files, pulled from HDFS while the job runs.

Declare it as ``tensorboard: {module: airflow_provider_tony.runtime.tensorboard}``;
it listens on the port its executor reserved (``$TONY_PORT``), which the AM
state and the operator's "TensorBoard" link point at. Needs the
``tensorboard`` package in the job's Python environment.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import hdfs_io
from airflow_provider_tony.runtime.checkpoint import DirSync, tensorboard_remote
from airflow_provider_tony.runtime.transport import decode_spec


def main() -> int:
    spec = decode_spec(os.environ[C.ENV_JOB_SPEC])
    logdir = Path(os.environ[C.ENV_TENSORBOARD_DIR])
    logdir.mkdir(parents=True, exist_ok=True)
    client = hdfs_io.client_from_env()
    if client is not None and spec.checkpoint.dir:
        DirSync(client, logdir, tensorboard_remote(spec.checkpoint.dir), interval=5.0, push=False).start()
    from tensorboard import program

    board = program.TensorBoard()
    board.configure(
        argv=[None, "--logdir", str(logdir), "--port", os.environ[C.ENV_PORT], "--bind_all", "--reload_interval", "5"]
    )
    print(f"TensorBoard serving {logdir} on port {os.environ[C.ENV_PORT]}", flush=True)
    board.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
