"""Names shared by the submitting side, the AM, the executors and user code.

Environment variable names and the key-value store layout live here and
nowhere else, so the three sides can never disagree on a spelling. The rule
(tests/unit/runtime/test_contracts.py): an environment variable's name is a constant
named ``ENV_*``; the provider's own start with ``TONY_``, those of TonY's,
torch's, TensorFlow's, YARN's and Hadoop's keep their owners' spelling, and
TonY's are ``ENV_TONY_*``.
"""

from __future__ import annotations

# ---- the submitting side's own configuration (TonyClient.from_env; the WebHDFS pair below too)
ENV_RM_URL = "TONY_RM_URL"  # the ResourceManager(s), comma-separated for an HA pair
ENV_KERBEROS_PRINCIPAL = "TONY_KERBEROS_PRINCIPAL"
ENV_KERBEROS_KEYTAB = "TONY_KERBEROS_KEYTAB"
ENV_SKEIN_SPEC = "TONY_SKEIN_SPEC"  # the finished skein spec (base64) on the AM's command line
#: A job's ``env`` may not set names under this prefix: the runtime's own wiring lives there.
ENV_RESERVED_PREFIX = "TONY_"

# ---- environment handed to containers by the submitting side
ENV_JOB_SPEC = "TONY_JOB_SPEC"  # the JobSpec as JSON
ENV_ATTEMPT = "TONY_ATTEMPT"  # the Airflow try number (1 outside Airflow)
ENV_WEBHDFS_URL = "TONY_WEBHDFS_URL"  # where executors publish models/checkpoints
ENV_WEBHDFS_USER = "TONY_WEBHDFS_USER"
ENV_HISTORY_DIR = "TONY_HISTORY_DIR"  # HDFS folder for the final JobHistory (<base_path>/history)
# HDFS folder for the TensorBoard events of jobs without checkpoint.dir (<base_path>/tensorboard; <app id> below it)
ENV_EVENTS_DIR = "TONY_EVENTS_DIR"
# "delegation" on a Kerberized cluster: containers reach WebHDFS with the
# application's HDFS delegation token (no keytab ever reaches a container).
ENV_WEBHDFS_AUTH = "TONY_WEBHDFS_AUTH"
WEBHDFS_AUTH_DELEGATION = "delegation"
# kerberos.refresh_tokens: the principal of the keytab shipped to the AM container
# only, under AM_KEYTAB_ALIAS in its working directory (runtime/token_refresh.py).
ENV_AM_PRINCIPAL = "TONY_AM_PRINCIPAL"
AM_KEYTAB_ALIAS = ".tony-am.keytab"
ENV_TOKENS_REFRESHED = "TONY_TOKENS_REFRESHED"  # "1" in every container of such a job
# Data on several NameNodes (runtime/namenodes.py): the cluster's fs.defaultFS ("hdfs://tony",
# "hdfs://10.0.0.1:8020"), and, when the job touches others, a JSON object naming every NameNode it
# touches, the default's included: {"hdfs://<authority>": {"webhdfs": ["http://h:p", ...],
# "token_service": "ha-hdfs:<ns>" | "<ip>:<port>"}}, in base64url (namenodes.encode).
ENV_DEFAULT_FS = "TONY_DEFAULT_FS"
ENV_NAMENODES = "TONY_NAMENODES"

# ---- environment the executor exports to user code
ENV_ROLE = "TONY_ROLE"
ENV_TASK_INDEX = "TONY_TASK_INDEX"
ENV_TASK_ID = "TONY_TASK_ID"  # "worker:1"
ENV_APP_ID = "TONY_APPLICATION_ID"
ENV_NUM_TASKS = "TONY_NUM_TASKS"  # JSON {role: instances}
ENV_CLUSTER_SPEC = "TONY_CLUSTER_SPEC"  # JSON {task_id: "host:port"}, every role
ENV_PROGRESS_FILE = "TONY_PROGRESS_FILE"
ENV_CHECKPOINT_DIR = "TONY_CHECKPOINT_DIR"  # local directory user code writes checkpoints to
ENV_RESTORED_STEP = "TONY_RESTORED_STEP"  # step of the checkpoint restored there, "" if none
ENV_RESTORED_FROM = "TONY_RESTORED_FROM"  # HDFS path it came from
ENV_RESTORED_KIND = "TONY_RESTORED_KIND"  # "resume" (this job's own) or "warm_start" (another run's)
ENV_TENSORBOARD_DIR = "TONY_TENSORBOARD_DIR"  # local directory for TensorBoard event files
ENV_PORT = "TONY_PORT"  # the port the executor reserved for this task (the user's server binds it)
ENV_MODEL_DIR = "TONY_MODEL_DIR"  # local directory for the final model
ENV_TF_CONFIG = "TF_CONFIG"
ENV_CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
ENV_INPUTS_SEEN = "TONY_INPUTS_SEEN"  # ``name=files:bytes,...``: what the submitting side listed
ENV_INPUT_DIR = "TONY_INPUT_{}_DIR"  # .format(input name, upper case): its staged folder
ENV_INPUT_MANIFEST = "TONY_INPUT_{}_MANIFEST"  # .format(input name, upper case): its manifest
# On the node, not set by us: where GPU leases live when not under the default root.
ENV_GPU_LEASE_DIR = "TONY_GPU_LEASE_DIR"

