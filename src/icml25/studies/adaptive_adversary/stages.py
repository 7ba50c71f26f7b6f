"""The five stages of the adaptive_adversary study; each ``(stage, run)`` reads ``stage.inputs``, writes
``stage.outputs`` atomically and logs to the MLflow run. Every run carries the tags ``construction=own_illustration``
and ``paper_theorem_reproduced=false``: the study simulates our own construction, not the paper's proof.

prepare    → raw/manifest.json: the class (construction, K, budget rule) and the grid (c, η/c, η_max, m)
preprocess → interim/cells.csv: per (c, η/c, m) the budget B, P_abort, robust's closed-form failure rate and
             Le Cam's bound (from the manifest)
train      → processed/{arm}/trials_chunk{k}.parquet: one row per trial of one adversary and seed chunk
evaluate   → claims.json, metrics/eval.json (claim statistics), metrics/cells.csv (empirical vs analytic)
report     → figures/error_vs_m.png, figures/phase_eta_over_c.png, report.md
"""
from __future__ import annotations

import logging
import numbers
import time
from typing import Any

import pandas as pd

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.io import atomic_path, read_json, save_figure, write_json, write_text

from . import LABEL_TAGS, PAPER
from .data import ADVERSARIES, read_trials, write_trials
from .evaluate import NOTICE, analytic_cells, cell_table, cells_report, evaluate_claims
from .train import simulate

SLUG = "adaptive_adversary"
GRID_KEYS = ("construction", "K", "budget_rule", "c", "eta_over_c", "eta_max", "m")
log = logging.getLogger(f"icml25.{SLUG}")


def _label(run: Any) -> None:
    """Tag a run (job or nested) as our own illustration."""
    run.set_tags(LABEL_TAGS)


def _label_parent(run: Any) -> None:
    """Tag the study's parent run of this invocation too (every run says what this study is)."""
    run.set_parent_tags(LABEL_TAGS)


def cell_name(c: float, ratio: float) -> str:
    """The metric-key level of one (c, η/c) cell, e.g. ``c0.1_eta1.5c``."""
    return f"c{c:g}_eta{ratio:g}c"


def prepare(stage: Stage, run: Any) -> None:
    """Write the generator settings (the study's only 'data'): the class and the grid."""
    cfg = stage.config
    manifest = {"study": SLUG, "notice": NOTICE, **{k: getattr(cfg, k) for k in GRID_KEYS}}
    manifest = {k: list(v) if isinstance(v, tuple) else v for k, v in manifest.items()}
    write_json(stage.output(0), manifest)
    _label(run)
    _label_parent(run)
    run.log_artifact(stage.output(0))


def preprocess(stage: Stage, run: Any) -> None:
    """The closed forms of every cell of the grid (from the manifest) → cells.csv."""
    manifest = read_json(stage.input(0))
    missing = [k for k in GRID_KEYS if k not in manifest]
    if missing:
        raise ValueError(f"{stage.input(0)}: missing keys {missing}")
    cells = analytic_cells(manifest)
    with atomic_path(stage.output(0)) as tmp:
        cells.to_csv(tmp, index=False)
    _label(run)
    run.log_metric("preprocess/cells", len(cells))
    run.log_metric("preprocess/max_le_cam_bound", float(cells["le_cam_bound"].max()))


def _check_cells(trials: pd.DataFrame, analytic: pd.DataFrame, where: str) -> None:
    """The simulated (c, η/c, m, B) must be cells of the preprocessed grid (the config and cells.csv agree)."""
    have = set(analytic[["c", "eta_over_c", "m", "budget"]].itertuples(index=False, name=None))
    sim = set(trials[["c", "eta_over_c", "m", "budget"]].drop_duplicates().itertuples(index=False, name=None))
    extra = sorted(sim - have)
    if extra:
        raise ValueError(f"{where}: simulated cells {extra[:3]} are not in the preprocessed grid; rerun preprocess")


