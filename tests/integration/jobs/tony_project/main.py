"""A training script written for TonY, run unchanged: it imports a sibling module and
builds its TensorFlow cluster from TonY's ``CLUSTER_SPEC``/``JOB_NAME``/``TASK_INDEX``.

    main.py [--steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import digits_setup


def tf_config_from_tony() -> dict:
    """What TonY's own examples do: the cluster from CLUSTER_SPEC, this task from JOB_NAME/TASK_INDEX."""
    cluster = json.loads(os.environ["CLUSTER_SPEC"])
    cluster = {role: hosts for role, hosts in cluster.items() if role in ("chief", "worker", "ps")}
    return {"cluster": cluster, "task": {"type": os.environ["JOB_NAME"], "index": int(os.environ["TASK_INDEX"])}}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=5)
    args = p.parse_args()
    os.environ["TF_CONFIG"] = json.dumps(tf_config_from_tony())
    import tensorflow as tf

    from airflow_provider_tony.runtime import progress

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = digits_setup.build_model()
    history = model.fit(
        digits_setup.dataset(16 * strategy.num_replicas_in_sync), epochs=1, steps_per_epoch=args.steps, verbose=2
    )
    progress.report(
        step=args.steps,
        loss=float(history.history["loss"][-1]),
        num_replicas=strategy.num_replicas_in_sync,
        job_name=os.environ["JOB_NAME"],
        task_index=os.environ["TASK_INDEX"],
        task_num=os.environ["TASK_NUM"],
        is_chief=os.environ.get("IS_CHIEF", ""),
        sys_path0=sys.path[0],
        cwd=os.getcwd(),
        greeting=os.environ.get("GREETING", ""),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