# ---- framework: pytorch (runtime/frameworks.py): torchrun's variables, then TonY's PyTorchRuntime's
ENV_MASTER_ADDR = "MASTER_ADDR"
ENV_MASTER_PORT = "MASTER_PORT"
ENV_RANK = "RANK"
ENV_WORLD_SIZE = "WORLD_SIZE"
ENV_LOCAL_RANK = "LOCAL_RANK"
ENV_LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
ENV_GROUP_RANK = "GROUP_RANK"
ENV_TONY_INIT_METHOD = "INIT_METHOD"  # tcp://host:port
ENV_TONY_WORLD = "WORLD"
# Defaults for a PyTorch task's processes, set only where the job leaves them unset (frameworks.torch_defaults).
ENV_OMP_NUM_THREADS = "OMP_NUM_THREADS"
ENV_TORCH_NCCL_ASYNC_ERROR_HANDLING = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
ENV_NCCL_DEBUG = "NCCL_DEBUG"

# Set by YARN / skein inside containers.
ENV_SKEIN_CONTAINER_ID = "SKEIN_CONTAINER_ID"  # "<service>_<instance>"
ENV_SKEIN_APPLICATION_ID = "SKEIN_APPLICATION_ID"
ENV_NM_HOST = "NM_HOST"
ENV_NM_HTTP_PORT = "NM_HTTP_PORT"
ENV_YARN_CONTAINER_ID = "CONTAINER_ID"

# ---- the skein key-value store layout
KV_PREFIX = "tony/"
KV_STATE = "tony/state"  # the AM's JSON state document
KV_CLUSTER = "tony/cluster"  # published once every rendezvous task registered
KV_REGISTER_PREFIX = "tony/register/"
KV_HEARTBEAT_PREFIX = "tony/hb/"
KV_EXIT_PREFIX = "tony/exit/"
KV_EVENT_PREFIX = "tony/event/"  # checkpoint restores/uploads reported by executors
# Written by the AM for each container of a restarted gang: its task id and generation.
KV_SLOT_PREFIX = "tony/slot/"
# Before a gang restart the AM asks the checkpoint uploader to finish (a Drain with the
# gang's generation); the uploader answers under its task id once its last upload is done.
KV_DRAIN = "tony/drain"
KV_DRAINED_PREFIX = "tony/drained/"
# The uploader looks for the request every DRAIN_POLL_S and tries its upload for
# at most DRAIN_UPLOAD_S; the AM waits at most DRAIN_TIMEOUT_S for the answer,
# so a restart is not held up long by an upload that cannot finish (HDFS trouble).
DRAIN_POLL_S = 1.0
DRAIN_UPLOAD_S = 50.0
DRAIN_TIMEOUT_S = 60.0
# Where the newest HDFS delegation token the AM obtained from the job's keytab is (a
# TokenPointer message: an HDFS path and a sequence number, never the token, because
# skein's web UI lists every value of the store to viewers of the application). The
# token itself is a DelegationToken message in a 0600 file of the job user's staging
# folder, ~/.skein/<app>/<TOKEN_FILE_PREFIX><seq>. Outside KV_PREFIX: the AM reads the
# whole tony/ prefix every tick and has no use for it.
KV_TOKEN_POINTER = "tony-token/pointer"  # noqa: S105 - a key's name, not a secret
TOKEN_FILE_PREFIX = "tony-hdfs-token-"  # noqa: S105 - a file name's prefix
# Per-task keys of one gang: the AM clears them (and the cluster spec) when it restarts the gang.
KV_GANG_PREFIXES = (KV_REGISTER_PREFIX, KV_HEARTBEAT_PREFIX, KV_EXIT_PREFIX, KV_DRAINED_PREFIX)


