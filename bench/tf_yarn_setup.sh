#!/usr/bin/env bash
# A separate venv for tf-yarn, the skein-based peer that bench/tf_yarn_peer.py times.
#
#     bench/tf_yarn_setup.sh [VENV]        # default .devcluster/tf-yarn-venv
#
# tf-yarn 0.7.0 subclasses tf.estimator classes at import time, so it needs a
# TensorFlow that still has tf.estimator (<= 2.15); it also wants skein < 0.9
# and cluster-pack < 3. None of that may enter the project's own .venv. The
# pins below were installed together and ran on the local cluster (Python 3.11).
# Then cluster-pack packs the venv into a pex beside it (VENV/tf-yarn-env.pex,
# ~420 MiB), which is what the YARN containers run; it is rebuilt only when
# the venv's packages change. Idempotent: rerunning leaves a good venv as is.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-.devcluster/tf-yarn-venv}"
case "$VENV" in /*) ;; *) VENV="$REPO/$VENV" ;; esac
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi

LOCK="$(mktemp)"
trap 'rm -f "$LOCK"' EXIT
# Direct pins first; the rest is the resolved set they were verified with.
cat > "$LOCK" <<'EOF'
tf-yarn==0.7.0
cluster-pack==0.3.19
skein==0.8.2
tensorflow-cpu==2.15.1
tensorflow-io==0.36.0
tensorflow-io-gcs-filesystem==0.36.0
numpy==1.26.4
protobuf==4.25.9
pyarrow==26.0.1
pex==2.105.2
absl-py==2.5.1
aiobotocore==3.10.0
aiohappyeyeballs==2.7.1
aiohttp==3.14.5
aioitertools==0.13.0
aiosignal==1.4.0
astunparse==1.6.3
attrs==26.1.0
botocore==1.43.117
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
cloudpickle==3.1.3
cryptography==50.0.2
fire==0.7.1
flatbuffers==25.12.19
frozenlist==1.8.0
fsspec==2026.9.0
gast==0.7.0
google-auth==2.63.0
google-auth-oauthlib==1.5.0
google-pasta==0.2.0
grpcio==1.85.3
h5py==3.16.0
idna==3.20
jmespath==1.1.0
keras==2.15.0
libclang==18.1.1
Markdown==3.11.3
MarkupSafe==3.0.4
ml-dtypes==0.3.2
multidict==7.2.1
oauthlib==4.0.1
opt_einsum==3.4.0
packaging==26.4
propcache==0.5.4
psutil==7.2.2
pyasn1==0.6.5
pyasn1_modules==0.4.2
pycparser==3.12
python-dateutil==2.9.0.post0
PyYAML==6.0.4
requests==2.34.2
requests-oauthlib==2.0.0
s3fs==2026.9.0
six==1.17.0
tensorboard==2.15.2
tensorboard-data-server==0.7.2
tensorflow-estimator==2.15.0
termcolor==3.3.0
types-setuptools==84.2.0.20261104
typing_extensions==4.16.0
urllib3==2.8.0
Werkzeug==3.1.9
wheel-filename==2.1.0
wrapt==1.14.2
yarl==1.25.1
EOF

"$VENV/bin/python" -m pip install -q -r "$LOCK"
"$VENV/bin/python" -m pip check
TF_CPP_MIN_LOG_LEVEL=2 "$VENV/bin/python" -c 'import tf_yarn.tensorflow, tensorflow as tf; print("tf-yarn venv ok: TensorFlow", tf.__version__)'

# The pex the containers run (cluster-pack runs `pex` from PATH). A local path
# keeps cluster-pack off HDFS, which it would reach through libhdfs.
PATH="$VENV/bin:$PATH" "$VENV/bin/python" - "$VENV/tf-yarn-env.pex" <<'EOF'
import contextlib, os, sys
import cluster_pack
with contextlib.redirect_stdout(sys.stderr):
    pex = cluster_pack.upload_env(package_path=sys.argv[1])[0]
print(f"pex ready: {pex} ({os.path.getsize(pex) / 2**20:.0f} MiB)")
EOF
