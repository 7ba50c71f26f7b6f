"""Tracking that loses nothing: a local spool for tracking outages, its replay, and the runs of killed pipelines.

* :class:`SpoolingClient` wraps a tracking backend (``core.tracking.backend``). While the store answers, calls go
  through. On the first outage (no answer, a 5xx, a locked or unreachable store) the job does not fail: this call
  and every later one of the process are appended to a journal ``<results>/.tracking/spool/<id>.jsonl`` (artifacts
  copied beside it), with placeholder ids (``spool-...``) for runs and LoggedModels created while the store is
  away. Dataset/model inputs, LoggedModels (create, params, tags, finalize, artifacts), run outputs and
  experiment tags are journaled and replayed like metrics and artifacts.
* :func:`replay` writes journals into the store they were meant for, in order, resolving placeholders
  (``spool/ids.json`` maps them to real run ids, shared by all journals, so a parent run created by one job while
  the store was away is found by the others). It stops at the first outage and resumes there next time
  (``<journal>.done`` counts the operations written). The Snakefile replays at the start and the end of every
  invocation.
* :func:`register_invocation` / :func:`mark_killed_invocations`: each invocation records its pid; the next one
  marks every RUNNING run of an invocation whose process is gone as KILLED (runs of a pipeline still running, or
  started on another host, are left alone).

Journals name the store by ``ICML25_STORE_URI`` when set (the Snakefile sets it to the SQLite store its local
server serves, so a journal outlives the server's port), else by the tracking URI.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import time
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .io import file_lock

log = logging.getLogger("icml25")

ENV_STORE = "ICML25_STORE_URI"
PLACEHOLDER = "spool-"


def spool_dir(results_dir: str | Path) -> Path:
    return Path(results_dir).resolve() / ".tracking" / "spool"


def is_outage(err: BaseException) -> bool:
    """Whether ``err`` means "the store is not reachable now" (retry later) rather than "the request is wrong"."""
    from .mlflow_rest import RestError

    if isinstance(err, RestError):
        return err.outage
    if isinstance(err, (OSError, ConnectionError, TimeoutError)):
        return True
    seen: BaseException | None = err
    while seen is not None:
        name, text = type(seen).__name__, str(seen).lower()
        if name in ("OperationalError", "DisconnectionError", "TimeoutError", "ConnectionError") or any(
                s in text for s in ("database is locked", "unable to open", "disk i/o", "connection refused",
                                    "max retries exceeded", "temporarily unavailable", "503", "502")):
            return True
        seen = seen.__cause__ or seen.__context__
    return False




def _read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _pending(*ids: str) -> bool:
    """Whether any of ``ids`` is a placeholder (of a run, experiment or model the store has not seen yet)."""
    return any(isinstance(i, str) and i.startswith(PLACEHOLDER) for i in ids)


def _now_ms() -> int:
    return int(time.time() * 1000)


class SpoolingClient:
    """A tracking backend that journals instead of failing when the store is away (see the module doc).

    ``make_backend``: builds the real backend (called lazily, so a store that cannot even be opened is an
    outage too). ``uri``: where the calls go; ``store_uri``: the store the journal is replayed into."""

    def __init__(self, make_backend: Callable[[], Any], uri: str, results_dir: str | Path,
                 store_uri: str | None = None) -> None:
        self._make, self._real = make_backend, None
        self.uri, self.store_uri = uri, store_uri or os.environ.get(ENV_STORE) or uri
        self.dir = spool_dir(results_dir)
        self.offline = False
        self.journal: Path | None = None
        self._n_files = 0

    # -- plumbing -------------------------------------------------------------------------------------------
    def _backend(self):
        if self._real is None:
            self._real = self._make()
        return self._real

    def _try(self, op: str, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
        """(True, result) if the store took the call; (False, None) after an outage (now offline)."""
        if self.offline:
            return False, None
        try:
            return True, getattr(self._backend(), op)(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - classified below
            if not is_outage(err):
                raise
            from .mlflow_rest import redact

            log.warning("tracking store unreachable (%s); this job's tracking goes to %s and is replayed when "
                        "the store answers again", redact(str(err).splitlines()[0][:300]), self.dir)
            self.offline = True
            return False, None

    def _record(self, entry: dict) -> None:
        if self.journal is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            name = f"{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}-{os.getpid()}"
            self.journal = self.dir / f"{name}.jsonl"
            self._append({"op": "header", "store": self.store_uri, "host": socket.gethostname(),
                          "pid": os.getpid()})
        self._append(entry)

    def _append(self, entry: dict) -> None:
        assert self.journal is not None
        with open(self.journal, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _resolve(self, value: str) -> str:
        """A placeholder id mapped to its real id once replayed (else unchanged)."""
        if isinstance(value, str) and value.startswith(PLACEHOLDER):
            return _read_json(self.dir / "ids.json", {}).get(value, [value])[0]
        return value

    # -- the backend interface ------------------------------------------------------------------------------
    def experiment_id(self, name: str, artifact_location: str | None = None,
                      tags: dict[str, str] | None = None) -> str:
        ok, exp = self._try("experiment_id", name, artifact_location, tags)
        if ok:
            return exp
        placeholder = f"{PLACEHOLDER}exp:{name}"
        self._record({"op": "experiment", "id": placeholder, "name": name, "location": artifact_location,
                      "tags": dict(tags or {})})
        return placeholder

    def create_run(self, experiment_id: str, run_name: str, tags: dict[str, str]) -> tuple[str, str]:
        tags = {k: self._resolve(v) if k == "mlflow.parentRunId" else v for k, v in tags.items()}
        start = _now_ms()
        pending = any(str(v).startswith(PLACEHOLDER) for v in (experiment_id, tags.get("mlflow.parentRunId", "")))
        if not pending:
            ok, out = self._try("create_run", experiment_id, run_name, tags)
            if ok:
                return out
        placeholder = f"{PLACEHOLDER}{uuid.uuid4().hex}"
        self._record({"op": "create_run", "id": placeholder, "experiment_id": experiment_id, "run_name": run_name,
                      "tags": tags, "start_time": start})
        return placeholder, ""

    def log_batch(self, run_id: str, metrics=(), params=(), tags=()) -> None:
        metrics, params, tags = list(metrics), list(params), list(tags)
        metrics = [(*m[:4], self._resolve(m[4]), *m[5:]) if len(m) > 4 and m[4] else tuple(m[:4]) for m in metrics]
        if not _pending(run_id, *(m[4] for m in metrics if len(m) > 4)):
            ok, _ = self._try("log_batch", run_id, metrics=metrics, params=params, tags=tags)
            if ok:
                return
        self._record({"op": "log_batch", "run_id": run_id, "metrics": metrics, "params": params, "tags": tags})

    def set_terminated(self, run_id: str, status: str = "FINISHED") -> None:
        run_id = self._resolve(run_id)
        end = _now_ms()
        if not run_id.startswith(PLACEHOLDER):
            ok, _ = self._try("set_terminated", run_id, status)
            if ok:
                return
        self._record({"op": "set_terminated", "run_id": run_id, "status": status, "end_time": end})

    def log_artifact(self, run_id: str, artifact_uri: str, local: Path, artifact_path: str | None = None,
                     op: str = "log_artifact") -> None:
        local = Path(local)
        if not run_id.startswith(PLACEHOLDER):
            ok, _ = self._try(op, run_id, artifact_uri, local, artifact_path)
            if ok:
                return
        self._record({"op": "noop"})  # creates the journal (and its name) before the copy
        assert self.journal is not None
        self._n_files += 1
        keep = self.journal.with_suffix(".files") / str(self._n_files) / local.name
        keep.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if local.is_dir() else shutil.copy2)(local, keep)
        self._record({"op": op, "run_id": run_id, "artifact_uri": artifact_uri, "path": str(keep),
                      "artifact_path": artifact_path})

    # -- MLflow 3's datasets and LoggedModels (issue 40), journaled like the rest ------------------------------
    def _call_or_record(self, entry: dict, ids: tuple[str, ...], *args: Any, **kwargs: Any) -> tuple[bool, Any]:
        """Send ``entry["op"]`` unless an id in ``ids`` is still a placeholder or the store is away; else journal
        ``entry``. Returns ``(sent, result)``."""
        if not _pending(*ids):
            ok, out = self._try(entry["op"], *args, **kwargs)
            if ok:
                return True, out
        self._record(entry)
        return False, None

    def log_inputs(self, run_id: str, datasets=(), models=()) -> None:
        datasets = [[dict(d), dict(t)] for d, t in datasets]
        models = [self._resolve(m) for m in models]
        self._call_or_record({"op": "log_inputs", "run_id": run_id, "datasets": datasets, "models": models},
                             (run_id, *models), run_id, datasets=[tuple(x) for x in datasets], models=models)

    def create_logged_model(self, experiment_id: str, name: str, source_run_id: str | None = None,
                            params=None, tags=None, model_type: str | None = None) -> tuple[str, str]:
        source_run_id = self._resolve(source_run_id) if source_run_id else None
        placeholder = f"{PLACEHOLDER}m-{uuid.uuid4().hex}"
        entry = {"op": "create_logged_model", "id": placeholder, "experiment_id": experiment_id, "name": name,
                 "source_run_id": source_run_id, "params": dict(params or {}), "tags": dict(tags or {}),
                 "model_type": model_type}
        sent, out = self._call_or_record(entry, (experiment_id, source_run_id or ""), experiment_id, name,
                                         source_run_id, params=dict(params or {}), tags=dict(tags or {}),
                                         model_type=model_type)
        return out if sent else (placeholder, "")

    def log_model_params(self, model_id: str, params) -> None:
        model_id = self._resolve(model_id)
        self._call_or_record({"op": "log_model_params", "model_id": model_id, "params": dict(params)},
                             (model_id,), model_id, dict(params))

    def set_model_tags(self, model_id: str, tags) -> None:
        model_id = self._resolve(model_id)
        self._call_or_record({"op": "set_model_tags", "model_id": model_id, "tags": dict(tags)},
                             (model_id,), model_id, dict(tags))

    def finalize_logged_model(self, model_id: str, status: str = "READY") -> None:
        model_id = self._resolve(model_id)
        self._call_or_record({"op": "finalize_logged_model", "model_id": model_id, "status": status},
                             (model_id,), model_id, status)

    def log_outputs(self, run_id: str, models, step: int = 0) -> None:
        models = [self._resolve(m) for m in models]
        self._call_or_record({"op": "log_outputs", "run_id": run_id, "models": models, "step": step},
                             (run_id, *models), run_id, models, step)

    def log_model_artifact(self, model_id: str, artifact_uri: str, local: Path, artifact_path: str | None = None
                           ) -> None:
        self.log_artifact(self._resolve(model_id), artifact_uri, local, artifact_path, op="log_model_artifact")

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        self._call_or_record({"op": "set_experiment_tag", "experiment_id": experiment_id, "key": key,
                              "value": value}, (experiment_id,), experiment_id, key, value)


# -- replay ---------------------------------------------------------------------------------------------------

def pending(results_dir: str | Path) -> list[Path]:
    """Journals not yet replayed, oldest first."""
    d = spool_dir(results_dir)
    return sorted(d.glob("*.jsonl")) if d.is_dir() else []


def replay(results_dir: str | Path, make_backend: Callable[[str], Any] | None = None) -> tuple[int, int]:
    """Write every pending journal into its store; return ``(journals replayed, journals left)``.

    A journal whose store does not answer is kept (and the ones after it for the same store), to be tried again;
    ``make_backend(uri)`` defaults to ``core.tracking.backend``. Safe to call from several processes (a lock)."""
    from .tracking import backend

    make_backend = make_backend or backend
    d = spool_dir(results_dir)
    done = left = 0
    if not pending(results_dir):
        return 0, 0
    with file_lock(d / "replay.lock"):
        clients: dict[str, Any] = {}
        down: set[str] = set()
        for journal in pending(results_dir):
            lines = [json.loads(line) for line in journal.read_text(encoding="utf-8").splitlines() if line.strip()]
            if not lines or lines[0].get("op") != "header":
                log.warning("%s: not a tracking journal, left in place", journal)
                left += 1
                continue
            store = lines[0]["store"]
            if store in down:
                left += 1
                continue
            try:
                if store not in clients:
                    clients[store] = make_backend(store)
                _replay_one(journal, lines, clients[store], d)
            except KeyError as err:
                left += 1
                log.warning("%s: refers to run %s that no journal created; left in place", journal.name, err)
                continue
            except Exception as err:  # noqa: BLE001
                if not is_outage(err):
                    raise
                from .mlflow_rest import redact

                down.add(store)
                left += 1
                log.warning("tracking store %s still unreachable (%s); %s kept for later", redact(store),
                            redact(str(err).splitlines()[0][:200]), journal.name)
                continue
            done += 1
            for extra in (journal.with_suffix(".done"), journal.with_suffix(".files")):
                if extra.is_dir():
                    shutil.rmtree(extra)
                else:
                    extra.unlink(missing_ok=True)
            journal.unlink()
        _fix_parents(Path(results_dir).resolve() / ".tracking" / "parents.json", d)
    return done, left


def _replay_one(journal: Path, lines: list[dict], client: Any, d: Path) -> None:
    from .tracking import artifact_root

    store = lines[0]["store"]
    ids_file, progress = d / "ids.json", journal.with_suffix(".done")
    ids: dict[str, list[str]] = _read_json(ids_file, {})
    start = int(progress.read_text() or 0) if progress.exists() else 0

    def real(value: str) -> str:
        if isinstance(value, str) and value.startswith(PLACEHOLDER):
            if value not in ids:
                raise KeyError(value)
            return ids[value][0]
        return value

    for i, entry in enumerate(lines[1:], start=1):
        if i <= start:
            continue
        op = entry["op"]
        if op == "experiment":
            ids[entry["id"]] = [client.experiment_id(entry["name"], entry.get("location"), entry.get("tags")), ""]
        elif op == "create_run":
            tags = dict(entry["tags"])
            parent = tags.get("mlflow.parentRunId")
            if parent and parent.startswith(PLACEHOLDER) and parent not in ids:
                tags.pop("mlflow.parentRunId")  # its creator's journal is gone; keep the run, drop the link
            elif parent:
                tags["mlflow.parentRunId"] = real(parent)
            exp = entry["experiment_id"]
            if exp.startswith(PLACEHOLDER) and exp not in ids:
                exp = client.experiment_id(exp[len(f"{PLACEHOLDER}exp:"):])
            run_id, artifact_uri = client.create_run(real(exp), entry["run_name"], tags,
                                                     start_time=entry.get("start_time"))
            ids[entry["id"]] = [run_id, artifact_uri]
        elif op == "log_batch":
            client.log_batch(real(entry["run_id"]),
                             metrics=[(*m[:4], real(m[4]), *m[5:]) if len(m) > 4 and m[4] else tuple(m)
                                      for m in entry["metrics"]],
                             params=[tuple(p) for p in entry["params"]], tags=[tuple(t) for t in entry["tags"]])
        elif op == "set_terminated":
            client.set_terminated(real(entry["run_id"]), entry["status"], end_time=entry.get("end_time"))
        elif op == "log_inputs":
            client.log_inputs(real(entry["run_id"]), datasets=[tuple(x) for x in entry["datasets"]],
                              models=[real(m) for m in entry["models"]])
        elif op == "create_logged_model":
            exp = entry["experiment_id"]
            if exp.startswith(PLACEHOLDER) and exp not in ids:
                exp = client.experiment_id(exp[len(f"{PLACEHOLDER}exp:"):])
            source = entry.get("source_run_id")
            ids[entry["id"]] = list(client.create_logged_model(
                real(exp), entry["name"], real(source) if source else None, params=entry.get("params"),
                tags=entry.get("tags"), model_type=entry.get("model_type")))
        elif op == "log_model_params":
            client.log_model_params(real(entry["model_id"]), entry["params"])
        elif op == "set_model_tags":
            client.set_model_tags(real(entry["model_id"]), entry["tags"])
        elif op == "finalize_logged_model":
            client.finalize_logged_model(real(entry["model_id"]), entry["status"])
        elif op == "log_outputs":
            client.log_outputs(real(entry["run_id"]), [real(m) for m in entry["models"]], entry.get("step", 0))
        elif op == "set_experiment_tag":
            client.set_experiment_tag(real(entry["experiment_id"]), entry["key"], entry["value"])
        elif op in ("log_artifact", "log_model_artifact"):
            run = entry["run_id"]
            uri = ids[run][1] if run.startswith(PLACEHOLDER) else entry["artifact_uri"]
            root = artifact_root(store)
            if uri.startswith("mlflow-artifacts:") and root is not None:
                # a run created through the local server, replayed into the SQLite store it served: its
                # proxied artifacts live under the server's destination, the root beside the store
                from .mlflow_rest import RestTracking

                local_uri = (root / urllib.parse.urlparse(uri).path.lstrip("/")).as_uri()
                RestTracking("http://unused").log_artifact(real(run), local_uri, Path(entry["path"]),
                                                           entry.get("artifact_path"))
            else:
                getattr(client, op)(real(run), uri, Path(entry["path"]), entry.get("artifact_path"))
        _write_json(ids_file, ids)
        progress.write_text(str(i))


def _fix_parents(registry: Path, d: Path) -> None:
    """Replace placeholders in ``parents.json`` by the real ids of replayed parent runs."""
    if not registry.exists():
        return
    ids = _read_json(d / "ids.json", {})
    with file_lock(registry.with_suffix(".lock")):
        data = _read_json(registry, {})
        fixed = {k: ids.get(v, [v])[0] for k, v in data.items()}
        if fixed != data:
            _write_json(registry, fixed)


# -- runs of killed invocations -------------------------------------------------------------------------------

def _proc_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (tells a reused pid apart), None if unknown."""
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return None


