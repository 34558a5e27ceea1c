"""Data and model of the TonY-style project (the role ``mnist_setup.py`` plays in
TensorFlow's multi-worker Keras tutorial): a sibling module ``main.py`` imports."""

from __future__ import annotations


def dataset(global_batch: int):
    """scikit-learn's digits (no download), repeated and batched."""
    import tensorflow as tf
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    data = tf.data.Dataset.from_tensor_slices(((x / 16.0).astype("float32"), y.astype("int64")))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return data.shuffle(2048, seed=1).repeat().batch(global_batch).with_options(options)


def build_model():
    import tf_keras

    model = tf_keras.Sequential(
        [
            tf_keras.layers.Input(shape=(64,)),
            tf_keras.layers.Dense(32, activation="relu"),
            tf_keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer=tf_keras.optimizers.SGD(0.05), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model