def kv_register(task_id: str) -> str:
    return KV_REGISTER_PREFIX + task_id


def kv_heartbeat(task_id: str) -> str:
    return KV_HEARTBEAT_PREFIX + task_id


def kv_exit(task_id: str) -> str:
    return KV_EXIT_PREFIX + task_id


def kv_drained(task_id: str) -> str:
    return KV_DRAINED_PREFIX + task_id


def kv_slot(container: str) -> str:
    """``container`` is skein's ``<service>_<instance>`` id."""
    return KV_SLOT_PREFIX + container


def task_id_of(key: str, prefix: str) -> str:
    return key[len(prefix) :]


# Files inside every container's working directory.
RUNTIME_ZIP = "tony_runtime.zip"
#: The YARN application type of what this provider submits (skein's driver sets it); re-attaching
#: accepts no other.
YARN_APPLICATION_TYPE = "skein"
TENSORBOARD_SUBDIR = "tensorboard"  # under checkpoint.dir on HDFS
# The tensorboard role's page in skein's web UI, served through the ResourceManager's
# web proxy at <rm>/proxy/<app id>/pages/<route>/ (a container's host:port is
# rarely reachable from a user's browser; the RM is).
TENSORBOARD_PAGE = "tensorboard"
TENSORBOARD_ROLE = "tensorboard"
SKEIN_PAGES_PREFIX = "pages"

# Exit codes that mean "try again", as in Kubeflow's exit-code restart policy:
# 75 (EX_TEMPFAIL, what the executor exits with when HDFS fails it) and every
# code from a signal (128 + N: preemption, OOM kill, SIGTERM; a negative code is
# Python's way of saying the same). Codes 1-127 are the script's own failure,
# which a retry repeats; JobSpec.retryable_exit_codes adds to this set.
#: EX_TEMPFAIL: the exit code the executor reports for a failure of ours that a retry can clear (an HDFS
#: upload or model export that failed, GPUs that stayed taken, the user process stopped for our reason).
TEMPFAIL_EXIT_CODE = 75
RETRYABLE_EXIT_CODES = frozenset({TEMPFAIL_EXIT_CODE})
SIGNAL_EXIT_CODES = range(128, 256)
#: Signals a process raises on itself when it crashes (SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE,
#: SIGSEGV, SIGSYS): its own end, not a kill from outside. A C++ library that aborts when its peer's
#: socket closes (gloo, 134) is a survivor of a lost peer, not a lost task (runtime/failure.py).
CRASH_SIGNALS = frozenset({4, 5, 6, 7, 8, 11, 31})
RETRYABLE_MARK = "[retryable]"

# ---- a job's source tree (JobSpec.src_dir)
SRC_ALIAS = "src"  # the packed source directory is unpacked under this name in every container
ENV_PYTHONPATH = "PYTHONPATH"

# ---- the variables TonY's task executors set (TFRuntime / ApplicationMaster), so TonY scripts run unchanged
ENV_TONY_JOB_NAME = "JOB_NAME"  # the role ("worker")
ENV_TONY_TASK_INDEX = "TASK_INDEX"
ENV_TONY_TASK_NUM = "TASK_NUM"  # how many tracked tasks the job has
ENV_TONY_JOB_ID = "JOB_ID"  # the YARN application id
ENV_TONY_IS_CHIEF = "IS_CHIEF"  # "true" on the task that decides success; unset elsewhere
ENV_TONY_CLUSTER_SPEC = "CLUSTER_SPEC"  # JSON {role: ["host:port", ...]}, every role
ENV_TONY_DISTRIBUTED_MODE = "DISTRIBUTED_MODE"
ENV_TONY_SESSION_ID = "SESSION_ID"
ENV_TONY_TB_PORT = "TB_PORT"  # the port a tensorboard task serves on

# ---- limits both sides enforce
#: The most tasks a job may run: the AM's state document holds at most this many
#: (``messages.StateDocument``), so the JobSpec refuses more before anything is submitted.
MAX_TASKS = 4096
