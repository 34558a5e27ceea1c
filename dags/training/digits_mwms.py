"""Train a small tf-keras classifier on scikit-learn's digits with MultiWorkerMirroredStrategy.

Runs as every worker (and the chief, if any) of a TonY job: TF_CONFIG comes
from the task executor. Uses tf-keras (Keras 2): Keras 3's ``fit`` does not
run under MultiWorkerMirroredStrategy in TensorFlow 2.21. The data ships
inside scikit-learn, so nothing is downloaded.

    --epochs N --steps-per-epoch N --batch-size N --hidden N --learning-rate F --partition S --model-dir PATH
    --input NAME --eval-input NAME

With ``--input``, the training data is the job's HDFS input of that name
(TFRecords of ``x``/``y`` examples, see ``digits_data.py``) as the executor
staged it: under ``sharding: shard`` each worker reads only its own files, so
TensorFlow's auto-sharding is turned off. ``--eval-input`` is the held-out
data every worker evaluates on. Without them the digits come from
scikit-learn, shuffled by ``--partition``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64, help="width of the hidden layer (the benchmark uses a wider one)")
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--partition", default="all", help="data partition label (e.g. a date); any text")
    p.add_argument("--model-dir", default=None, help="where the chief saves the final model")
    p.add_argument("--input", default=None, help="the job input to train on (TFRecords staged by TonY)")
    p.add_argument("--eval-input", default=None, help="the job input to evaluate on (with --input)")
    p.add_argument("--linger", type=float, default=0.0, help="seconds to stay up after training (demos)")
    return p.parse_args(argv)


def load_partition(partition: str):
    """Digits, shuffled with a seed derived from the partition label."""
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    seed = int(hashlib.sha256(partition.encode()).hexdigest()[:8], 16)
    order = np.random.default_rng(seed).permutation(len(x))
    x = (x[order] / 16.0).astype("float32")
    return x, y[order].astype("int64")


def staged_dataset(name: str):
    """The staged TFRecords of job input ``name`` as a dataset of (x, y), and the files' names."""
    import tensorflow as tf

    from airflow_provider_tony.runtime import inputs

    files = inputs.files(name)
    spec = {"x": tf.io.FixedLenFeature([64], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record):
        example = tf.io.parse_single_example(record, spec)
        return example["x"], example["y"]

    return tf.data.TFRecordDataset(files).map(parse), [os.path.basename(f) for f in files]


def _callbacks():
    """Keras callbacks, built after TensorFlow is imported (the import is slow)."""
    import tf_keras

    class Throughput(tf_keras.callbacks.Callback):
        """Steps/s of the training phase: from the first timed epoch to the end of fit(),
        checkpoint writes included (they are part of training)."""

        def __init__(self, first_timed_epoch: int) -> None:
            super().__init__()
            self.first_timed_epoch = first_timed_epoch
            self.started: float | None = None
            self.seconds = 0.0
            self.steps = 0

        def on_epoch_begin(self, epoch, logs=None):
            if epoch == self.first_timed_epoch:
                self.started = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            if self.started is not None:
                self.steps += 1

        def on_train_end(self, logs=None):
            if self.started is not None:
                self.seconds = time.perf_counter() - self.started

        def steps_per_s(self) -> float | None:
            return self.steps / self.seconds if self.seconds else None

    class SaveEachEpoch(tf_keras.callbacks.Callback):
        """A checkpoint at the end of each epoch, numbered by global step."""

        def __init__(self, manager, epoch_var, steps_per_epoch: int) -> None:
            super().__init__()
            self.manager, self.epoch_var, self.steps_per_epoch = manager, epoch_var, steps_per_epoch

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_var.assign(epoch + 1)
            self.manager.save(checkpoint_number=(epoch + 1) * self.steps_per_epoch)

    return Throughput, SaveEachEpoch


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    import tensorflow as tf
    import tf_keras

    from airflow_provider_tony.runtime import progress

    _Throughput, _SaveEachEpoch = _callbacks()

    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    cluster_hash = hashlib.sha256(json.dumps(tf_config.get("cluster", {}), sort_keys=True).encode()).hexdigest()[:12]
    task = tf_config.get("task", {"type": "worker", "index": 0})
    print(f"task {task} cluster {cluster_hash} partition {args.partition!r}", flush=True)

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    global_batch = args.batch_size * strategy.num_replicas_in_sync
    options = tf.data.Options()
    data_report: dict[str, object] = {}
    if args.input:
        # This worker's shard, staged by TonY: already split between the workers.
        train_set, names = staged_dataset(args.input)
        records = sum(1 for _ in train_set)
        train = train_set.cache().shuffle(2048, seed=1).repeat().batch(global_batch)
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
        eval_set, _ = staged_dataset(args.eval_input or args.input)
        x_eval, y_eval = (t.numpy() for t in next(iter(eval_set.batch(1 << 20))))
        data_report = {"input_files": ",".join(names), "input_records": records, "eval_records": len(y_eval)}
        print(f"training on {records} records of {args.input} ({', '.join(names)})", flush=True)
    else:
        x, y = load_partition(args.partition)
        split = int(len(x) * 0.8)
        train = (
            tf.data.Dataset.from_tensor_slices((x[:split], y[:split]))
            .shuffle(2048, seed=1)
            .repeat()
            .batch(global_batch)
        )
        options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
        x_eval, y_eval = x[split:], y[split:]
    train = train.with_options(options)

    with strategy.scope():
        model = tf_keras.Sequential(
            [
                tf_keras.layers.Input(shape=(64,)),
                tf_keras.layers.Dense(args.hidden, activation="relu"),
                tf_keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(
            optimizer=tf_keras.optimizers.SGD(learning_rate=args.learning_rate),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )
    total = args.epochs * args.steps_per_epoch
    # Checkpoints go to $TONY_CHECKPOINT_DIR (the executor uploads the chief's to
    # HDFS and restores the newest before a retry starts). Each worker writes
    # its own local copy: under MWMS every worker must take part in saving.
    epoch_var = tf.Variable(0, dtype=tf.int64)
    state = tf.train.Checkpoint(model=model, optimizer=model.optimizer, epoch=epoch_var)
    ckpt_dir = os.environ.get("TONY_CHECKPOINT_DIR")
    manager = tf.train.CheckpointManager(state, ckpt_dir, max_to_keep=2) if ckpt_dir else None
    if manager is not None and manager.latest_checkpoint:
        if os.environ.get("TONY_RESTORED_KIND") == "warm_start":
            tf.train.Checkpoint(model=model).restore(manager.latest_checkpoint).expect_partial()
            print(f"warm start: weights from {os.environ.get('TONY_RESTORED_FROM')}", flush=True)
        else:
            state.restore(manager.latest_checkpoint)
            print(f"resumed after epoch {int(epoch_var.numpy())}", flush=True)
    start_epoch = int(epoch_var.numpy())
    timer = _Throughput(first_timed_epoch=start_epoch + 1)  # the first epoch run also traces the graph
    callbacks = [timer, progress.keras_callback(every_n_steps=5, total_steps=total)]
    if manager is not None:
        callbacks.append(_SaveEachEpoch(manager, epoch_var, args.steps_per_epoch))
    if os.environ.get("TONY_TENSORBOARD_DIR"):
        callbacks.append(
            tf_keras.callbacks.TensorBoard(log_dir=os.environ["TONY_TENSORBOARD_DIR"], update_freq="epoch")
        )
    # One fit() for all epochs: a fit() per epoch would rebuild the distributed
    # iterator each time and put that cost into the measured throughput.
    model.fit(
        train,
        initial_epoch=start_epoch,
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        verbose=2,
        callbacks=callbacks,
    )
    loss, accuracy = model.evaluate(x_eval, y_eval, verbose=0)
    # A fingerprint of the trained model, to check a reloaded copy predicts the same.
    probs = model.predict(x_eval[:20], verbose=0)
    fingerprint = {
        "pred_head": ",".join(str(int(i)) for i in probs.argmax(axis=1)),
        "prob_mean": float(probs.max(axis=1).mean()),
    }
    steps_per_s = timer.steps_per_s()
    print(f"TRAIN_STEPS_PER_S={steps_per_s}", flush=True)
    progress.report(
        step=total,
        epoch=args.epochs,
        total_steps=total,
        val_loss=float(loss),
        train_steps_per_s=steps_per_s,
        val_accuracy=float(accuracy),
        cluster_hash=cluster_hash,
        partition=args.partition,
        **fingerprint,
        num_replicas=strategy.num_replicas_in_sync,
        **data_report,
    )
    print(f"val_accuracy={accuracy:.4f} val_loss={loss:.4f}", flush=True)
    is_chief = task.get("type") == "chief" or (
        task.get("type") == "worker" and task.get("index") == 0 and "chief" not in tf_config.get("cluster", {})
    )
    model_dir = args.model_dir or os.environ.get("TONY_MODEL_DIR")
    if model_dir:
        # Every worker takes part in saving under MWMS; only the chief's copy is kept.
        target = model_dir if is_chief else os.path.join(model_dir + "-workers", str(task.get("index")))
        os.makedirs(target, exist_ok=True)
        model.save(os.path.join(target, "model.keras"))
        print(f"saved model to {target}", flush=True)
    if args.linger:
        time.sleep(args.linger)  # e.g. to look at TensorBoard before the job ends
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
