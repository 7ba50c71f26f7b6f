"""A minimal MLflow tracking client over MLflow's REST API (``/api/2.0/mlflow``), using only the standard library.

Why: importing ``mlflow`` and opening its SQLAlchemy store costs a stage job about 2.5 s (mostly imports), which
dominates small jobs. When the pipeline logs to a tracking server — the cluster's, or the local one the Snakefile
starts for the length of a run — jobs talk to it with this client instead and pay a few milliseconds. It covers
exactly what stage jobs and the store set-up do: find/create/tag an experiment, trash the empty ``Default``
experiment, create a run, log a batch, upload an artifact, end a run.
Everything else (reading runs, the UI) uses MLflow itself.

Artifacts: ``mlflow-artifacts:/...`` run URIs are uploaded through the server's artifact proxy (HTTP PUT);
``file://`` URIs (experiments created with a local artifact location) are written directly, atomically.
"""
from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

Metric = tuple[str, float, int, int]  # key, value, timestamp (ms), step


class RestError(RuntimeError):
    """The tracking server answered with an error (the message carries MLflow's error code)."""

    def __init__(self, status: int, body: str, url: str) -> None:
        super().__init__(f"{url}: HTTP {status}: {body[:500]}")
        self.status, self.body = status, body


class RestTracking:
    """Stage-job operations against an MLflow tracking server at ``base`` (``http(s)://host:port``)."""

    def __init__(self, base: str, timeout: float = 60.0, retries: int = 8) -> None:
        self.base, self.timeout, self.retries = base.rstrip("/"), timeout, retries

    def _call(self, method: str, path: str, payload: Mapping[str, Any] | None = None,
              query: Mapping[str, str] | None = None, data: bytes | None = None) -> dict:
        url = f"{self.base}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        body = data if data is not None else (json.dumps(payload).encode() if payload is not None else None)
        headers = {"Content-Type": "application/json"} if data is None else {}
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    text = response.read().decode() or "{}"
                    return json.loads(text) if text.strip().startswith("{") else {}
            except urllib.error.HTTPError as err:
                text = err.read().decode(errors="replace")
                if err.code < 500 or attempt == self.retries:  # 4xx are answers, not outages
                    raise RestError(err.code, text, url) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
                if attempt == self.retries:
                    raise RestError(0, str(err), url) from err
            time.sleep(min(0.2 * 2 ** attempt, 5.0))
        raise AssertionError("unreachable")

    def experiment_id(self, name: str, artifact_location: str | None = None,
                      tags: Mapping[str, str] | None = None) -> str:
        """Id of experiment ``name``, created if missing (a concurrent creation by another job is fine)."""
        try:
            return self._call("GET", "/api/2.0/mlflow/experiments/get-by-name",
                              query={"experiment_name": name})["experiment"]["experiment_id"]
        except RestError as err:
            if "RESOURCE_DOES_NOT_EXIST" not in err.body:
                raise
        payload: dict[str, Any] = {"name": name, "tags": _kv(tags or {})}
        if artifact_location:
            payload["artifact_location"] = artifact_location
        try:
            return self._call("POST", "/api/2.0/mlflow/experiments/create", payload)["experiment_id"]
        except RestError as err:
            if "RESOURCE_ALREADY_EXISTS" not in err.body:
                raise
            return self.experiment_id(name)

    def create_run(self, experiment_id: str, run_name: str, tags: Mapping[str, str]) -> tuple[str, str]:
        """Create a RUNNING run; return ``(run_id, artifact_uri)``."""
        info = self._call("POST", "/api/2.0/mlflow/runs/create", {
            "experiment_id": experiment_id, "run_name": run_name, "start_time": int(time.time() * 1000),
            "tags": _kv(tags)})["run"]["info"]
        return info["run_id"], info["artifact_uri"]

    def log_batch(self, run_id: str, metrics: Iterable[Metric] = (), params: Iterable[tuple[str, str]] = (),
                  tags: Iterable[tuple[str, str]] = ()) -> None:
        """One ``log-batch`` call (callers keep within 1000 metrics / 100 params+tags)."""
        self._call("POST", "/api/2.0/mlflow/runs/log-batch", {
            "run_id": run_id,
            "metrics": [{"key": k, "value": v, "timestamp": ts, "step": s} for k, v, ts, s in metrics],
            "params": [{"key": k, "value": v} for k, v in params],
            "tags": [{"key": k, "value": v} for k, v in tags]})

    def set_terminated(self, run_id: str, status: str = "FINISHED") -> None:
        self._call("POST", "/api/2.0/mlflow/runs/update",
                   {"run_id": run_id, "status": status, "end_time": int(time.time() * 1000)})

    def log_artifact(self, run_id: str, artifact_uri: str, local: str | Path, artifact_path: str | None = None
                     ) -> None:
        """Upload a file, or a directory's files recursively (as ``<artifact_path>/<dir name>/...``), to the run
        whose artifact root is ``artifact_uri``."""
        local = Path(local)
        files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
        for f in files:
            rel = f.name if local.is_file() else f"{local.name}/{f.relative_to(local).as_posix()}"
            dest = "/".join(p for p in (artifact_path, rel) if p)
            self._put(artifact_uri, f, dest)

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        self._call("POST", "/api/2.0/mlflow/experiments/set-experiment-tag",
                   {"experiment_id": experiment_id, "key": key, "value": str(value)})

    def delete_empty_default_experiment(self) -> bool:
        """Delete (move to the trash) experiment ``0`` (MLflow's ``Default``) if it is active and holds no run."""
        try:
            exp = self._call("GET", "/api/2.0/mlflow/experiments/get", query={"experiment_id": "0"})["experiment"]
        except RestError as err:
            if err.status == 0 or err.status >= 500:
                raise
            return False
        if exp.get("lifecycle_stage") != "active":
            return False
        found = self._call("POST", "/api/2.0/mlflow/runs/search",
                           {"experiment_ids": ["0"], "max_results": 1, "run_view_type": "ALL"})
        if found.get("runs"):
            return False
        self._call("POST", "/api/2.0/mlflow/experiments/delete", {"experiment_id": "0"})
        return True

    def _put(self, artifact_uri: str, src: Path, dest: str) -> None:
        parsed = urllib.parse.urlparse(artifact_uri)
        if parsed.scheme == "file":
            target = Path(urllib.request.url2pathname(parsed.path)) / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.part")
            shutil.copyfile(src, tmp)
            tmp.replace(target)
        elif parsed.scheme == "mlflow-artifacts":
            path = urllib.parse.quote(f"{parsed.path.lstrip('/')}/{dest}")
            self._call("PUT", f"/api/2.0/mlflow-artifacts/artifacts/{path}", data=src.read_bytes())
        else:
            raise RestError(0, f"artifact URI scheme {parsed.scheme!r} is not handled by the REST client", "")


def _kv(mapping: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "value": str(v)} for k, v in mapping.items()]
