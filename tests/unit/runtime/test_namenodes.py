"""Data on several NameNodes, inside the containers (``runtime/namenodes.py``, ``hdfs_io.Clients``).

The contract ($TONY_DEFAULT_FS, $TONY_NAMENODES) is parsed defensively; each location gets the
client of its own NameNode (a token of its own on a Kerberized cluster), and the code that moves
inputs, checkpoints, models and histories asks per location. WebHDFS is an in-memory stand-in per
NameNode: which stand-in saw the call is what is under test.
"""

from __future__ import annotations

import base64
import contextlib
import json
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_tony.runtime import checkpoint, executor, gate, hdfs_io, inputs, namenodes
from airflow_provider_tony.runtime import constants as C
from airflow_provider_tony.runtime import hadoop_tokens as ht
from airflow_provider_tony.runtime.errors import NameNodeError, TokenFileError
from airflow_provider_tony.runtime.hadoop_tokens import Token
from airflow_provider_tony.runtime.history import write_history
from airflow_provider_tony.runtime.messages import JobHistory
from airflow_provider_tony.runtime.spec import JobSpec
from airflow_provider_tony.runtime.webhdfs_failover import FailoverInsecureClient
from airflow_provider_tony.runtime.webhdfs_token import DelegationTokenClient

DEFAULT_FS = "hdfs://tony"
ML = {"webhdfs": ["http://ml1:9870", "http://ml2:9870"], "token_service": "ha-hdfs:ml"}
REMOTE = {"webhdfs": ["http://10.0.0.9:9870"], "token_service": "10.0.0.9:8020"}
ENTRIES = {
    "hdfs://tony": {"webhdfs": ["http://nn1:9870"], "token_service": "ha-hdfs:tony"},
    "hdfs://ml": ML,
    "hdfs://10.0.0.9:8020": REMOTE,
}


def _enc(value: object) -> str:
    """What the submitting side writes: JSON in base64url (``namenodes.encode``)."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def _env(**extra: str) -> dict[str, str]:
    return {
        C.ENV_WEBHDFS_URL: "http://nn1:9870",
        C.ENV_WEBHDFS_USER: "alice",
        C.ENV_DEFAULT_FS: DEFAULT_FS,
        C.ENV_NAMENODES: _enc(ENTRIES),
        **extra,
    }


def _token(service: str, secret: bytes) -> Token:
    return Token(service, ht.HDFS_DELEGATION_TOKEN, service, b"ident-" + secret, secret)


def _token_file(path: Path, *tokens: Token) -> str:
    """Hadoop's Writable ``Credentials`` (what the NodeManager writes), no secret keys."""
    out = ht.MAGIC + bytes([ht.WRITABLE]) + ht._vint(len(tokens))
    for t in tokens:
        out += ht._text(t.alias) + ht._vint(len(t.identifier)) + t.identifier + ht._vint(len(t.password))
        out += t.password + ht._text(t.kind) + ht._text(t.service)
    path.write_bytes(out + ht._vint(0))
    return str(path)


# --------------------------------------------------------------------------- the contract
@pytest.mark.parametrize(
    "location, authority",
    [
        ("/data/x", None),
        ("hdfs:///data/x", None),
        ("hdfs://ML/data/x", "hdfs://ml"),
        ("hdfs://10.0.0.9:8020/a", "hdfs://10.0.0.9:8020"),
        ("hdfs://warehouse", "hdfs://warehouse"),
    ],
)
def test_authority_of_a_location(location: str, authority: str | None) -> None:
    assert namenodes.authority_of(location) == authority


def test_the_env_round_trips_and_is_the_same_text_for_the_same_job() -> None:
    parsed = namenodes.decode(_enc(ENTRIES))
    assert parsed["hdfs://ml"] == namenodes.NameNode("hdfs://ml", ("http://ml1:9870", "http://ml2:9870"), "ha-hdfs:ml")
    again = namenodes.encode(parsed)
    assert namenodes.decode(again) == parsed and namenodes.encode(namenodes.decode(again)) == again
    assert namenodes.decode("") == {}
    # YARN's launch script keeps a value inside double quotes without escaping: nothing it would read.
    assert re.fullmatch(r"[A-Za-z0-9_=-]+", again), again


