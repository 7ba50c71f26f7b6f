"""Helpers behind ``workflow/rules/common.smk``: study config resolution and the environment jobs inherit.

Kept in Python (not in the .smk) so they are unit-testable and the Snakefiles stay declarative.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import (SCALES, build, deep_merge, load_yaml, merge_scale, stage_params, study_schema, to_dict,
                     validate_schema)


def resolve_study(slug: str, config_cls: type, global_config: Mapping[str, Any], root: str | Path = ".") -> dict:
    """The merged study config (yaml common keys + ``scale`` + ``overrides.<slug>`` + global ``seeds`` and
    ``device``) as plain data, validated by the study's ``Config`` model; errors name the key. The top-level
    ``device`` (resolved: auto -> cuda when visible) replaces the study's device key unless ``overrides.<slug>``
    sets it (:mod:`icml25.core.device`).

    The yaml itself is first checked against the JSON schema generated from the model (so a bad key under any
    scale is reported with its place in the file), and every other scale of the yaml is built too, so a cross-key
    error of the paper scale shows in a smoke dry run rather than on the cluster.
    """
    root = Path(root)
    where = f"config/studies/{slug}.yaml"
    raw = load_yaml(root / where)
    validate_schema(raw, study_schema(config_cls, where), what=where)
    scale = global_config["scale"]
    for other in SCALES:
        if other != scale:
            build(config_cls, merge_scale(raw, other), path=f"{where}: scales.{other}: {slug}")
    user = (global_config.get("overrides") or {}).get(slug) or {}
    if global_config.get("rehearsal"):  # the paper DAG at rehearsal sizes: config/rehearsal/<slug>.yaml, then --config
        rehearsal_yaml = root / "config" / "rehearsal" / f"{slug}.yaml"
        if rehearsal_yaml.is_file():
            user = deep_merge(load_yaml(rehearsal_yaml) or {}, user)
    merged = merge_scale(raw, scale, user)
    if global_config.get("device") is not None:  # the one device switch (core.device): into the study's own key
        from .device import apply_device, resolve

        explicit_user = (global_config.get("overrides") or {}).get(slug)
        merged = apply_device(slug, merged, resolve(global_config["device"]), explicit_user)
    if global_config.get("seeds") is not None:
        merged["seeds"] = list(global_config["seeds"])
    return to_dict(build(config_cls, merged, path=slug))


def config_env_var(slug: str) -> str:
    """Environment variable holding a study's resolved config (json) for the jobs of one Snakemake run."""
    return f"ICML25_CONFIG_{slug.upper()}"


def export_study_configs(configs: Mapping[str, Mapping]) -> None:
    """Hand each study's whole resolved config to its jobs through the environment (``config_env_var``).

    Jobs validate the whole config with the study's model but see only their stage's keys; the rule's params
    hold only those keys (:func:`rule_params`), so Snakemake's params trigger follows exactly what a stage reads.
    The environment, unlike params or the shell command, is no rerun trigger. Remote jobs re-parse the Snakefile,
    which sets the same variables there.
    """
    import json

    for slug, cfg in configs.items():
        os.environ[config_env_var(slug)] = json.dumps(cfg, sort_keys=True, separators=(",", ":"))


def rule_params(config: Mapping, stage_keys: Mapping[str, Sequence[str]], slug: str, stage: str) -> dict[str, str]:
    """Params of a ``<slug>__<stage>`` rule: one ``key=value`` string per config key the stage declares."""
    if stage not in stage_keys:
        raise KeyError(f"{slug}: stage {stage!r} has no STAGE_KEYS entry in studies/{slug}/config.py "
                       f"(declared: {sorted(stage_keys)})")
    return stage_params(config, stage_keys[stage])


def seed_chunks(seeds: Sequence[int], per_job: int | None) -> dict[int, list[int]]:
    """Split seeds into train jobs of ``per_job`` seeds (None: one job with all): ``{chunk index: seeds}``."""
    per = per_job or len(seeds)
    return {i: list(seeds[k:k + per]) for i, k in enumerate(range(0, len(seeds), per))}


def export_job_env(results: str | Path, tracking_uri: str | None, src: str | Path | None) -> str:
    """Set the environment every job inherits: ``MLFLOW_TRACKING_URI`` (env > config > local SQLite) and
    ``PYTHONPATH`` including ``src`` (so jobs in a conda env holding only the dependencies find the package).
    Returns the tracking URI."""
    from .tracking import resolve_tracking_uri

    uri = resolve_tracking_uri(results, tracking_uri)
    os.environ["MLFLOW_TRACKING_URI"] = uri
    if src is not None and Path(src).is_dir():
        src = str(Path(src).resolve())
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if src not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([src, *paths])
    return uri


def set_tracking_uri(uri: str) -> None:
    """Point jobs started from now on at ``uri`` (they inherit the environment)."""
    os.environ["MLFLOW_TRACKING_URI"] = uri


