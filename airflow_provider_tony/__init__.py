"""Apache Airflow provider that runs distributed TensorFlow training on Hadoop YARN.

This top-level module stays import-light on purpose: the ``runtime`` subpackage
is shipped into YARN containers as a zip beside this file, where neither Airflow
nor TensorFlow needs to be installed.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
