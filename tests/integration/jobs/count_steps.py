"""A custom TensorFlow loop with tf.train.CheckpointManager, for the resume tests.

    count_steps.py --steps S --every C [--fail-at K --exit-code 75] [--sleep SECONDS]

Restores from $TONY_CHECKPOINT_DIR (which the executor filled from HDFS),
trains one step at a time, saves a checkpoint numbered by the step every C
steps, and on the first try (TONY_ATTEMPT=1) exits with --exit-code after
step K. Reports the step it started from and how many steps it trained.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# No Keras here: with tf.keras pointing at tf-keras (installed with the examples), importing
# TensorFlow no longer imports Keras 3, and scikit-learn through its wrappers, in every task.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--every", type=int, required=True)
    p.add_argument("--fail-at", type=int, default=-1)
    p.add_argument("--exit-code", type=int, default=75)
    p.add_argument("--sleep", type=float, default=0.05)
    args = p.parse_args()
    import tensorflow as tf

    from airflow_provider_tony.runtime import progress

    step = tf.Variable(0, dtype=tf.int64)
    w = tf.Variable(tf.zeros([4]))
    ckpt = tf.train.Checkpoint(step=step, w=w)
    manager = tf.train.CheckpointManager(ckpt, os.environ["TONY_CHECKPOINT_DIR"], max_to_keep=3)
    if manager.latest_checkpoint:
        ckpt.restore(manager.latest_checkpoint).assert_consumed()
    start = int(step.numpy())
    print(f"starting at step {start} (TONY_RESTORED_STEP={os.environ.get('TONY_RESTORED_STEP')!r})", flush=True)
    trained = 0
    first_try = os.environ.get("TONY_ATTEMPT", "1") == "1"
    while int(step.numpy()) < args.steps:
        w.assign_add(tf.ones([4]))
        step.assign_add(1)
        trained += 1
        now = int(step.numpy())
        if now % args.every == 0:
            manager.save(checkpoint_number=now)
        progress.report(step=now, total_steps=args.steps, start_step=start, trained=trained, w=float(w.numpy()[0]))
        if first_try and now == args.fail_at:
            print(f"count_steps: giving up at step {now} on purpose", file=sys.stderr, flush=True)
            return args.exit_code
        time.sleep(args.sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
