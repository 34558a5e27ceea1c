"""Code that runs inside YARN containers: the TonY application master and task executor.

Imports only the standard library, skein and hdfs (never Airflow or TensorFlow),
so it works in any Python environment shipped to the cluster.
"""

from __future__ import annotations
