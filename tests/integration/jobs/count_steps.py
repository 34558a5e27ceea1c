"""A custom TensorFlow loop with tf.train.CheckpointManager, for the resume tests.

    count_steps.py --steps S --every C [--fail-at K --exit-code 75] [--sleep SECONDS] [--plain]

Restores from $TONY_CHECKPOINT_DIR (which the executor filled from HDFS),
trains one step at a time, saves a checkpoint numbered by the step every C
steps, and on the first try (TONY_ATTEMPT=1) exits with --exit-code after
step K. Reports the step it started from and how many steps it trained.

``--plain`` counts the same way without TensorFlow: it writes the on-disk layout
TensorFlow's CheckpointManager writes (a ``checkpoint`` state file naming the
latest ``ckpt-N``, its ``.index`` and one ``.data-00000-of-00001`` shard), which is
all the executor reads, uploads and restores. For the tests about orchestration
(node loss, daemon restarts, failover, tokens, preemption), where a TensorFlow
start-up in every task costs CPU and proves nothing more; the resume tests keep
real TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# No Keras here: with tf.keras pointing at tf-keras (installed with the examples), importing
# TensorFlow no longer imports Keras 3, and scikit-learn through its wrappers, in every task.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

#: TensorFlow refuses an ``.index`` shorter than an SSTable footer, and so does the executor's check.
INDEX_BYTES = 64


class TFCounter:
    """The counter and a weight vector in a real tf.train.Checkpoint."""

    def __init__(self, directory: str) -> None:
        import tensorflow as tf

        self.tf = tf
        self.step = tf.Variable(0, dtype=tf.int64)
        self.w = tf.Variable(tf.zeros([4]))
        ckpt = tf.train.Checkpoint(step=self.step, w=self.w)
        self.manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=3)
        if self.manager.latest_checkpoint:
            ckpt.restore(self.manager.latest_checkpoint).assert_consumed()

    def now(self) -> int:
        return int(self.step.numpy())

    def advance(self) -> float:
        self.w.assign_add(self.tf.ones([4]))
        self.step.assign_add(1)
        return float(self.w.numpy()[0])

    def save(self, step: int) -> None:
        self.manager.save(checkpoint_number=step)


class PlainCounter:
    """The same counter in TensorFlow's checkpoint file layout, written with plain Python."""

    def __init__(self, directory: str) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.step, self.w, self.kept = 0, 0.0, []
        state = self.dir / "checkpoint"
        if state.is_file():
            lines = state.read_text().splitlines()
            prefix = lines[0].split('"')[1]
            self.kept = [line.split('"')[1] for line in lines[1:]]
            saved = json.loads((self.dir / f"{prefix}.data-00000-of-00001").read_text())
            self.step, self.w = saved["step"], saved["w"]

    def now(self) -> int:
        return self.step

    def advance(self) -> float:
        self.step, self.w = self.step + 1, self.w + 1.0
        return self.w

    def save(self, step: int) -> None:
        prefix = f"ckpt-{step}"
        (self.dir / f"{prefix}.data-00000-of-00001").write_text(json.dumps({"step": self.step, "w": self.w}))
        (self.dir / f"{prefix}.index").write_text("plain count_steps checkpoint".ljust(INDEX_BYTES))
        self.kept = [*self.kept, prefix]
        for old in self.kept[:-3]:  # max_to_keep=3, as the TensorFlow counter keeps
            for path in self.dir.glob(f"{old}.*"):
                path.unlink()
        self.kept = self.kept[-3:]
        lines = [f'model_checkpoint_path: "{prefix}"', *(f'all_model_checkpoint_paths: "{p}"' for p in self.kept)]
        tmp = self.dir / "checkpoint.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(self.dir / "checkpoint")  # the state file last, by rename, as TensorFlow does


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--every", type=int, required=True)
    p.add_argument("--fail-at", type=int, default=-1)
    p.add_argument("--exit-code", type=int, default=75)
    p.add_argument("--sleep", type=float, default=0.05)
    p.add_argument("--plain", action="store_true", help="no TensorFlow: the same files, written by Python")
    args = p.parse_args()

    from airflow_provider_tony.runtime import progress

    directory = os.environ["TONY_CHECKPOINT_DIR"]
    counter = PlainCounter(directory) if args.plain else TFCounter(directory)
    start = counter.now()
    print(f"starting at step {start} (TONY_RESTORED_STEP={os.environ.get('TONY_RESTORED_STEP')!r})", flush=True)
    trained = 0
    first_try = os.environ.get("TONY_ATTEMPT", "1") == "1"
    while counter.now() < args.steps:
        w = counter.advance()
        trained += 1
        now = counter.now()
        if now % args.every == 0:
            counter.save(now)
        progress.report(step=now, total_steps=args.steps, start_step=start, trained=trained, w=w)
        if first_try and now == args.fail_at:
            print(f"count_steps: giving up at step {now} on purpose", file=sys.stderr, flush=True)
            return args.exit_code
        time.sleep(args.sleep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
