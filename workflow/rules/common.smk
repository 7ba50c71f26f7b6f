# Path helpers and config lookups shared by every study's rules. Keep this file small: study logic lives in
# src/icml25/studies/<slug>/, infrastructure in src/icml25/core/.

import json
from pathlib import Path

from icml25.core.config import ConfigError, build, load_yaml, merge_scale, to_dict, validate_schema
from icml25.core.tracking import resolve_tracking_uri
from icml25.studies import STUDIES, study_config_class

RESULTS = "results"
SCALE = config["scale"]
SELECTED = list(STUDIES) if config["studies"] == "all" else list(config["studies"])
_unimplemented = [s for s in SELECTED if s not in STUDIES]
if _unimplemented:
    raise ConfigError(f"studies: {_unimplemented} not implemented yet (implemented: {list(STUDIES)})")


def _load_study(slug):
    """Merged study config (yaml common + scale + overrides + global seeds), validated by schema and dataclass."""
    raw = load_yaml(f"config/studies/{slug}.yaml")
    validate_schema(raw, f"workflow/schemas/{slug}.schema.yaml", what=f"config/studies/{slug}.yaml")
    merged = merge_scale(raw, SCALE, config.get("overrides", {}).get(slug))
    if config.get("seeds") is not None:
        merged["seeds"] = list(config["seeds"])
    return to_dict(build(study_config_class(slug), merged, path=f"{slug}"))


STUDY_CONFIG = {slug: _load_study(slug) for slug in STUDIES}


def cfg(slug):
    """The merged, validated config of a study (plain dict)."""
    return STUDY_CONFIG[slug]


def res(slug, *parts):
    """Path under results/<slug>/."""
    return "/".join([RESULTS, slug, *parts])


def logf(slug, name):
    return res(slug, "logs", f"{name}.log")


def bench(slug, name):
    return res(slug, "benchmarks", f"{name}.tsv")


def stage_cmd(slug, stage):
    """The shell command of a stage job; Snakemake fills {params.cfg:q}, {rule} and {jobid} at run time."""
    mirror = f" --mirror {config['mirror']}" if config.get("mirror") else ""
    return (f"python -m icml25.studies.{slug} {stage} --scale {SCALE} --config-json {{params.cfg:q}}"
            f" --data-source {config['data_source']}{mirror} --results {RESULTS} --rule {{rule}} --jobid {{jobid}}")


def seed_chunks(slug):
    """The study's seeds split into jobs of `seeds_per_job` (all seeds in one job at smoke/default scale, one
    seed per job at paper scale): {chunk index: [seeds]}."""
    seeds, per = cfg(slug)["seeds"], cfg(slug)["seeds_per_job"]
    per = per or len(seeds)
    return {i: seeds[k : k + per] for i, k in enumerate(range(0, len(seeds), per))}


def cfg_param(slug):
    """Params value carrying the config: a change of config reruns the study's jobs (params rerun trigger)."""
    return json.dumps(cfg(slug), sort_keys=True)


# Jobs inherit the tracking URI from the environment, so switching stores never reruns anything.
os.environ["MLFLOW_TRACKING_URI"] = resolve_tracking_uri(RESULTS, config.get("mlflow", {}).get("tracking_uri"))


def init_tracking():
    """onstart: create the MLflow store and the experiments once, before any job writes to them."""
    from icml25.core.tracking import init_store

    init_store(os.environ["MLFLOW_TRACKING_URI"], [*SELECTED, "summary"], RESULTS)


def finish_tracking(status):
    """onsuccess/onerror: close this invocation's parent runs."""
    from icml25.core.tracking import finish_invocation

    finish_invocation(status, RESULTS)