def train(stage: Stage, run: Any) -> None:
    """Simulate every trial of one adversary for each seed of the chunk; write the trial table; log per seed
    ``train/<cell>/fail_rate_<learner>`` and ``train/<cell>/mean_err_<learner>`` (step = m), ``train/seconds`` and
    ``train/trials_per_second``; the trial table is the job's 'model'."""
    cfg, arm = stage.config, stage.arm
    if arm not in ADVERSARIES:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ADVERSARIES)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    settings = {k: getattr(cfg, k) for k in ("c", "eta_over_c", "eta_max", "m", "trials", "budget_rule", "K")}
    analytic = pd.read_csv(stage.input(0))
    _label(run)
    run.log_params({"arm": arm, "seeds_run": list(seeds)})
    tables = []
    for seed in seeds:
        t0 = time.perf_counter()
        trials = simulate(settings, arm, seed)
        seconds = time.perf_counter() - t0
        _check_cells(trials, analytic, str(stage.input(0)))
        tables.append(trials)
        cells = cell_table(trials)
        with run.seed_run(seed) as srun:
            _label(srun)
            for r in cells.itertuples(index=False):
                name = cell_name(r.c, r.eta_over_c)
                srun.log_metrics({f"train/{name}/fail_rate_{r.learner}": r.fail_rate,
                                  f"train/{name}/mean_err_{r.learner}": r.mean_err}, step=int(r.m))
            srun.log_metrics({"train/seconds": seconds, "train/trials": len(trials),
                              "train/trials_per_second": len(trials) / seconds if seconds > 0 else 0.0})
        log.info("%s seed %d: %d trials in %.1f s", arm, seed, len(trials), seconds)
    write_trials(pd.concat(tables, ignore_index=True), stage.output(0))
    run.log_model(stage.output(0), cfg)  # nothing is fitted: the "model" of a simulation is its trial table


def evaluate(stage: Stage, run: Any) -> None:
    """Every claim and check from the trial tables (inputs: cells.csv, then the trial parquets)."""
    if len(stage.inputs) < 2:
        raise SystemExit(f"{SLUG} evaluate: expected --in cells.csv TRIALS.parquet [TRIALS.parquet ...]")
    analytic = pd.read_csv(stage.input(0))
    trials = pd.concat([read_trials(p) for p in stage.inputs[1:]], ignore_index=True)
    cells = cell_table(trials)
    claims = evaluate_claims(trials, cells)
    seeds = sorted(int(s) for s in trials["seed"].unique())
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                       claims=claims, config_hash=config_hash(stage.config), paper=PAPER, seeds=seeds)
    report_cells = cells_report(cells, analytic)
    write_json(stage.output(1), {
        "scale": stage.scale, "notice": NOTICE, "seeds": seeds, "n_trials": int(len(trials)),
        "arms": sorted(trials["adversary"].unique()),
        "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "key_numbers": c.key_numbers,
                    "statistic": c.statistic} for c in claims]})
    with atomic_path(stage.output(2)) as tmp:
        report_cells.to_csv(tmp, index=False)
    _label(run)
    for c in claims:
        for k, v in c.key_numbers.items():
            if isinstance(v, numbers.Real) and not isinstance(v, bool) and v == v:
                run.log_metric(f"eval/{c.id}/{k}", float(v))
    for arm, by_arm in report_cells.groupby("adversary"):
        with run.child(arm=str(arm)) as arun:  # one nested run per adversary; means over seeds; step = m
            _label(arun)
            for r in by_arm.itertuples(index=False):
                name = cell_name(r.c, r.eta_over_c)
                arun.log_metrics({f"eval/{name}/fail_rate_{r.learner}": r.fail_rate,
                                  f"eval/{name}/mean_err_{r.learner}": r.mean_err}, step=int(r.m))
                if arm == "adaptive" and r.learner == "robust":
                    arun.log_metric(f"eval/{name}/fail_rate_robust_analytic", r.robust_fail_analytic, step=int(r.m))
    log_verdicts(run, doc)
    for p in stage.outputs[:3]:
        run.log_artifact(p)
    for c in claims:
        log.info("%s (%s): %s %s", c.id, c.kind, c.verdict, c.key_numbers)


def report(stage: Stage, run: Any) -> None:
    """Figures and report.md from metrics/cells.csv and claims.json."""
    from .report import error_vs_m_figure, phase_figure, report_markdown

    cells = pd.read_csv(stage.input(0))
    claims_doc = read_json(stage.input(1))
    missing = [c for c in ("adversary", "learner", "c", "eta_over_c", "m", "n", "n_fail", "mean_err")
               if c not in cells.columns]
    if missing:
        raise ValueError(f"{stage.input(0)}: missing columns {missing}")
    save_figure(error_vs_m_figure(cells), stage.output(0))
    save_figure(phase_figure(cells, stage.config.budget_rule), stage.output(1))
    write_text(stage.output(2), report_markdown(claims_doc, cells))
    _label(run)
    for p in stage.outputs[:3]:
        run.log_artifact(p)


STAGES = {"prepare": prepare, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
