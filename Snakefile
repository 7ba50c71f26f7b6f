"""icml25: ICML 2025 papers reproduced as Snakemake studies. See README.md and DESIGN.md-derived docs."""

import os
import time
import uuid

from snakemake.utils import min_version, validate

from icml25.core.cli import parent_token
from icml25.core.config import retype_strings

min_version("9.20")


configfile: "config/config.yaml"


# `--config` parses nested values as strings; give them the types a config file would have, then validate.
config.update(retype_strings(config))
validate(config, "workflow/schemas/config.schema.yaml")

# One id per pipeline invocation: the parent MLflow run of each study is keyed on it. Jobs inherit it through
# the environment (local jobs and sbatch's default --export=ALL); a re-parse inside a job keeps the inherited one.
os.environ.setdefault(
    "ICML25_INVOCATION", f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
)
# Jobs stop within a second when this Snakemake process is gone (kill -9), instead of running on unrecorded.
os.environ["ICML25_PARENT"] = parent_token()


include: "workflow/rules/common.smk"


# Passed on to jobs that run elsewhere (SLURM); both are set above and in common.smk.
envvars:
    "MLFLOW_TRACKING_URI",
    "ICML25_INVOCATION",
    "ICML25_PARENT",


include: "workflow/rules/cat_iv.smk"
include: "workflow/rules/rip.smk"
include: "workflow/rules/human_baselines.smk"
include: "workflow/rules/coastalbench.smk"
include: "workflow/rules/adaptive_adversary.smk"
include: "workflow/rules/coalition_attribution.smk"
include: "workflow/rules/kernel_adaptation.smk"
include: "workflow/rules/roste.smk"
include: "workflow/rules/morphing_flow.smk"
include: "workflow/rules/lfss.smk"
include: "workflow/rules/meta_expert.smk"
include: "workflow/rules/action_piece.smk"
include: "workflow/rules/fedecado.smk"
include: "workflow/rules/ntk_dfl.smk"
include: "workflow/rules/unisoma.smk"
include: "workflow/rules/magnets.smk"
include: "workflow/rules/sard.smk"
include: "workflow/rules/data_remix.smk"
include: "workflow/rules/pid.smk"
include: "workflow/rules/summary.smk"


# Each study's claims.json (and the rest of <slug>__all) is a target itself: Snakemake does not rerun a job for an
# input that is merely missing when its output exists, so after `rm -rf results/<scale>/<slug>` only a target that
# is gone rebuilds the study; the rebuilt claims.json is then newer than claims.md, which is rebuilt too.
rule all:
    default_target: True
    input:
        f"{SCALE_DIR}/claims.md",
        f"{SCALE_DIR}/claims.csv",
        [res(slug, "claims.json") for slug in SELECTED],
        [getattr(rules, f"{slug}__all").input for slug in SELECTED],


onstart:
    init_tracking()


onsuccess:
    finish_tracking("FINISHED")


onerror:
    finish_tracking("FAILED")
