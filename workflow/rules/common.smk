# Path helpers and config lookups shared by every study's rules. Keep this file small: study logic lives in
# src/icml25/studies/<slug>/, infrastructure in src/icml25/core/ (workflow.py holds the logic behind these).

from pathlib import Path

from icml25.core import device as dev
from icml25.core import workflow as wf
from icml25.core.config import ConfigError
from icml25.studies import STUDIES, study_config_class, study_stage_keys

# results/ holds the one MLflow store of every scale (mlflow.db, mlartifacts/, .tracking/); each scale's files
# live apart under results/<scale>/ (<slug>/..., claims.md, claims.csv), so smoke, default and paper coexist.
RESULTS = "results"
SCALE = config["scale"]
# `rehearsal=true` runs the paper DAG on miniature real-format files (icml25.core.rehearsal): its results live in
# results/rehearsal/, its mirror and manifests in results/rehearsal/mirror/, never mixed with results/paper/.
REHEARSAL = bool(config.get("rehearsal"))
if REHEARSAL and SCALE != "paper":
    raise ConfigError(
        f"rehearsal: true needs scale=paper (it rehearses the paper DAG), got scale={SCALE}"
    )
SCALE_DIR = f"{RESULTS}/rehearsal" if REHEARSAL else f"{RESULTS}/{SCALE}"
REHEARSAL_DIR = str(Path(RESULTS, "rehearsal", "mirror").resolve())
SELECTED = list(STUDIES) if config["studies"] == "all" else list(config["studies"])
_unimplemented = [s for s in SELECTED if s not in STUDIES]
if _unimplemented:
    raise ConfigError(
        f"studies: {_unimplemented} not implemented yet (implemented: {list(STUDIES)})"
    )
if REHEARSAL:
    from icml25.core.rehearsal import require_rehearsals

    require_rehearsals(SELECTED, workflow.basedir)

# Merged study configs, validated by each study's Config model at parse time: `snakemake -n` fails fast on a
# bad key. Jobs get the whole config through the environment (no rerun trigger) and the keys their stage reads
# as params (the rerun trigger): see stage_params.
STUDY_CONFIG = {
    slug: wf.resolve_study(slug, study_config_class(slug), config, workflow.basedir)
    for slug in STUDIES
}
wf.export_study_configs(STUDY_CONFIG)

# Jobs inherit the tracking URI and PYTHONPATH from the environment (switching stores never reruns anything).
wf.export_job_env(
    RESULTS, config.get("mlflow", {}).get("tracking_uri"), Path(workflow.basedir, "src")
)


def cfg(slug):
    """The merged, validated config of a study (plain dict)."""
    return STUDY_CONFIG[slug]


def res(slug, *parts):
    """Path under results/<scale>/<slug>/."""
    return "/".join([SCALE_DIR, slug, *parts])


def logf(slug, name):
    return res(slug, "logs", f"{name}.log")


def bench(slug, name):
    return res(slug, "benchmarks", f"{name}.tsv")


def stage_cmd(slug, stage):
    """Shell command of a stage job. The whole config comes from the environment variable set at parse time
    (the shell expands it when the job runs); the stage sees only its STAGE_KEYS (see stage_params). Every
    value from the configuration is shell-quoted (a `mirror` such as `x; rm -rf ~` stays one argument).
    """
    q = wf.shell_quote
    data_source = config["data_source"]
    if (
        REHEARSAL
    ):  # every file through the download path, from the miniatures' mirror, with their hashes
        data_source = "remote"
        mirror = f" --mirror {q(str(Path(REHEARSAL_DIR, 'files', slug)))} --rehearsal {q(REHEARSAL_DIR)}"
    else:
        mirror = f" --mirror {q(config['mirror'])}" if config.get("mirror") else ""
    mirror += " --trust-unpinned" if config.get("trust_unpinned") else ""
    # the top-level `device` switch, resolved at parse time, for jobs whose stage reads the study's device key
    device = dev.job_device_arg(slug, stage, cfg(slug), study_stage_keys(slug), config)
    device = f" --device {q(device.split()[-1])}" if device else ""
    return (
        f"python -m icml25.studies.{q(slug)} {q(stage)} --scale {q(SCALE)}"
        f' --config-json "${wf.config_env_var(slug)}"'
        f" --data-source {q(data_source)}{mirror}{device} --results {q(RESULTS)}"
        f" --rule {q(f'{slug}__{stage}')}"
    )


def gpus(slug, stage, n=1):
    """SLURM `gpu` resource of a <slug>__<stage> job: n when the stage reads the study's device key and that is
    cuda (after the top-level `device` switch), else 0: only jobs that use a GPU ask for one (core.device).
    """
    return dev.gpu_request(slug, stage, cfg(slug), study_stage_keys(slug), n)


def stage_params(slug, stage):
    """Params of the stage's jobs, one "key=value" string per config key the stage reads (STAGE_KEYS in
    studies/<slug>/config.py); used as `**stage_params(slug, stage)` under `params`. A change of one of them
    reruns the jobs (params trigger) and the rerun reason names the changed keys; other keys leave them alone.
    """
    return wf.rule_params(cfg(slug), study_stage_keys(slug), slug, stage)


def seed_chunks(slug):
    """Train jobs of the study: {chunk index: seeds}, `seeds_per_job` seeds each (null: all in one job)."""
    return wf.seed_chunks(cfg(slug)["seeds"], cfg(slug)["seeds_per_job"])


_LOCAL_SERVER = {}


def init_tracking():
    """onstart: create the MLflow store and the experiments once, before any job writes to them; replay the
    tracking spooled by earlier jobs, mark runs of killed invocations KILLED; with a local SQLite store and
    `mlflow.local_server`, serve it for this run so jobs log over cheap REST calls.
    """
    from icml25.core.tracking import resolve_tracking_uri

    if REHEARSAL:
        from icml25.core.rehearsal import build_mirror

        build_mirror(SELECTED, REHEARSAL_DIR)
    uri = resolve_tracking_uri(RESULTS)
    if workflow.non_local_exec and uri.startswith("sqlite:"):
        raise ConfigError(
            "mlflow: jobs on other nodes cannot write to the local SQLite store "
            f"({uri}); start a tracking server (`icml25 server --host 0.0.0.0 --auth --port 5000 --detach "
            "--pid-file results/mlflow-server.pid`) and `export MLFLOW_TRACKING_URI="
            "http://$(hostname -f):5000` before submitting (docs/slurm.md)"
        )
    wf.init_tracking_store(uri, [*SELECTED, "summary"], RESULTS)
    wf.recover_tracking(RESULTS, uri)
    if uri.startswith("sqlite:") and config.get("mlflow", {}).get("local_server", True):
        started = wf.start_local_server(RESULTS, uri)
        if started:
            url, _LOCAL_SERVER["pgid"] = started
            _LOCAL_SERVER["store"] = uri
            wf.set_tracking_uri(url)


def finish_tracking(status):
    """onsuccess/onerror: close this invocation's parent runs, stop the local server. Never raises and prints
    nothing: a failed job's error stays the last thing on screen (problems go to results/.tracking/errors.log).
    """
    wf.finish_tracking(
        RESULTS,
        status,
        _LOCAL_SERVER.pop("pgid", None),
        _LOCAL_SERVER.pop("store", None),
    )
