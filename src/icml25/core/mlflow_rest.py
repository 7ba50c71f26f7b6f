"""A minimal MLflow tracking client over MLflow's REST API (``/api/2.0/mlflow``), using only the standard library.

Why: importing ``mlflow`` and opening its SQLAlchemy store costs a stage job about 2.5 s (mostly imports), which
dominates small jobs. When the pipeline logs to a tracking server — the cluster's, or the local one the Snakefile
starts for the length of a run — jobs talk to it with this client instead and pay a few milliseconds. It covers
exactly what stage jobs and the store set-up do: find/create/tag an experiment, trash the empty ``Default``
experiment, create a run, log a batch, log dataset/model inputs (``runs/log-inputs``), create, tag, finalize a
LoggedModel and link it to its run as an output (``logged-models``, ``runs/outputs``), upload an artifact (of a run
or a LoggedModel), end a run.
Everything else (reading runs, the UI) uses MLflow itself.

Credentials, as MLflow's own client reads them: ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD`` (basic
auth, e.g. a server started with ``icml25 server --auth``) or ``MLFLOW_TRACKING_TOKEN`` (bearer), or
``user:password@`` in the tracking URI. They are sent as an ``Authorization`` header and never appear in a message:
URLs in errors are printed with :func:`redact`.

Artifacts: ``mlflow-artifacts:/...`` run URIs are uploaded through the server's artifact proxy (HTTP PUT);
``file://`` URIs (experiments created with a local artifact location) are written directly, atomically.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

#: (key, value, timestamp ms, step[, model_id[, dataset_name, dataset_digest]]): a model_id also records the value
#: on that LoggedModel (computed on that dataset, when given: the Models tab's Dataset column)
Metric = tuple
#: A dataset input: ``{"name", "digest", "source_type", "source", "schema", "profile"}`` (strings) and its input
#: tags ``{"mlflow.data.context": "training"}``, as MLflow's ``DatasetInput`` proto.
DatasetInput = tuple[dict, dict]


_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")


def redact(text: str) -> str:
    """``text`` with the ``user:password@`` part of every URL in it replaced by ``***@``."""
    return _USERINFO.sub("***@", str(text))


def split_credentials(uri: str) -> tuple[str, str | None, str | None]:
    """``(uri without userinfo, user, password)`` of ``http(s)://user:password@host...``."""
    parsed = urllib.parse.urlsplit(uri)
    if parsed.username is None and parsed.password is None:
        return uri, None, None
    host = parsed.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parsed.port}" if parsed.port else "")
    clean = urllib.parse.urlunsplit((parsed.scheme, netloc, parsed.path, parsed.query, parsed.fragment))
    return clean, urllib.parse.unquote(parsed.username or ""), urllib.parse.unquote(parsed.password or "")


