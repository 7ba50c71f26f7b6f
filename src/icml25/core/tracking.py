"""MLflow tracking for stage jobs: one run per job, grouped under one parent run per study per invocation.

MLflow records, Snakemake decides: nothing here is read back to decide what to run.

* Store: ``MLFLOW_TRACKING_URI`` if set (the SLURM profile points it at a server), else the configured URI, else
  ``sqlite:///<results>/mlflow.db``. A SQLite store keeps its artifacts beside it (``<store dir>/mlartifacts/<slug>``,
  whichever clone creates the experiment); a server keeps them where its ``--artifacts-destination`` says.
* Outages: stage jobs log through :class:`~icml25.core.spool.SpoolingClient`, so a store that is away never fails
  a job; what could not be written is journaled under ``<results>/.tracking/spool/`` and replayed later.
* A fresh SQLite store is created by exactly one process (:func:`init_store`, called from the Snakefile's
  ``onstart`` and, under a file lock, lazily by a hand-run stage); several processes creating it at once
  corrupt it for good. The store is switched to WAL journaling so concurrent writers wait instead of failing,
  and every write is retried on "database is locked".
* Experiment per study ``icml25/<slug>``, tagged as a model-training experiment (``mlflow.experimentKind``)
  so MLflow 3's UI opens it in its training view; the empty ``Default`` experiment MLflow creates with a store is
  deleted (moved to the trash, hidden from the UI) by :func:`init_store`.
* Runs nest in three levels: the parent run per study per invocation (``pipeline/<invocation>``; the Snakefile
  sets ``ICML25_INVOCATION``; parents are created under a lock and recorded in
  ``<results>/.tracking/parents.json``), one run per stage job (``<stage>[/<arm>][/seed<k>]``), and, in a job
  that loops over seeds (or arms), one nested run per seed (:meth:`StageRun.seed_run`, tag ``seed``) or arm
  (:meth:`StageRun.child`). Metric keys never carry a seed or an arm: ``train/<metric>`` (with the step),
  ``eval/<metric>``, ``preprocess/<metric>``; the run's tags say which seed/arm it is (docs/DESIGN.md).
* Train runs log the trained model with :meth:`StageRun.log_model`: small files as artifacts under ``model/``
  with the config beside them, large ones by path, size and sha256 (tags ``model_*``).
* Metrics are buffered and written with ``log_batch`` (≤ 1000 per call), which keeps 16 concurrent jobs on one
  SQLite file cheap and lossless.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import mlflow_native as native
from .config import config_hash, flatten
from .io import file_lock

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("MLFLOW_ENABLE_ASYNC_LOGGING", "false")

ENV_URI = "MLFLOW_TRACKING_URI"
ENV_INVOCATION = "ICML25_INVOCATION"
PREFIX = "icml25"
SUMMARY = "summary"
#: The experiment tag MLflow 3's UI reads for an experiment's kind, and the value of a model-training experiment
#: (the UI's own choice, "custom_model_development", the kind it also writes when a user picks "Model training").
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
EXPERIMENT_KIND = "custom_model_development"
#: Query string that opens MLflow 3.x UI pages (3.10+ has a GenAI / model-training switch) in the training view.
UI_QUERY = "?workflowType=machine_learning"
DEFAULT_EXPERIMENT_ID = "0"
#: Models up to this size are uploaded as run artifacts; larger ones are recorded by path, size and sha256.
MODEL_ARTIFACT_MAX_BYTES = 50 * 2**20
_RETRY_SECONDS = 180.0


def experiment_name(slug: str) -> str:
    """``icml25/<slug>``."""
    return f"{PREFIX}/{slug}"


def run_name(stage: str, arm: str | None = None, seed: int | None = None) -> str:
    """``<stage>[/<arm>][/seed<k>]``."""
    parts = [stage] + ([arm] if arm else []) + ([f"seed{seed}"] if seed is not None else [])
    return "/".join(parts)


def resolve_tracking_uri(results_dir: str | Path = "results", configured: str | None = None) -> str:
    """Environment first (``MLFLOW_TRACKING_URI``), then ``configured``, then the local SQLite store."""
    return os.environ.get(ENV_URI) or configured or f"sqlite:///{Path(results_dir).resolve() / 'mlflow.db'}"


def _sqlite_path(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def _is_transient(err: BaseException) -> bool:
    text = str(err).lower()
    return any(s in text for s in ("database is locked", "database table is locked", "busy", "unable to open"))


def _retry(fn, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; on a transient SQLite lock error retry with jittered backoff for up to 3 minutes."""
    deadline, delay = time.monotonic() + _RETRY_SECONDS, 0.05
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - MLflow wraps SQLAlchemy errors in several types
            if not _is_transient(err) or time.monotonic() > deadline:
                raise
            time.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 2.0)