@pytest.mark.parametrize(
    "text, said",
    [
        ('{"hdfs://ml": {}}', "not base64url text"),
        (base64.urlsafe_b64encode(b"{not json").decode(), "not JSON"),
        (_enc(["hdfs://ml"]), "not a JSON object"),
        (_enc({"ml": ML}), "is not an hdfs://<authority> key"),
        (_enc({"hdfs://ml/data": ML}), "is not an hdfs://<authority> key"),
        (_enc({"hdfs://ml": ["http://ml1:9870"]}), "entry is not an object"),
        (_enc({"hdfs://ml": {"webhdfs": []}}), "webhdfs is not a list of 1 to"),
        (_enc({"hdfs://ml": {"webhdfs": "http://ml1:9870"}}), "webhdfs is not a list of 1 to"),
        (_enc({"hdfs://ml": {"webhdfs": ["ml1:9870"]}}), "is not http(s)://host:port"),
        (_enc({"hdfs://ml": {"webhdfs": ["http://ml1:9870/x?y"]}}), "is not http(s)://host:port"),
        (_enc({"hdfs://ml": {**ML, "token_service": 7}}), "token_service '7' is not"),
        (_enc({f"hdfs://n{i}": ML for i in range(namenodes.MAX_NAMENODES + 1)}), "NameNodes, more than"),
        (_enc({"hdfs://ml": {**ML, "pad": "x" * namenodes.MAX_ENV_BYTES}}), "bytes, more than"),
    ],
)
def test_a_bad_env_is_refused_naming_the_variable_what_and_the_fix(text: str, said: str) -> None:
    with pytest.raises(NameNodeError) as err:
        namenodes.decode(text)
    assert str(err.value).startswith(f"${C.ENV_NAMENODES}: ") and said in str(err.value)
    assert "submit the job again" in str(err.value)


# --------------------------------------------------------------------------- tokens by service
def test_the_token_of_a_service_is_chosen_from_the_file(tmp_path: Path) -> None:
    default, ml = _token("ha-hdfs:tony", b"default-secret"), _token("ha-hdfs:ml", b"ml-secret")
    env = {ht.ENV_TOKEN_FILE: _token_file(tmp_path / "tokens", default, ml)}
    assert ht.hdfs_delegation_token(env, "ha-hdfs:ml") == ml
    assert ht.hdfs_delegation_token(env, "ha-hdfs:tony") == default
    assert ht.hdfs_delegation_token(env) == default  # without a service: the first, as before
    with pytest.raises(TokenFileError) as err:
        ht.hdfs_delegation_token(env, "10.0.0.9:8020")
    assert "'10.0.0.9:8020'" in str(err.value) and "ha-hdfs:ml, ha-hdfs:tony" in str(err.value)
    assert "secret" not in str(err.value)


def test_the_default_client_takes_the_default_namenodes_token_not_the_first(tmp_path: Path) -> None:
    ml, default = _token("ha-hdfs:ml", b"ml-secret"), _token("ha-hdfs:tony", b"default-secret")
    env = _env(
        **{C.ENV_WEBHDFS_AUTH: C.WEBHDFS_AUTH_DELEGATION, ht.ENV_TOKEN_FILE: _token_file(tmp_path / "t", ml, default)}
    )
    client = hdfs_io.client_from_env(env)
    assert client.token() == default.url_string()