def auth_header(user: str | None = None, password: str | None = None,
                env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``Authorization`` header MLflow's client would send: explicit credentials, else
    ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD`` (basic), else ``MLFLOW_TRACKING_TOKEN`` (bearer)."""
    env = os.environ if env is None else env
    user = user if user is not None else env.get("MLFLOW_TRACKING_USERNAME")
    password = password if password is not None else env.get("MLFLOW_TRACKING_PASSWORD")
    if user is not None and password is not None:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
    if env.get("MLFLOW_TRACKING_TOKEN"):
        return {"Authorization": f"Bearer {env['MLFLOW_TRACKING_TOKEN']}"}
    return {}


class RestError(RuntimeError):
    """The tracking server answered with an error (the message carries MLflow's error code). ``status`` 0: no
    answer at all (connection refused, timeout)."""

    def __init__(self, status: int, body: str, url: str) -> None:
        super().__init__(redact(f"{url}: HTTP {status}: {body[:500]}"))
        self.status, self.body = status, body

    @property
    def outage(self) -> bool:
        """The server did not answer, or failed (5xx): the request may succeed later."""
        return self.status == 0 or self.status >= 500


class RestTracking:
    """Stage-job operations against an MLflow tracking server at ``base`` (``http(s)://host:port``).

    ``retries`` (default ``$ICML25_TRACKING_RETRIES`` or 8) on connection errors and 5xx, with backoff (0.2 s
    doubling, ≤ 5 s: about 20 s in all for 8)."""

    def __init__(self, base: str, timeout: float = 60.0, retries: int | None = None) -> None:
        base, user, password = split_credentials(base.rstrip("/"))
        self.base, self.timeout = base, timeout
        self.retries = int(os.environ.get("ICML25_TRACKING_RETRIES", "8")) if retries is None else retries
        self._auth = auth_header(user, password)

    def _call(self, method: str, path: str, payload: Mapping[str, Any] | None = None,
              query: Mapping[str, str] | None = None, data: bytes | None = None) -> dict:
        url = f"{self.base}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        body = data if data is not None else (json.dumps(payload).encode() if payload is not None else None)
        headers = {**({"Content-Type": "application/json"} if data is None else {}), **self._auth}
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

    def create_run(self, experiment_id: str, run_name: str, tags: Mapping[str, str],
                   start_time: int | None = None) -> tuple[str, str]:
        """Create a RUNNING run (``start_time`` ms, default now); return ``(run_id, artifact_uri)``."""
        info = self._call("POST", "/api/2.0/mlflow/runs/create", {
            "experiment_id": experiment_id, "run_name": run_name,
            "start_time": start_time or int(time.time() * 1000), "tags": _kv(tags)})["run"]["info"]
        return info["run_id"], info["artifact_uri"]

    def log_batch(self, run_id: str, metrics: Iterable[Metric] = (), params: Iterable[tuple[str, str]] = (),
                  tags: Iterable[tuple[str, str]] = ()) -> None:
        """One ``log-batch`` call (callers keep within 1000 metrics / 100 params+tags). A metric with a fifth
        element (a LoggedModel id) is recorded on that model too, with the dataset of elements 6-7 if given."""
        self._call("POST", "/api/2.0/mlflow/runs/log-batch", {
            "run_id": run_id,
            "metrics": [{"key": m[0], "value": m[1], "timestamp": m[2], "step": m[3],
                         **({"model_id": m[4]} if len(m) > 4 and m[4] else {}),
                         **({"dataset_name": m[5], "dataset_digest": m[6]} if len(m) > 6 and m[5] else {})}
                        for m in metrics],
            "params": [{"key": k, "value": v} for k, v in params],
            "tags": [{"key": k, "value": v} for k, v in tags]})

    def set_terminated(self, run_id: str, status: str = "FINISHED", end_time: int | None = None) -> None:
        self._call("POST", "/api/2.0/mlflow/runs/update",
                   {"run_id": run_id, "status": status, "end_time": end_time or int(time.time() * 1000)})

    def running_runs(self, invocation: str) -> list[str]:
        """Ids of the RUNNING runs tagged ``invocation`` in every ``icml25/*`` experiment."""
        exps = self._call("POST", "/api/2.0/mlflow/experiments/search",
                          {"max_results": 1000, "filter": "name LIKE 'icml25/%'"}).get("experiments", [])
        if not exps:
            return []
        out, token = [], None
        while True:
            page = self._call("POST", "/api/2.0/mlflow/runs/search", {
                "experiment_ids": [e["experiment_id"] for e in exps], "max_results": 1000,
                "filter": f"tags.invocation = '{invocation}' and attributes.status = 'RUNNING'",
                **({"page_token": token} if token else {})})
            out += [r["info"]["run_id"] for r in page.get("runs", [])]
            token = page.get("next_page_token")
            if not token:
                return out

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

    def log_inputs(self, run_id: str, datasets: Iterable[DatasetInput] = (), models: Iterable[str] = ()) -> None:
        """Record datasets (``(dataset, input tags)``) and LoggedModels (ids) as the run's inputs.

        Two jobs that log the same new dataset of an experiment at once race in the store (it checks, then
        inserts: one gets a UNIQUE-constraint error); the loser retries and then finds the dataset."""
        payload = {"run_id": run_id, "datasets": [{"dataset": dict(ds), "tags": _kv(tags)} for ds, tags in datasets],
                   "models": [{"model_id": m} for m in models]}
        for attempt in range(5):
            try:
                self._call("POST", "/api/2.0/mlflow/runs/log-inputs", payload)
                return
            except RestError as err:
                if not is_dataset_race(err) or attempt == 4:
                    raise
                time.sleep(0.1 * (attempt + 1))

    def create_logged_model(self, experiment_id: str, name: str, source_run_id: str | None = None,
                            params: Mapping[str, str] | None = None, tags: Mapping[str, str] | None = None,
                            model_type: str | None = None) -> tuple[str, str]:
        """Create a PENDING LoggedModel; return ``(model_id, artifact_uri)``. Params beyond the first 100 go in
        further ``params`` calls."""
        items = list((params or {}).items())
        model = self._call("POST", "/api/2.0/mlflow/logged-models", {
            "experiment_id": experiment_id, "name": name, "tags": _kv(tags or {}),
            "params": _kv(dict(items[:100])),
            **({"source_run_id": source_run_id} if source_run_id else {}),
            **({"model_type": model_type} if model_type else {})})["model"]["info"]
        for i in range(100, len(items), 100):
            self.log_model_params(model["model_id"], dict(items[i:i + 100]))
        return model["model_id"], model["artifact_uri"]

    def log_model_params(self, model_id: str, params: Mapping[str, str]) -> None:
        self._call("POST", f"/api/2.0/mlflow/logged-models/{urllib.parse.quote(model_id)}/params",
                   {"model_id": model_id, "params": _kv(params)})

    def set_model_tags(self, model_id: str, tags: Mapping[str, str]) -> None:
        self._call("PATCH", f"/api/2.0/mlflow/logged-models/{urllib.parse.quote(model_id)}/tags",
                   {"model_id": model_id, "tags": _kv(tags)})

    def finalize_logged_model(self, model_id: str, status: str = "READY") -> None:
        """Mark the LoggedModel ``READY`` (or ``FAILED``)."""
        self._call("PATCH", f"/api/2.0/mlflow/logged-models/{urllib.parse.quote(model_id)}",
                   {"model_id": model_id, "status": f"LOGGED_MODEL_{status}"})

    def log_outputs(self, run_id: str, models: Iterable[str], step: int = 0) -> None:
        """Link LoggedModels (ids) to the run as its outputs (the runs table's Models column)."""
        self._call("POST", "/api/2.0/mlflow/runs/outputs",
                   {"run_id": run_id, "models": [{"model_id": m, "step": step} for m in models]})

    def log_model_artifact(self, model_id: str, artifact_uri: str, local: str | Path,
                           artifact_path: str | None = None) -> None:
        """Upload a file or a directory's files to the LoggedModel whose artifact root is ``artifact_uri``."""
        self.log_artifact(model_id, artifact_uri, local, artifact_path)

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
            raise RestError(400, f"artifact URI scheme {parsed.scheme!r} is not handled by the REST client", "")


def is_dataset_race(err: BaseException) -> bool:
    """Whether ``err`` is the store's answer to two concurrent inserts of the same dataset (retry: it exists now)."""
    text = str(getattr(err, "body", "") or err)
    return "UNIQUE constraint failed: datasets" in text or ("Duplicate entry" in text and "datasets" in text)


def _kv(mapping: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"key": k, "value": str(v)} for k, v in mapping.items()]