def _alive(record: dict) -> bool:
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    start = _proc_start(int(record["pid"]))
    return start is None or record.get("start") in (None, start)


def register_invocation(results_dir: str | Path, invocation: str, store_uri: str) -> Path:
    """Record that ``invocation`` runs in this process on this host, logging to ``store_uri``."""
    d = Path(results_dir).resolve() / ".tracking" / "invocations"
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{invocation}.json"
    _write_json(path, {"invocation": invocation, "pid": os.getpid(), "start": _proc_start(os.getpid()),
                       "host": socket.gethostname(), "store": store_uri})
    return path


def unregister_invocation(results_dir: str | Path, invocation: str) -> None:
    (Path(results_dir).resolve() / ".tracking" / "invocations" / f"{invocation}.json").unlink(missing_ok=True)


def mark_killed_invocations(results_dir: str | Path, current: str | None = None,
                            make_backend: Callable[[str], Any] | None = None) -> dict[str, int]:
    """Mark the RUNNING runs of every recorded invocation whose process is gone (same host) as KILLED; return
    ``{invocation: runs marked}``. Their records are removed once done; unreachable stores are tried next time."""
    from .tracking import backend

    make_backend = make_backend or backend
    d = Path(results_dir).resolve() / ".tracking" / "invocations"
    out: dict[str, int] = {}
    for path in sorted(d.glob("*.json")) if d.is_dir() else []:
        record = _read_json(path, None)
        if not record or record.get("invocation") == current:
            continue
        if record.get("host") != socket.gethostname() or _alive(record):
            continue
        try:
            client = make_backend(record["store"])
            run_ids = client.running_runs(record["invocation"])
            for run_id in run_ids:
                client.set_terminated(run_id, "KILLED")
        except Exception as err:  # noqa: BLE001
            if not is_outage(err):
                raise
            continue
        out[record["invocation"]] = len(run_ids)
        path.unlink(missing_ok=True)
    return out