# --------------------------------------------------------------------------- a client per location
def test_each_location_gets_its_namenodes_client_made_once() -> None:
    clients = hdfs_io.Clients(_env())
    default = clients.default()
    assert isinstance(default, FailoverInsecureClient)
    assert clients.for_location("/data/x") is default
    assert clients.for_location("hdfs://tony/data/x") is default
    assert clients.for_location("hdfs:///data/x") is default
    ml = clients.for_location("hdfs://ml/models/m")
    assert ml is not default and ml.namenodes == ("http://ml1:9870", "http://ml2:9870")
    assert ml._session.params["user.name"] == "alice"
    assert clients.for_location("hdfs://ML/other") is ml, "cached per authority"
    remote = clients.for_location("hdfs://10.0.0.9:8020/data")
    assert remote is not ml and remote.url == "http://10.0.0.9:9870"
    assert namenodes.pick(clients, "hdfs://ml/x") is ml and namenodes.pick(default, "hdfs://ml/x") is default


def test_a_namenode_the_job_was_not_given_is_an_error_naming_the_location_and_the_fix() -> None:
    clients = hdfs_io.Clients(_env())
    with pytest.raises(NameNodeError) as err:
        clients.for_location("hdfs://warehouse/data/x")
    text = str(err.value)
    assert "hdfs://warehouse/data/x is on NameNode hdfs://warehouse" in text
    assert "other_namenodes" in text and "namenodes extra" in text and "default filesystem hdfs://tony" in text


def test_on_kerberos_another_namenodes_client_sends_its_own_token(tmp_path: Path) -> None:
    default, ml, remote = (
        _token("ha-hdfs:tony", b"d-secret"),
        _token("ha-hdfs:ml", b"ml-secret"),
        _token("10.0.0.9:8020", b"r-secret"),
    )
    tokens = _token_file(tmp_path / "tokens", default, ml, remote)
    clients = hdfs_io.Clients(_env(**{C.ENV_WEBHDFS_AUTH: C.WEBHDFS_AUTH_DELEGATION, ht.ENV_TOKEN_FILE: tokens}))
    ml_client = clients.for_location("hdfs://ml/models/m")
    assert isinstance(ml_client, DelegationTokenClient) and ml_client.token() == ml.url_string()
    assert clients.for_location("hdfs://10.0.0.9:8020/d").token() == remote.url_string()
    assert clients.default().token() == default.url_string()


# --------------------------------------------------------------------------- routing
class Fs:
    """One NameNode's files (path -> bytes), with the calls the runtime makes; ``calls`` records them."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files = dict(files or {})
        self.calls: list[tuple[str, str]] = []

    def _dirs(self) -> set[str]:
        out = {"/"}
        for path in self.files:
            while (path := posixpath.dirname(path)) != "/":
                out.add(path)
        return out

    def status(self, path: str, strict: bool = True) -> dict[str, Any] | None:
        self.calls.append(("status", path))
        if path in self.files:
            return {"type": "FILE", "length": len(self.files[path])}
        return {"type": "DIRECTORY", "length": 0} if path in self._dirs() else None

    def list(self, path: str, status: bool = False) -> list[Any]:
        self.calls.append(("list", path))
        prefix = path.rstrip("/") + "/"
        names = sorted({p[len(prefix) :].split("/")[0] for p in [*self.files, *self._dirs()] if p.startswith(prefix)})
        names = [n for n in names if n]
        return [(n, self.status(prefix + n)) for n in names] if status else names

    @contextlib.contextmanager
    def read(self, path: str, chunk_size: int = 0, **_: Any) -> Iterator[Any]:
        self.calls.append(("read", path))
        data = self.files[path]
        if chunk_size:
            yield iter([data])
        else:
            yield _Reader(data)

    def makedirs(self, path: str, **_: Any) -> None:
        self.calls.append(("makedirs", path))

    def write(self, path: str, data: bytes, overwrite: bool = False, **_: Any) -> None:
        self.calls.append(("write", path))
        self.files[path] = data

    def delete(self, path: str, recursive: bool = False) -> None:
        self.calls.append(("delete", path))
        self.files = {p: d for p, d in self.files.items() if p != path and not p.startswith(path + "/")}

    def move(self, src: str, dst: str, overwrite: bool = False) -> None:
        self.calls.append(("move", src))
        self.files = {
            (dst + p[len(src) :] if p == src or p.startswith(src + "/") else p): d for p, d in self.files.items()
        }

    def upload(self, remote: str, local: str, **_: Any) -> None:
        self.calls.append(("upload", remote))
        base = Path(local)
        for f in base.rglob("*") if base.is_dir() else [base]:
            if f.is_file():
                self.files[f"{remote}/{f.relative_to(base)}" if base.is_dir() else remote] = f.read_bytes()


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, n: int = -1) -> bytes:
        return self.data if n < 0 else self.data[:n]


class Router(namenodes.Router):
    """Two NameNodes: the default one and ``hdfs://ml``; any other authority is an error."""

    def __init__(self, default: Fs, ml: Fs) -> None:
        self.by = {None: default, "hdfs://tony": default, "hdfs://ml": ml}

    def for_location(self, location: str) -> Fs:
        return self.by[namenodes.authority_of(location)]