def start_local_server(results: str | Path, store_uri: str, timeout: float = 90.0,
                       attempts: int = 3) -> tuple[str, int] | None:
    """Serve a local SQLite store with ``mlflow server`` on a free loopback port for the length of one pipeline.

    Stage jobs then log over REST with the stdlib client (``core.mlflow_rest``) instead of importing MLflow and
    opening the store themselves: a job's tracking overhead drops from ~2.5 s to ~0.2 s, and the server is the
    store's only writer. The server is started by a supervisor tied to this (Snakemake's) process, so it stops
    when this process ends, even by SIGKILL during the start; it counts as started only when the port answers
    from its own socket (a port taken between picking and binding it is retried on another port). Artifacts go
    beside the store (``<store dir>/mlartifacts``). The server accepts only requests carrying a fresh random
    bearer token (:mod:`icml25.core.server_auth`), exported to the jobs as ``MLFLOW_TRACKING_TOKEN``: other users
    of a shared machine cannot write to it. Returns ``(url, process group id)``, or None (jobs then write to
    ``store_uri`` directly) if it fails.
    """
    import logging
    import socket

    from . import server
    from .tracking import artifact_root

    import secrets

    log = logging.getLogger("icml25")
    results = Path(results)
    (results / "logs").mkdir(parents=True, exist_ok=True)
    # a per-run bearer token: other users of a shared login node can reach 127.0.0.1 too (core.server_auth)
    token = secrets.token_urlsafe(32) if server.token_app_installed() else None
    if token is None:
        log.warning("icml25's mlflow.app entry point is not installed (pip install -e .): the local tracking server "
                    "runs without its token, open to every user of this machine")
    err: Exception | None = None
    for _ in range(attempts):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        try:
            srv = server.start(backend_store_uri=store_uri, artifacts_destination=str(artifact_root(store_uri)),
                               port=port, workers=1, log=results / "logs" / "mlflow-server.log",
                               ready_timeout=timeout, parent_pid=os.getpid(), token=token)
        except (RuntimeError, OSError) as e:
            err = e
            continue
        if token is not None:
            os.environ["MLFLOW_TRACKING_TOKEN"] = token  # jobs inherit it; MLflow and core.mlflow_rest send it
        return srv.url, srv.pgid
    log.warning("local MLflow server did not start (%s); jobs write to %s directly",
                str(err).splitlines()[0] if err else "?", store_uri)
    return None


def stop_local_server(pgid: int) -> None:
    """Stop a server started by :func:`start_local_server`."""
    from . import server

    server.stop(pgid)


def shell_quote(value: object) -> str:
    """``value`` as one shell word (``shlex.quote`` of its string)."""
    import shlex

    return shlex.quote(str(value))


def init_tracking_store(uri: str, slugs: Sequence[str], results: str | Path) -> bool:
    """onstart: create the store and experiments (``tracking.init_store``). A store that does not answer is
    not fatal (jobs spool their tracking and it is replayed later): logged, False returned."""
    import logging

    from .mlflow_rest import redact
    from .spool import is_outage
    from .tracking import init_store

    try:
        init_store(uri, list(slugs), results)
        return True
    except Exception as err:  # noqa: BLE001
        if not is_outage(err):
            raise
        logging.getLogger("icml25").warning("tracking store %s unreachable (%s); jobs spool their tracking under "
                                            "%s/.tracking/spool until it answers", redact(uri),
                                            redact(str(err).splitlines()[0][:300]), results)
        return False


def recover_tracking(results: str | Path, store_uri: str) -> None:
    """onstart, after the store exists: name the durable store for this invocation's spool journals
    (``ICML25_STORE_URI``, jobs inherit it), replay journals left by earlier jobs, record this invocation, and
    mark the runs of earlier invocations whose process is gone as KILLED. Tracking problems are logged, never
    raised: they must not stop the pipeline."""
    import logging

    from . import spool
    from .mlflow_rest import redact
    from .tracking import ENV_INVOCATION

    log = logging.getLogger("icml25")
    os.environ[spool.ENV_STORE] = store_uri
    invocation = os.environ.get(ENV_INVOCATION, "")
    try:
        done, left = spool.replay(results)
        if done or left:
            log.info("tracking spool: %d journal(s) replayed, %d left for later", done, left)
        if invocation:
            spool.register_invocation(results, invocation, store_uri)
        killed = spool.mark_killed_invocations(results, invocation)
        for inv, n in killed.items():
            log.warning("invocation %s ended without closing its runs (killed?): %d run(s) marked KILLED", inv, n)
    except Exception as err:  # noqa: BLE001 - tracking must not stop the science
        log.warning("tracking recovery failed: %s", redact(str(err))[:500])


def finish_tracking(results: str | Path, status: str, pgid: int | None, store_uri: str | None) -> None:
    """onsuccess/onerror: replay the spool, close this invocation's parent runs as ``status``, stop the local
    server (``pgid``) and point the environment back at ``store_uri``. Never raises, prints nothing: problems
    are appended to ``<results>/.tracking/errors.log`` (after a failed job its error stays the last thing shown).
    """
    import logging
    import time
    import traceback

    from . import spool
    from .mlflow_rest import redact
    from .tracking import ENV_INVOCATION, finish_invocation

    errors = Path(results) / ".tracking" / "errors.log"
    errors.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger("icml25")
    handler = logging.FileHandler(errors, delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(handler)
    try:
        finish_invocation(status, results)
        spool.unregister_invocation(results, os.environ.get(ENV_INVOCATION, ""))
    except Exception:  # noqa: BLE001
        with open(errors, "a") as fh:
            fh.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} finish_tracking({status}):\n"
                     f"{redact(traceback.format_exc())}\n")
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.propagate = propagate
        if pgid is not None:
            with contextlib.suppress(Exception):
                stop_local_server(pgid)
        if store_uri is not None:
            set_tracking_uri(store_uri)