def _client(uri: str):
    from mlflow.tracking import MlflowClient

    return _retry(MlflowClient, tracking_uri=uri)


class _MlflowBackend:
    """The stage-job operations through ``MlflowClient`` (any store: SQLite, server, ...)."""

    def __init__(self, uri: str) -> None:
        self.client = _client(uri)

    def experiment_id(self, name: str, artifact_location: str | None = None,
                      tags: Mapping[str, str] | None = None) -> str:
        exp = _retry(self.client.get_experiment_by_name, name)
        if exp is not None:
            return exp.experiment_id
        try:
            return _retry(self.client.create_experiment, name, artifact_location=artifact_location, tags=tags)
        except Exception:  # created concurrently by another process
            exp = _retry(self.client.get_experiment_by_name, name)
            if exp is None:
                raise
            return exp.experiment_id

    def create_run(self, experiment_id: str, run_name: str, tags: Mapping[str, str],
                   start_time: int | None = None) -> tuple[str, str]:
        run = _retry(self.client.create_run, experiment_id, run_name=run_name, tags=dict(tags),
                     start_time=start_time)
        return run.info.run_id, run.info.artifact_uri

    def log_batch(self, run_id: str, metrics=(), params=(), tags=()) -> None:
        from mlflow.entities import Metric, Param, RunTag

        _retry(self.client.log_batch, run_id,
               metrics=[Metric(*m[:4], model_id=m[4] if len(m) > 4 and m[4] else None,
                               dataset_name=m[5] if len(m) > 6 else None,
                               dataset_digest=m[6] if len(m) > 6 else None) for m in metrics],
               params=[Param(*p) for p in params], tags=[RunTag(*t) for t in tags])

    def log_inputs(self, run_id: str, datasets=(), models=()) -> None:
        from mlflow.entities import Dataset, DatasetInput, InputTag, LoggedModelInput

        inputs = [DatasetInput(Dataset(d["name"], d["digest"], d["source_type"], d["source"], d.get("schema"),
                                       d.get("profile")), [InputTag(k, v) for k, v in tags.items()])
                  for d, tags in datasets]
        from .mlflow_rest import is_dataset_race

        for attempt in range(5):  # two jobs inserting the same new dataset race in the store (see RestTracking)
            try:
                _retry(self.client.log_inputs, run_id, datasets=inputs or None,
                       models=[LoggedModelInput(m) for m in models] or None)
                return
            except Exception as err:  # noqa: BLE001 - MLflow wraps the IntegrityError
                if not is_dataset_race(err) or attempt == 4:
                    raise
                time.sleep(0.1 * (attempt + 1))

    def create_logged_model(self, experiment_id: str, name: str, source_run_id: str | None = None,
                            params=None, tags=None, model_type: str | None = None) -> tuple[str, str]:
        model = _retry(self.client.create_logged_model, experiment_id, name=name, source_run_id=source_run_id,
                       tags=dict(tags or {}), params=dict(params or {}) or None, model_type=model_type)
        return model.model_id, model.artifact_location

    def log_model_params(self, model_id: str, params) -> None:
        _retry(self.client.log_model_params, model_id, dict(params))

    def set_model_tags(self, model_id: str, tags) -> None:
        _retry(self.client.set_logged_model_tags, model_id, dict(tags))

    def finalize_logged_model(self, model_id: str, status: str = "READY") -> None:
        _retry(self.client.finalize_logged_model, model_id, status)

    def log_outputs(self, run_id: str, models, step: int = 0) -> None:
        from mlflow.entities import LoggedModelOutput

        _retry(self.client.log_outputs, run_id, [LoggedModelOutput(m, step) for m in models])

    def log_model_artifact(self, model_id: str, artifact_uri: str, local: Path, artifact_path: str | None = None
                           ) -> None:
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        repo = get_artifact_repository(artifact_uri)
        local = Path(local)
        if local.is_dir():
            _retry(repo.log_artifacts, str(local), "/".join(p for p in (artifact_path, local.name) if p))
        else:
            _retry(repo.log_artifact, str(local), artifact_path)

    def set_terminated(self, run_id: str, status: str = "FINISHED", end_time: int | None = None) -> None:
        _retry(self.client.set_terminated, run_id, status, end_time=end_time)

    def running_runs(self, invocation: str) -> list[str]:
        """Ids of the RUNNING runs tagged ``invocation`` in every ``icml25/*`` experiment."""
        exps = [e.experiment_id for e in _retry(self.client.search_experiments, max_results=1000)
                if e.name.startswith(f"{PREFIX}/")]
        if not exps:
            return []
        runs = _retry(self.client.search_runs, exps, max_results=50000,
                      filter_string=f"tags.invocation = '{invocation}' and attributes.status = 'RUNNING'")
        return [r.info.run_id for r in runs]

    def log_artifact(self, run_id: str, artifact_uri: str, local: Path, artifact_path: str | None = None) -> None:
        fn = self.client.log_artifacts if local.is_dir() else self.client.log_artifact
        _retry(fn, run_id, str(local), artifact_path if not local.is_dir() else
               "/".join(p for p in (artifact_path, local.name) if p))

    def set_experiment_tag(self, experiment_id: str, key: str, value: str) -> None:
        _retry(self.client.set_experiment_tag, experiment_id, key, value)

    def delete_empty_default_experiment(self) -> bool:
        """Delete (move to the trash) experiment ``0`` if it is active and holds no run; True if it was."""
        from mlflow.entities import ViewType

        try:
            exp = _retry(self.client.get_experiment, DEFAULT_EXPERIMENT_ID)
        except Exception:  # noqa: BLE001 - absent (a server or store without it)
            return False
        if exp is None or exp.lifecycle_stage != "active":
            return False
        if _retry(self.client.search_runs, [DEFAULT_EXPERIMENT_ID], max_results=1, run_view_type=ViewType.ALL):
            return False
        _retry(self.client.delete_experiment, DEFAULT_EXPERIMENT_ID)
        return True