def test_inputs_are_listed_and_copied_from_their_own_namenode(tmp_path: Path) -> None:
    default = Fs({"/data/a/part-0": b"a" * 5})
    ml = Fs({"/data/a/part-0": b"m" * 7, "/data/a/part-1": b"n" * 3})
    spec = JobSpec.from_dict(
        {
            "roles": {"worker": {"module": "m"}},
            "inputs": {"here": {"path": "/data/a"}, "there": {"path": "hdfs://ml/data/a"}},
        }
    )
    env, staged = inputs.stage_inputs(Router(default, ml), spec, "worker:0", tmp_path, {}, lambda m: None)
    assert {s.name: (s.files, s.bytes) for s in staged} == {"here": (1, 5), "there": (2, 10)}
    assert (tmp_path / "inputs" / "there" / "part-0").read_bytes() == b"m" * 7
    assert ("read", "/data/a/part-1") in ml.calls and ("read", "/data/a/part-1") not in default.calls


def _checkpoint(fs: Fs, folder: str, step: int) -> None:
    name = f"{folder}/{checkpoint.remote_name(step)}"
    fs.files[f"{name}/checkpoint"] = f'model_checkpoint_path: "ckpt-{step}"\n'.encode()
    fs.files[f"{name}/ckpt-{step}.index"] = b"i" * 64
    fs.files[f"{name}/ckpt-{step}.data-00000-of-00001"] = b"d" * 10


def test_a_warm_start_on_another_namenode_is_restored_from_there(tmp_path: Path) -> None:
    default, ml = Fs(), Fs()
    _checkpoint(default, "/runs/yesterday", 5)  # the same path on the default NameNode: not the warm start
    _checkpoint(ml, "/runs/yesterday", 9)

    def download(source: str, local: str, **_: Any) -> None:
        for path, data in ml.files.items():
            if path.startswith(source + "/"):
                target = Path(local) / path[len(source) + 1 :]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)

    ml.download = download  # type: ignore[attr-defined]
    local = tmp_path / "ckpt"
    found = checkpoint.restore_latest(Router(default, ml), ["/runs/today", "hdfs://ml/runs/yesterday"], local)
    assert found == (9, "/runs/yesterday/ckpt-000000000009")
    assert not any(path.startswith("/runs/yesterday") for _op, path in default.calls)


def _gated_spec(model_dir: str, record: str | None = None) -> JobSpec:
    gate_spec: dict[str, Any] = {"metric": "acc", "mode": "max", **({"record": record} if record else {})}
    return JobSpec.from_dict(
        {"roles": {"worker": {"module": "m"}}, "checkpoint": {"model_dir": model_dir}, "quality_gate": gate_spec}
    )


def test_the_gate_publishes_on_the_model_dirs_namenode_and_the_pointer_on_the_records(tmp_path: Path) -> None:
    spec = _gated_spec("hdfs://ml/models/m", record="/pointers/m.json")
    default, ml = Fs(), Fs()
    record = gate.ModelRecord("app_1", 3, {"acc": 0.9}, "", 1.0)
    ml.files[f"{gate.candidate_dir('hdfs://ml/models/m', 'app_1')}/{gate.MODEL_METADATA}"] = record.to_json()
    ml.files[f"{gate.candidate_dir('hdfs://ml/models/m', 'app_1')}/saved_model.pb"] = b"pb"
    verdict = gate.apply(Router(default, ml), spec, "app_1", now=2.0)
    assert verdict.passed and verdict.model_dir == "/models/m.versions/app_1"
    assert "/models/m.versions/app_1/saved_model.pb" in ml.files
    assert "/pointers/m.json" in default.files and "/pointers/m.json" not in ml.files
    assert not any(path.startswith("/models") for _op, path in default.calls)


