"""ParameterServerStrategy on scikit-learn's digits: a chief coordinates, workers and ps serve.

Workers and parameter servers only run a ``tf.distribute.Server`` and block
forever; the TonY AM stops them when the chief (which decides success)
finishes. The chief drives a custom training loop through a
``ClusterCoordinator``.

    --steps N --learning-rate F --input NAME --eval-input NAME

With ``--input``, each worker trains on its own shard of that job input
(TFRecords staged by TonY into ``inputs/<NAME>/`` of its container): the
dataset function runs on the workers, and its ``list_files`` looks at the
worker's own working directory. The chief evaluates on ``--eval-input``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# No Keras here: with tf.keras pointing at tf-keras (installed with the examples), importing
# TensorFlow no longer imports Keras 3, and scikit-learn through its wrappers, in every task.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--learning-rate", type=float, default=0.1)
    p.add_argument("--input", default=None, help="the job input the workers train on (TFRecords staged by TonY)")
    p.add_argument("--eval-input", default=None, help="the job input the chief evaluates on")
    args = p.parse_args(argv)

    import tensorflow as tf

    from airflow_provider_tony.runtime import inputs, progress

    tf_config = json.loads(os.environ["TF_CONFIG"])
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    task_type = tf_config["task"]["type"]
    if task_type in ("worker", "ps"):
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=task_type,
            task_index=tf_config["task"]["index"],
            protocol="grpc",
            start=True,
        )
        if task_type == "worker" and args.input:
            # The shard this worker's dataset function will read, for the job's record.
            progress.report(input_files=",".join(os.path.basename(f) for f in inputs.files(args.input)))
        print(f"{task_type} server up, serving until the AM stops this task", flush=True)
        server.join()
        return 0

    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    feature_spec = {"x": tf.io.FixedLenFeature([64], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        example = tf.io.parse_single_example(record, feature_spec)
        return example["x"], example["y"]

    if args.eval_input:
        eval_set = tf.data.TFRecordDataset(inputs.files(args.eval_input)).map(parse).batch(1 << 20)
        x, y = (t.numpy() for t in next(iter(eval_set)))
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(tf.zeros([64, 10]))
        b = tf.Variable(tf.zeros([10]))
    lr = args.learning_rate

    def dataset_fn(_ctx: object = None) -> tf.data.Dataset:
        if args.input:
            # Runs on each worker: the relative glob names that worker's own staged shard.
            files = tf.data.Dataset.list_files(f"inputs/{args.input}/*.tfrecord", shuffle=False)
            return tf.data.TFRecordDataset(files).map(parse).shuffle(2048, seed=0).repeat().batch(64)
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048, seed=0).repeat().batch(64)

    per_worker = coordinator.create_per_worker_dataset(dataset_fn)
    iterator = iter(per_worker)

    @tf.function
    def step(it: object) -> tf.Tensor:
        def replica(batch_x: tf.Tensor, batch_y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = tf.matmul(batch_x, w) + b
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(batch_y, logits))
            grads = tape.gradient(loss, [w, b])
            w.assign_sub(lr * grads[0])  # plain SGD: no Keras optimizer state on the ps
            b.assign_sub(lr * grads[1])
            return loss

        batch_x, batch_y = next(it)
        return strategy.run(replica, args=(batch_x, batch_y))

    loss = None
    for i in range(args.steps):
        loss = coordinator.schedule(step, args=(iterator,))
        if (i + 1) % 20 == 0:
            coordinator.join()
            progress.report(step=i + 1, total_steps=args.steps, loss=float(loss.fetch()))
    coordinator.join()
    accuracy = float(np.mean(np.argmax(x @ w.numpy() + b.numpy(), axis=1) == y))
    progress.report(step=args.steps, total_steps=args.steps, loss=float(loss.fetch()), accuracy=accuracy)
    print(f"chief done: accuracy={accuracy:.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