def backend(uri: str):
    """The cheapest client for ``uri``: the stdlib REST client for a tracking server, MLflow's otherwise."""
    if uri.startswith(("http://", "https://")):
        from .mlflow_rest import RestTracking

        return RestTracking(uri)
    return _MlflowBackend(uri)


def init_store(uri: str, slugs: list[str] | tuple[str, ...], results_dir: str | Path = "results") -> dict[str, str]:
    """Create the store (once, under a lock), WAL mode for SQLite, and the experiments; return ``{slug: id}``.

    Idempotent; safe to call from many processes. For a SQLite store each experiment gets an explicit artifact
    location ``<results>/mlartifacts/<slug>``; a tracking server chooses its own (``--artifacts-destination``).
    """
    results_dir = Path(results_dir).resolve()
    db = _sqlite_path(uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(db.with_name(db.name + ".lock")):
            client = backend(uri)  # creates the schema if the file is new
            import sqlite3

            with contextlib.closing(sqlite3.connect(db, timeout=60)) as con:
                con.execute("PRAGMA journal_mode=WAL")
    else:
        client = backend(uri)
    ids = {slug: _experiment_id(client, slug, results_dir, uri) for slug in slugs}
    for exp_id in ids.values():  # experiments made before the kind tag existed get it too
        client.set_experiment_tag(exp_id, EXPERIMENT_KIND_TAG, EXPERIMENT_KIND)
    # MLflow creates an empty "Default" experiment (id 0) with every new store (SqlAlchemyStore.__init__, also
    # under `mlflow server`) and recreates it only if it is missing, not if it is deleted: deleting it once
    # hides it from the UI for good. A Default experiment that holds runs is the user's and stays.
    client.delete_empty_default_experiment()
    return ids


def artifact_root(uri: str) -> Path | None:
    """Where a SQLite store's artifacts live: ``mlartifacts/`` beside the database file (so every clone that
    shares the store shares its artifacts, none writes into another's results); None for other stores."""
    db = _sqlite_path(uri)
    return db.resolve().parent / "mlartifacts" if db is not None else None


def _experiment_id(client, slug: str, results_dir: Path, uri: str) -> str:
    """Get or create ``icml25/<slug>``; a SQLite store gets the artifact location ``<store dir>/mlartifacts/<slug>``,
    a server chooses its own (``--artifacts-destination``)."""
    root = artifact_root(uri)
    location = (root / slug).as_uri() if root is not None else None
    return client.experiment_id(experiment_name(slug), location, {"study": slug, EXPERIMENT_KIND_TAG: EXPERIMENT_KIND})


def tracking_client(uri: str, results_dir: str | Path):
    """The client stage jobs use: :func:`backend` behind a :class:`~icml25.core.spool.SpoolingClient`."""
    from .spool import SpoolingClient

    return SpoolingClient(lambda: backend(uri), uri, results_dir)


@lru_cache(maxsize=1)
def git_sha() -> str:
    """HEAD's sha of the checkout the running code comes from (``+dirty`` if modified), or ``unknown`` outside git
    (git runs in the package's directory, not the working directory, which may be a project copy outside git)."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             check=True, cwd=here).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=5, cwd=here).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _parent_run(client, uri: str, slug: str, experiment_id: str, results_dir: Path, tags: Mapping[str, str]) -> str | None:
    """The parent run of ``slug`` for this invocation, created once under a file lock; None if no invocation."""
    invocation = os.environ.get(ENV_INVOCATION)
    if not invocation:
        return None
    registry = results_dir / ".tracking" / "parents.json"
    with file_lock(registry.with_suffix(".lock")):
        data = json.loads(registry.read_text()) if registry.exists() else {}
        key = f"{invocation}|{uri}|{slug}"
        if key not in data:
            run_id, _ = client.create_run(experiment_id, f"pipeline/{invocation}",
                                          {**tags, "stage": "pipeline", "invocation": invocation})
            data[key] = run_id
            tmp = registry.with_suffix(".tmp")
            tmp.write_text(json.dumps(data, indent=1))
            os.replace(tmp, registry)
        return data[key]


def finish_invocation(status: str = "FINISHED", results_dir: str | Path = "results",
                      uri: str | None = None) -> int:
    """Replay spooled tracking, then terminate this invocation's parent runs (``FINISHED`` or ``FAILED``; a
    store that is away gets them through the spool); return how many were closed."""
    from .spool import replay

    replay(results_dir)
    invocation = os.environ.get(ENV_INVOCATION)
    registry = Path(results_dir).resolve() / ".tracking" / "parents.json"
    if not invocation or not registry.exists():
        return 0
    uri = uri or resolve_tracking_uri(results_dir)
    data = json.loads(registry.read_text())
    run_ids = [rid for key, rid in data.items() if key.startswith(f"{invocation}|{uri}|")]
    if run_ids:
        client = tracking_client(uri, results_dir)
        for rid in run_ids:
            client.set_terminated(rid, status)
        if client.journal is not None:
            replay(results_dir)
    return len(run_ids)


class StageRun:
    """Handle of one MLflow run (a stage job's, or one nested under it); metrics are buffered and written in
    batches.

    ``experiment_id`` and ``tags`` (the run's own tags, without the parent link) let :meth:`child` open nested
    runs that carry the same study/stage/scale tags.
    """

    def __init__(self, client, run_id: str, artifact_uri: str, flush_every: int = 1000, *,
                 experiment_id: str | None = None, tags: Mapping[str, str] | None = None,
                 parent_run_id: str | None = None) -> None:
        self.client, self.run_id, self.artifact_uri, self.flush_every = client, run_id, artifact_uri, flush_every
        self.parent_run_id = parent_run_id
        self.experiment_id = experiment_id
        self.tags = dict(tags or {})
        self._metrics: list[tuple[str, float, int, int]] = []
        self._last_flush = time.monotonic()
        self._latest: dict[str, tuple[float, int, int]] = {}  # key -> (value, timestamp, step) last logged
        self.model_ids: list[str] = []  # LoggedModels this run produced (log_model)
        #: registry entries of the models the evaluate job read: its runs' metrics go to the model they describe
        self.input_models: list[dict[str, Any]] = []
        self.datasets: list[tuple[str, str]] = []  # (name, digest) of the job's dataset inputs
        self.store = ""  # the store the registry names (set by stage_run)
        self.results_dir: Path | None = None
        self.seeds: tuple[int, ...] = ()

    @contextlib.contextmanager
    def child(self, *, arm: str | None = None, seed: int | None = None,
              tags: Mapping[str, Any] | None = None) -> Iterator[StageRun]:
        """Open a run nested under this one (``mlflow.parentRunId``), named ``<stage>[/<arm>][/seed<k>]`` and
        tagged like this run plus ``arm``/``seed``; it ends FINISHED, or FAILED if the block raises.

        Use it where one job loops over seeds or arms, so that every seed logs the same metric keys
        (``train/loss``) in its own run instead of putting the seed in the key.
        """
        if self.experiment_id is None:
            raise RuntimeError("StageRun.child: this run was opened without its experiment id")
        arm = arm if arm is not None else self.tags.get("arm")
        own = {**self.tags, "arm": arm, "seed": seed, "run_level": "nested", **(tags or {})}
        own = {k: str(v) for k, v in own.items() if v is not None}
        run_id, artifact_uri = self.client.create_run(
            self.experiment_id, run_name(own.get("stage", "stage"), arm, seed),
            {**own, "mlflow.parentRunId": self.run_id})
        handle = StageRun(self.client, run_id, artifact_uri, self.flush_every, experiment_id=self.experiment_id,
                          tags=own, parent_run_id=self.parent_run_id)
        handle.input_models, handle.datasets = self.input_models, self.datasets
        handle.store, handle.results_dir = self.store, self.results_dir
        handle.seeds = (seed,) if seed is not None else self.seeds
        with _ended(handle):
            yield handle

    @contextlib.contextmanager
    def seed_run(self, seed: int) -> Iterator[StageRun]:
        """The run that records seed ``seed``: this run itself when the job runs that one seed only (tag ``seed``
        already set, e.g. ``seeds_per_job: 1``), else a nested run (:meth:`child`) tagged ``seed``."""
        if self.tags.get("seed") == str(seed):
            yield self
        else:
            with self.child(seed=seed) as run:
                yield run

    def log_model(self, path: str | Path, config: Any = None, *, max_bytes: int | None = None) -> dict[str, Any]:
        """Record the trained model at ``path`` (a file or a directory) and the config it was trained with.

        Up to ``max_bytes`` (default :data:`MODEL_ARTIFACT_MAX_BYTES`) the model is uploaded as run artifacts
        under ``model/`` with ``model/config.json`` beside it; a larger one stays where it is and is recorded by
        path, size and sha256 only (a directory's sha256 hashes its files' relative paths and sha256s, sorted).
        Either way the tags ``model_path``, ``model_bytes``, ``model_sha256``, ``model_logged`` (``artifact`` or
        ``path``) are set. Returns those tags.
        """
        import hashlib
        import tempfile

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"log_model: {path} does not exist")
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        size = sum(f.stat().st_size for f in files)
        if path.is_file():
            digest = _sha256(path)
        else:
            lines = "".join(f"{f.relative_to(path).as_posix()} {_sha256(f)}\n" for f in files)
            digest = hashlib.sha256(lines.encode()).hexdigest()
        limit = MODEL_ARTIFACT_MAX_BYTES if max_bytes is None else max_bytes
        info = {"model_path": str(path), "model_bytes": size, "model_sha256": digest,
                "model_logged": "artifact" if size <= limit else "path"}
        self.set_tags(info)
        if size <= limit:
            self.log_artifact(path, "model")
        plain = None
        with tempfile.TemporaryDirectory() as tmp:
            cfg = Path(tmp) / "config.json"
            if config is not None:
                from .config import to_dict

                plain = config.model_dump(mode="json") if hasattr(config, "model_dump") else to_dict(config)
                cfg.write_text(json.dumps(plain, indent=1, sort_keys=True, default=str))
                self.log_artifact(cfg, "model")
            if native.enabled() and self.experiment_id is not None:
                self._logged_model(path, info, plain, cfg if config is not None else None, size <= limit)
        return info

    def _logged_model(self, path: Path, info: Mapping[str, Any], config: Any, cfg_file: Path | None,
                      upload: bool) -> str:
        """The MLflow 3 LoggedModel of a model logged by :meth:`log_model`: the study config as params, tags
        (study, stage, arm, seeds, ``model_*``, source), the files (or, above the size limit, only their path,
        size and sha256: an external model), READY, linked to this run as its output; recorded in the model
        registry so the evaluate job can link it. Loading it back stays the study's own safe loader
        (``torch.load(weights_only=True)``, json, npz): no MLmodel flavour, no pickled code."""
        t = self.tags
        seeds = list(self.seeds) or ([int(t["seed"])] if t.get("seed", "").isdigit() else [])
        seed_text = (f"s{seeds[0]}" if len(seeds) == 1 else f"s{seeds[0]}-{seeds[-1]}") if seeds else ""
        name = "-".join(x for x in (t.get("study"), t.get("arm") or t.get("stage"), seed_text,
                                    Path(path).stem) if x)
        name = re_sub_bad(name)[:200] or "model"
        params = {k: str(v)[:6000] for k, v in flatten(config).items()} if isinstance(config, Mapping) else {}
        tags = {k: v for k, v in t.items() if k in ("study", "stage", "arm", "scale", "data_source", "config_hash",
                                                     "git_sha") or k.startswith("mlflow.source.")}
        tags |= {k: str(v) for k, v in info.items()} | {"seeds": " ".join(map(str, seeds)),
                                                         "model_external": str(not upload).lower()}
        if self.datasets:
            tags["trained_on"] = "; ".join(f"{n}@{d}" for n, d in self.datasets)[:8000]
        model_id, model_uri = self.client.create_logged_model(
            self.experiment_id, name, self.run_id, params=params, tags=tags,
            model_type=f"icml25/{t.get('study', '')}")
        if upload:
            self.client.log_model_artifact(model_id, model_uri, path)
        if cfg_file is not None:
            self.client.log_model_artifact(model_id, model_uri, cfg_file)
        self.client.finalize_logged_model(model_id, "READY")
        self.client.log_outputs(self.run_id, [model_id])
        self.model_ids.append(model_id)
        if self.results_dir is not None:
            native.register_model(self.results_dir, self.store, path, {
                "model_id": model_id, "experiment_id": self.experiment_id, "arm": t.get("arm"), "seeds": seeds,
                "sha256": info["model_sha256"], "datasets": [list(d) for d in self.datasets]})
        return model_id

    def _attach_metrics_to_models(self) -> None:
        """At the end of the run: its latest metric values go on the models they describe — the models this run
        produced, and, in an evaluate job, the model one arm (and seed) was evaluated on
        (:func:`~icml25.core.mlflow_native.matching_models`)."""
        if not native.enabled():
            return
        targets = list(self.model_ids)
        if self.input_models:
            targets += native.matching_models(self.input_models, self.tags.get("arm"), self.tags.get("seed"))
        latest = [(k, v, ts, step) for k, (v, ts, step) in self._latest.items()]
        # computed on one dataset (the job read exactly one): the model's metrics name it (Models tab, Dataset)
        data = tuple(self.datasets[0]) if len(self.datasets) == 1 else ()
        for model_id in dict.fromkeys(targets):
            for i in range(0, len(latest), 1000):
                self.client.log_batch(self.run_id, metrics=[(*m, model_id, *data) for m in latest[i:i + 1000]])

    def log_table(self, rows: Sequence[Mapping[str, Any]], columns: Sequence[str], artifact_file: str) -> None:
        """Log ``rows`` as a table artifact ``artifact_file`` (``.json``) the way ``MlflowClient.log_table`` does:
        the pandas ``orient="split"`` JSON plus the ``mlflow.loggedArtifacts`` tag, so the run's artifact view
        shows a sortable table. Without MLflow or pandas (stage jobs log over REST)."""
        import tempfile

        if not artifact_file.endswith(".json"):
            raise ValueError(f"log_table: {artifact_file!r}: the table file must end in .json")
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / Path(artifact_file).name
            local.write_text(json.dumps(native.table_json(rows, columns)))
            parent = str(Path(artifact_file).parent)
            self.log_artifact(local, None if parent == "." else parent)
        self._tables = [*getattr(self, "_tables", []), artifact_file]
        self.set_tags({native.LOGGED_ARTIFACTS: native.logged_artifacts_tag(self._tables)})

    def log_params(self, params: Mapping[str, Any]) -> None:
        """Log params (nested mappings are flattened with dots; values are stringified, ≤ 6000 chars)."""
        items = [(k, str(v)[:6000]) for k, v in flatten(params).items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i:i + 100])

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        """Set tags (values stringified); None values are skipped."""
        items = [(k, str(v)) for k, v in tags.items() if v is not None]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, tags=items[i:i + 100])

    def log_metric(self, key: str, value: float, step: int = 0) -> None:
        """Buffer one metric value at ``step``; flushed in batches."""
        ts = int(time.time() * 1000)
        self._metrics.append((key, float(value), ts, int(step)))
        self._latest[key] = (float(value), ts, int(step))
        if len(self._metrics) >= self.flush_every or time.monotonic() - self._last_flush > 30:
            self.flush()

    def log_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Buffer several metrics at one step."""
        for key, value in metrics.items():
            self.log_metric(key, value, step)

    def log_parent_metrics(self, metrics: Mapping[str, float], step: int = 0) -> None:
        """Write metrics on the study's parent run of this invocation now (no-op without one): the study-level
        record, e.g. ``verdicts/<key>`` from the evaluate job."""
        if self.parent_run_id is None:
            return
        ts = int(time.time() * 1000)
        self.client.log_batch(self.parent_run_id,
                              metrics=[(k, float(v), ts, int(step)) for k, v in metrics.items()])

    def set_parent_tags(self, tags: Mapping[str, Any]) -> None:
        """Set tags on the study's parent run of this invocation too (no-op without one), e.g. a label every run of
        the study must carry; values stringified, None skipped."""
        if self.parent_run_id is None:
            return
        items = [(k, str(v)) for k, v in tags.items() if v is not None]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.parent_run_id, tags=items[i:i + 100])

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """Upload a file, or a directory (as ``<artifact_path>/<dir name>/...``)."""
        self.client.log_artifact(self.run_id, self.artifact_uri, Path(path), artifact_path)

    def flush(self) -> None:
        """Write buffered metrics (log_batch, 1000 per call)."""
        while self._metrics:
            batch, self._metrics = self._metrics[:1000], self._metrics[1000:]
            self.client.log_batch(self.run_id, metrics=batch)
        self._last_flush = time.monotonic()


def re_sub_bad(name: str) -> str:
    """A LoggedModel name: MLflow refuses ``/ : . % " '``; they become ``_``."""
    import re

    return re.sub(r"[/:.%\"']", "_", name)


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def stage_run(slug: str, stage: str, *, arm: str | None = None, seed: int | None = None, scale: str = "",
              data_source: str = "", config: Any = None, tags: Mapping[str, Any] | None = None,
              results_dir: str | Path = "results", uri: str | None = None, inputs: Sequence[Path] = (),
              outputs: Sequence[Path] = (), seeds: Sequence[int] = ()) -> Iterator[StageRun]:
    """Open the MLflow run of one stage job; mark it FINISHED, FAILED or KILLED (SIGTERM) on exit.

    ``config`` (dataclass or mapping) is logged flattened as params, and its hash as tag ``config_hash``.
    ``inputs`` (the job's ``--in`` paths) are logged as the run's dataset inputs (data files) and model inputs
    (LoggedModels of the train jobs); when ``outputs`` hold a ``claims.json``, the experiment's description (and
    the parent run's) is refreshed from it at the end. ``seeds``: the job's seeds (tag of its LoggedModels).
    See :mod:`icml25.core.mlflow_native`.
    """
    results_dir = Path(results_dir).resolve()
    uri = uri or resolve_tracking_uri(results_dir)
    db = _sqlite_path(uri)
    if db is not None and not db.exists():
        init_store(uri, [slug], results_dir)
    client = tracking_client(uri, results_dir)
    experiment_id = _experiment_id(client, slug, results_dir, uri)
    base_tags = {"study": slug, "scale": scale, "data_source": data_source, "git_sha": git_sha(),
                 "host": socket.gethostname()}
    on = native.enabled()
    if on:
        base_tags |= native.source_tags(slug, stage)
    all_tags = {
        **base_tags, "stage": stage, "arm": arm, "seed": seed,
        "config_hash": config_hash(config) if config is not None else None,
        "snakemake_rule": os.environ.get("ICML25_RULE"), "snakemake_jobid": os.environ.get("ICML25_JOBID"),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"), "invocation": os.environ.get(ENV_INVOCATION),
        **(tags or {}),
    }
    parent_tags = {**base_tags, native.SOURCE_NAME: native.source_tags(slug, "pipeline")[native.SOURCE_NAME],
                   native.NOTE: native.parent_note(slug, scale, os.environ.get(ENV_INVOCATION, ""))} if on else base_tags
    parent = _parent_run(client, uri, slug, experiment_id, results_dir, parent_tags)
    all_tags["run_level"] = "job"
    own = {k: str(v) for k, v in all_tags.items() if v is not None}
    run_id, artifact_uri = client.create_run(experiment_id, run_name(stage, arm, seed),
                                             {**own, **({"mlflow.parentRunId": parent} if parent else {})})
    handle = StageRun(client, run_id, artifact_uri, experiment_id=experiment_id, tags=own, parent_run_id=parent)
    handle.results_dir, handle.store, handle.seeds = results_dir, client.store_uri, tuple(seeds)
    if config is not None:
        from .config import to_dict

        handle.log_params(to_dict(config))
    if on and inputs:
        _log_stage_inputs(handle, slug, stage, inputs, results_dir)
    previous = signal.getsignal(signal.SIGTERM)

    def _on_term(signum, frame):  # SLURM and Snakemake stop jobs with SIGTERM
        raise SystemExit(128 + signum)

    with contextlib.suppress(ValueError):  # not in the main thread
        signal.signal(signal.SIGTERM, _on_term)
    try:
        with _ended(handle):
            yield handle
            claims = [Path(p) for p in outputs if Path(p).name == "claims.json" and Path(p).exists()]
            if on and claims:
                describe_experiment(handle, slug, claims[0], scale)
    finally:  # after the run is terminated: a SIGTERM during the final flush still ends it KILLED
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGTERM, previous)