def test_without_a_record_the_gate_compares_with_the_model_published_before_versions_on_its_namenode() -> None:
    spec = _gated_spec("hdfs://ml/models/m")
    default, ml = Fs(), Fs()
    ml.files[f"/models/m/{gate.MODEL_METADATA}"] = gate.ModelRecord("app_0", 1, {"acc": 0.95}, "", 1.0).to_json()
    candidate = gate.candidate_dir("hdfs://ml/models/m", "app_1")
    ml.files[f"{candidate}/{gate.MODEL_METADATA}"] = gate.ModelRecord("app_1", 3, {"acc": 0.9}, "", 1.0).to_json()
    verdict = gate.apply(Router(default, ml), spec, "app_1", now=2.0)
    assert not verdict.passed and verdict.previous == 0.95 and verdict.model_dir == "/models/m.rejected-app_1"
    assert not default.calls


def test_the_model_is_exported_to_its_namenode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = JobSpec.from_dict({"roles": {"worker": {"module": "m"}}, "checkpoint": {"model_dir": "hdfs://ml/models/m"}})
    (tmp_path / executor.MODEL_DIR).mkdir()
    (tmp_path / executor.MODEL_DIR / "saved_model.pb").write_bytes(b"pb")
    default, ml = Fs(), Fs()

    class App:
        kv: dict[str, bytes] = {}

    code, tail = executor.export_model(App(), spec, tmp_path, {}, "worker:0", 0, [], "1-0-1", Router(default, ml))
    assert (code, tail) == (0, [])
    assert "/models/m/saved_model.pb" in ml.files and not default.calls


def test_the_history_beside_checkpoints_on_another_namenode_is_written_there() -> None:
    default, ml = Fs(), Fs()
    paths = ["hdfs://ml/ckpt/run/history/app_1.json", "/user/a/tony/history/app_1.json"]
    written = write_history(Router(default, ml), paths, JobHistory())
    assert written == ["/ckpt/run/history/app_1.json", "/user/a/tony/history/app_1.json"]
    assert list(ml.files) == ["/ckpt/run/history/app_1.json"]
    assert list(default.files) == ["/user/a/tony/history/app_1.json"]


class _Started:
    """Stands for a sync or a watch thread: records the client it was given and starts nothing."""

    made: list[_Started] = []

    def __init__(self, client: Any = None, *args: Any, **kwargs: Any) -> None:
        self.client = client
        _Started.made.append(self)

    def start(self) -> None:
        pass


def test_checkpoint_uploads_and_events_go_to_the_checkpoint_dirs_namenode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = JobSpec.from_dict({"roles": {"worker": {"module": "m"}}, "checkpoint": {"dir": "hdfs://ml/ckpt/run"}})
    task = executor.ContainerTask(
        app=SimpleNamespace(kv={}), spec=spec, env={}, role="worker", index=0, generation=0, workdir=tmp_path
    )
    default, ml = Fs(), Fs()
    monkeypatch.setattr(checkpoint, "DirSync", _Started)
    monkeypatch.setattr(checkpoint, "CheckpointSync", _Started)
    monkeypatch.setattr(executor, "DrainWatch", _Started)
    _Started.made = []
    events = checkpoint.events_remote(spec, "/user/a/tony/tensorboard", "app_1")
    executor.start_events(task, Router(default, ml), events)
    executor.start_uploads(task, Router(default, ml), SimpleNamespace(fail=None, stop=None), None, False)
    assert [s.client for s in _Started.made[:2]] == [ml, ml]
