"""Real distributed TensorFlow training that survives a lost node, one mode per strategy users run.

    --mode mwms-loop   MultiWorkerMirroredStrategy, a custom loop: every step all-reduces gradients
    --mode keras-fit   MultiWorkerMirroredStrategy, tf-keras ``fit`` with ``BackupAndRestore``
    --mode ps          ParameterServerStrategy: the chief drives a ClusterCoordinator, workers/ps serve
    --steps N --every N --sleep S [--hog-task worker:1 --hog-mib M --hog-step S]

Each mode saves a checkpoint every ``--every`` steps under ``$TONY_CHECKPOINT_DIR``
(the executor uploads the decider's to HDFS and restores the newest before a
restarted gang starts), resumes from it, and reports the global step as it
goes; the first report after a start carries ``start_step`` (where this gang
resumed). ``--sleep`` paces the steps so a test can lose a node mid-training.
``--hog-task`` (mwms-loop) makes that task take ``--hog-mib`` more resident memory
at step ``--hog-step`` and train on, for the memory-kill tests. The data is drawn
by numpy from a fixed seed: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def digits():  # type: ignore[no-untyped-def]
    """1,797 samples of 64 features in [0, 1] and 10 learnable classes: the shape of scikit-learn's
    digits, drawn by numpy from a fixed seed (every worker gets the same data).

    Not scikit-learn itself: its import cost each worker about 1.5 CPU-s at every start and
    restart, time a lost node's recovery was charged for although no provider code runs in it.
    """
    import numpy as np

    rng = np.random.default_rng(1797)
    y = rng.integers(0, 10, 1797)
    x = np.clip(rng.random((10, 64))[y] + rng.normal(0.0, 0.2, (1797, 64)), 0.0, 1.0)
    return x.astype("float32"), y.astype(np.int64)


def is_chief(tf_config: dict) -> bool:  # type: ignore[type-arg]
    task = tf_config.get("task", {})
    if "chief" in tf_config.get("cluster", {}):
        return task.get("type") == "chief"
    return task.get("type") == "worker" and task.get("index") == 0


def publish(tf_config: dict, state: object) -> None:  # type: ignore[type-arg]
    """The trained weights to ``$TONY_MODEL_DIR`` (the executor publishes the chief's to HDFS).

    Every worker writes (under MWMS writing is collective); only the chief's copy is kept.
    """
    model_dir = os.environ.get("TONY_MODEL_DIR")
    if model_dir:
        target = model_dir if is_chief(tf_config) else tempfile.mkdtemp()
        state.write(os.path.join(target, "weights"))  # type: ignore[attr-defined]
        print(f"model written to {target}", flush=True)


def report(step: int, total: int, start: int | None, **metrics: float) -> None:
    from airflow_provider_tony.runtime import progress

    extra = {"start_step": start} if start is not None else {}
    progress.report(step=step, total_steps=total, **extra, **metrics)


def mwms_loop(args: argparse.Namespace, tf_config: dict) -> int:  # type: ignore[type-arg]
    import numpy as np
    import tensorflow as tf
    import tf_keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    x, y = digits()
    with strategy.scope():
        model = tf_keras.Sequential([tf_keras.layers.Input(shape=(64,)), tf_keras.layers.Dense(10)])
        optimizer = tf_keras.optimizers.SGD(learning_rate=0.1)
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False)
    state = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_var)
    ckpt_dir = os.environ["TONY_CHECKPOINT_DIR"]
    # Every worker saves (a collective under MWMS); only the chief's copy is the real one.
    write_dir = ckpt_dir if is_chief(tf_config) else tempfile.mkdtemp()
    manager = tf.train.CheckpointManager(state, write_dir, max_to_keep=3)
    latest = tf.train.latest_checkpoint(ckpt_dir)
    if latest:
        state.restore(latest)
    start = int(step_var.numpy())
    print(f"resuming at step {start}", flush=True)

    @tf.function
    def train_step(bx: tf.Tensor, by: tf.Tensor) -> tf.Tensor:
        def replica(bx: tf.Tensor, by: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(by, model(bx)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        per_replica = strategy.run(replica, args=(bx, by))
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None)

    rng = np.random.default_rng(tf_config.get("task", {}).get("index", 0))
    me = f"{tf_config.get('task', {}).get('type')}:{tf_config.get('task', {}).get('index')}"
    held = bytearray()
    first = True
    for step in range(start + 1, args.steps + 1):
        if me == args.hog_task and step == args.hog_step:
            held = bytearray(args.hog_mib * 1024 * 1024)
            for offset in range(0, len(held), 4096):  # bytearray() maps zero pages: write each one
                held[offset] = 1
            print(f"strategies: {me} holds {args.hog_mib} MiB more at step {step}", file=sys.stderr, flush=True)
        pick = rng.integers(0, len(x), 32)
        loss = float(train_step(tf.constant(x[pick]), tf.constant(y[pick])))
        step_var.assign(step)
        if step % args.every == 0:
            manager.save(checkpoint_number=step)
        report(step, args.steps, start if first else None, loss=loss)
        first = False
        time.sleep(args.sleep)
    publish(tf_config, tf.train.Checkpoint(model=model))
    return 0


def keras_fit(args: argparse.Namespace, tf_config: dict) -> int:  # type: ignore[type-arg]
    import tensorflow as tf
    import tf_keras

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    x, y = digits()
    with strategy.scope():
        model = tf_keras.Sequential(
            [
                tf_keras.layers.Input(shape=(64,)),
                tf_keras.layers.Dense(32, activation="relu"),
                tf_keras.layers.Dense(10),
            ]
        )
        model.compile(
            optimizer=tf_keras.optimizers.SGD(learning_rate=0.1),
            loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32 * strategy.num_replicas_in_sync)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = data.with_options(options)
    start: list[int] = []

    class Pace(tf_keras.callbacks.Callback):
        """Reports the optimizer's step (restored by BackupAndRestore) and paces the batches."""

        def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:  # type: ignore[type-arg]
            step = int(self.model.optimizer.iterations.numpy())
            if not start:
                start.append(step - 1)
                print(f"resuming at step {step - 1}", flush=True)
            report(step, args.steps, start[0] if step - 1 == start[0] else None, loss=float((logs or {})["loss"]))
            time.sleep(args.sleep)

    # The recipe: BackupAndRestore's backup_dir under $TONY_CHECKPOINT_DIR, so the
    # executor uploads its saves and a restarted gang (or an Airflow retry) resumes mid-epoch.
    backup = tf_keras.callbacks.BackupAndRestore(
        backup_dir=os.path.join(os.environ["TONY_CHECKPOINT_DIR"], "backup"), save_freq=args.every
    )
    per_epoch = args.every * 5
    model.fit(data, epochs=args.steps // per_epoch, steps_per_epoch=per_epoch, verbose=0, callbacks=[backup, Pace()])
    publish(tf_config, tf.train.Checkpoint(model=model))
    return 0


def parameter_servers(args: argparse.Namespace, tf_config: dict) -> int:  # type: ignore[type-arg]
    import numpy as np
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    task = tf_config["task"]
    if task["type"] in ("worker", "ps"):
        server = tf.distribute.Server(
            resolver.cluster_spec(), job_name=task["type"], task_index=task["index"], protocol="grpc", start=True
        )
        print(f"{task['type']} server up", flush=True)
        server.join()  # the AM stops this task when the chief finishes
        return 0
    x, y = digits()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(tf.zeros([64, 10]))
        b = tf.Variable(tf.zeros([10]))
        step_var = tf.Variable(0, dtype=tf.int64, trainable=False)
    state = tf.train.Checkpoint(w=w, b=b, step=step_var)
    ckpt_dir = os.environ["TONY_CHECKPOINT_DIR"]
    manager = tf.train.CheckpointManager(state, ckpt_dir, max_to_keep=3)
    if manager.latest_checkpoint:
        state.restore(manager.latest_checkpoint)
    start = int(step_var.numpy())
    print(f"resuming at step {start}", flush=True)

    def dataset_fn(_ctx: object = None) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).repeat().batch(64)

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(it: object) -> tf.Tensor:
        def replica(bx: tf.Tensor, by: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(by, tf.matmul(bx, w) + b))
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.1 * gw)
            b.assign_sub(0.1 * gb)
            return loss

        bx, by = next(it)
        return strategy.run(replica, args=(bx, by))

    first = True
    for step in range(start + 1, args.steps + 1):
        loss = coordinator.schedule(train_step, args=(iterator,))
        coordinator.join()  # one step at a time: the step reported is the step trained
        step_var.assign(step)
        if step % args.every == 0:
            manager.save(checkpoint_number=step)
        report(step, args.steps, start if first else None, loss=float(loss.fetch()))
        first = False
        time.sleep(args.sleep)
    accuracy = float(np.mean(np.argmax(x @ w.numpy() + b.numpy(), axis=1) == y))
    report(args.steps, args.steps, None, accuracy=accuracy)
    publish(tf_config, tf.train.Checkpoint(w=w, b=b))
    return 0


MODES = {"mwms-loop": mwms_loop, "keras-fit": keras_fit, "ps": parameter_servers}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=sorted(MODES), required=True)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--sleep", type=float, default=0.2)
    p.add_argument("--hog-task", default="", help="mwms-loop: the task (worker:1) that takes --hog-mib more")
    p.add_argument("--hog-mib", type=int, default=0)
    p.add_argument("--hog-step", type=int, default=1)
    args = p.parse_args(argv)
    tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    return MODES[args.mode](args, tf_config)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