def _log_stage_inputs(handle: StageRun, slug: str, stage: str, inputs: Sequence[Path], results_dir: Path) -> None:
    """Dataset inputs (data files) and model inputs (the train jobs' LoggedModels) of a stage job, one
    ``log-inputs`` call. An evaluate job that reads only models gets the models' training datasets as its dataset
    inputs (context ``evaluation``): the data its numbers come from."""
    datasets, entries = native.stage_inputs(inputs, slug, stage, results_dir, handle.store)
    resolve = getattr(handle.client, "_resolve", lambda x: x)
    for e in entries:
        e["model_id"] = resolve(e["model_id"])
    handle.input_models = entries
    if not datasets and entries:
        seen: dict[tuple[str, str], None] = {}
        for e in entries:
            for name, digest in e.get("datasets") or []:
                seen[(name, digest)] = None
        datasets = [({"name": n, "digest": d, "source_type": "local",
                      "source": json.dumps({"via": "the evaluated models' training data"})},
                     {native.CONTEXT_TAG: native.context(stage)}) for n, d in seen]
    handle.datasets = [(d["name"], d["digest"]) for d, _ in datasets]
    if datasets or entries:
        handle.client.log_inputs(handle.run_id, datasets=datasets, models=[e["model_id"] for e in entries])


