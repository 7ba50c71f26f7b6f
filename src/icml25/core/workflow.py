"""Helpers behind ``workflow/rules/common.smk``: study config resolution and the environment jobs inherit.

Kept in Python (not in the .smk) so they are unit-testable and the Snakefiles stay declarative.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .config import SCALES, build, load_yaml, merge_scale, stage_params, study_schema, to_dict, validate_schema


def resolve_study(slug: str, config_cls: type, global_config: Mapping[str, Any], root: str | Path = ".") -> dict:
    """The merged study config (yaml common keys + ``scale`` + ``overrides.<slug>`` + global ``seeds``) as plain
    data, validated by the study's ``Config`` model; errors name the key.

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
    merged = merge_scale(raw, scale, (global_config.get("overrides") or {}).get(slug))
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


def start_local_server(results: str | Path, store_uri: str, timeout: float = 90.0) -> tuple[str, int] | None:
    """Serve a local SQLite store with ``mlflow server`` on a free loopback port for the length of one pipeline.

    Stage jobs then log over REST with the stdlib client (``core.mlflow_rest``) instead of importing MLflow and
    opening the store themselves: a job's tracking overhead drops from ~2.5 s to ~0.2 s, and the server is the
    store's only writer. A watchdog stops the server when this (Snakemake's) process ends, even by SIGKILL.
    Returns ``(url, process group id)``, or None (jobs then write to ``store_uri`` directly) if it fails.
    """
    import logging
    import socket
    import subprocess
    import sys

    from . import server

    log = logging.getLogger("icml25")
    results = Path(results)
    (results / "logs").mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        srv = server.start(backend_store_uri=store_uri, artifacts_destination=str(results / "mlartifacts"),
                           port=port, workers=1, log=results / "logs" / "mlflow-server.log",
                           ready_timeout=timeout)
    except (RuntimeError, OSError) as err:
        log.warning("local MLflow server did not start (%s); jobs write to %s directly", err, store_uri)
        return None
    subprocess.Popen([sys.executable, "-m", "icml25.core.workflow", "watch", str(os.getpid()), str(srv.pgid)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    return srv.url, srv.pgid


def stop_local_server(pgid: int) -> None:
    """Stop a server started by :func:`start_local_server`."""
    from . import server

    server.stop(pgid)


def _watch(parent: int, pgid: int, period: float = 1.0) -> None:
    """Stop process group ``pgid`` once process ``parent`` is gone (or the group is already gone)."""
    import signal
    import time

    while True:
        try:
            os.kill(parent, 0)
            os.killpg(pgid, 0)
        except ProcessLookupError:
            break
        time.sleep(period)
    try:
        os.killpg(pgid, signal.SIGTERM)
        time.sleep(5)
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 4 and sys.argv[1] == "watch":
        _watch(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit("usage: python -m icml25.core.workflow watch PARENT_PID PGID")