def describe_experiment(handle: StageRun, slug: str, claims_path: Path, scale: str) -> None:
    """Refresh ``mlflow.note.content`` of the experiment ``icml25/<slug>`` (paper, method, claims and verdicts per
    scale, README path) from ``claims_path`` and the study's claims at the other scales, and that of the study's
    parent run (scale, invocation, verdict counts)."""
    from .claims import verdict_counts

    docs = native.claims_by_scale(claims_path, slug)
    if not docs:
        return
    note = native.experiment_note(slug, docs, f"src/icml25/studies/{slug}/README.md",
                                  native.STUDIES_DIR / slug / "README.md")
    handle.client.set_experiment_tag(handle.experiment_id, native.NOTE, note)
    doc = docs.get(scale) or next(iter(docs.values()))
    handle.set_parent_tags({native.NOTE: native.parent_note(
        slug, scale, os.environ.get(ENV_INVOCATION, ""), verdict_counts(doc))})


@contextlib.contextmanager
def _ended(handle: StageRun) -> Iterator[StageRun]:
    """Yield ``handle``; on exit flush it and terminate its run: FINISHED, KILLED (SIGTERM, Ctrl-C, SystemExit)
    or FAILED (any other exception, re-raised)."""
    status = "FAILED"
    try:
        yield handle
        status = "FINISHED"
    except (KeyboardInterrupt, SystemExit):
        status = "KILLED"
        raise
    finally:
        try:
            handle.flush()
            if status == "FINISHED":
                handle._attach_metrics_to_models()
        finally:
            handle.client.set_terminated(handle.run_id, status)
