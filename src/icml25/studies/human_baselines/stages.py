"""The five stages of the human_baselines study (spec "Stages"); each ``(stage, run)`` reads ``stage.inputs``,
writes ``stage.outputs`` atomically and logs to the MLflow run.

download   → raw/workbook.xlsx, raw/source.json (source ∈ {mirror, remote, synthetic}, sha256, licence)
preprocess → interim/wide.parquet (cached values as JSON text, rows 1..85 × A..DN), processed/long.parquet
train      → models/{arm}/chunk{k}.csv: table_iii (flat Table III), rigor_score (per study), power_sim (per seed ×
             study × δ, plus calibration and sensitivity rows)
evaluate   → claims.json, metrics/eval.json, metrics/table_iii.csv
report     → figures/checklist_share.png, figures/power_vs_baseliners.png, figures/rigor_by_year.png, report.md
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash
from icml25.core.io import read_json, save_figure, write_json, write_text

from . import data as D
from .evaluate import (anchors_claim, full_table_claim, parser_claim, planted_claim, row15_claim, row_sum_claim,
                       underpowering_claim)
from .table import (ITEMS, compare_tables, flat_table, long_table, rigor_scores, rigor_summary, table_from_long,
                    table_iii, unflatten_table)
from .train import power_summary, power_table
from .workbook import check_schema, read_workbook

SLUG = "human_baselines"
log = logging.getLogger(f"icml25.{SLUG}")
_PROGRESS = os.environ.get("ICML25_PROGRESS", "1") != "0"


def download(stage: Stage, run: Any) -> None:
    """Place the workbook (synthetic offline; mirror → origin remote) and record its provenance."""
    cfg = stage.config
    dest, source_json = stage.output(0), stage.output(1)
    info = D.obtain_workbook(dest, stage.data_source, stage.mirror, data_mode=cfg.data_mode,
                             try_origin=cfg.try_origin, synthetic_seed=cfg.synthetic_seed, progress=_PROGRESS)
    write_json(source_json, info)
    run.set_tags({"workbook_source": info["source"], "sha256": info["sha256"], "licence": info["licence"],
                  "data": D.data_label(info)})
    run.log_metric("download/bytes", dest.stat().st_size)
    log.info("workbook from %s, sha256 %s", info["source"], info["sha256"])


def preprocess(stage: Stage, run: Any) -> None:
    """Parse and schema-check the workbook; write the wide (cached values) and long (tidy) tables."""
    sheet = read_workbook(stage.input(0))
    check_schema(sheet, where=f"{stage.input(0)}:Final_Data")
    long = long_table(sheet)
    D.write_parquet(D.encode_wide(sheet), stage.output(0), index=True)
    D.write_parquet(long, stage.output(1))
    codes = D.count_codes(long)
    log.info("codes in the Table III rows: %s", codes)
    run.log_metrics({"preprocess/code_" + re.sub(r"[^A-Za-z0-9]+", "_", k).strip("_"): v for k, v in codes.items()})
    run.log_metrics({"preprocess/n_studies": int(long["study_index"].nunique()), "preprocess/n_rows": len(long)})


def train(stage: Stage, run: Any) -> None:
    """One arm: table_iii / rigor_score (deterministic) or power_sim (the job's seeds)."""
    cfg, arm, out = stage.config, stage.arm, stage.output(0)
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} not in the config's arms {list(cfg.arms)}")
    if arm == "table_iii":
        table = table_from_long(pd.read_parquet(stage.input(1)))
        D.write_csv(flat_table(table), out)
        for i, item in enumerate(ITEMS):
            run.log_metric("train/yes_pct_all", float(table.at[item.name, ("all", "yes_pct")]), step=i)
    elif arm == "rigor_score":
        scores = rigor_scores(pd.read_parquet(stage.input(1)))
        D.write_csv(scores, out)
        run.log_metrics({"train/rigor_mean": float(scores["score"].mean()),
                         "train/rigor_median": float(scores["score"].median())})
    elif arm == "power_sim":
        if not stage.seeds:
            raise SystemExit(f"{SLUG} train power_sim: pass --seeds")
        sheet = D.decode_wide(pd.read_parquet(stage.input(0)))
        frames = [power_table(sheet, cfg.power, seed, progress=_PROGRESS) for seed in stage.seeds]
        power = pd.concat(frames, ignore_index=True)
        D.write_csv(power, out)
        for seed, rec in power_summary(power, cfg.power).items():
            with run.seed_run(seed) as srun:  # one nested run per seed (tag seed); step = index of the delta
                for i, delta in enumerate(cfg.power.deltas):
                    srun.log_metric("train/power_median", rec[f"median_{delta:g}"], step=i)
                srun.log_metrics({"train/share_power_ge_0.8": rec[f"share_ge_{cfg.power.claim_delta:g}"],
                                  "train/type1": rec["type1"]})
    else:
        raise SystemExit(f"{SLUG} train: unknown arm {arm!r}")
    run.log_model(out, cfg)  # the arm's table is its "model"


def _model_inputs(paths: tuple[Path, ...]) -> dict[str, list[Path]]:
    """Group model CSVs by arm (their parent directory name)."""
    groups: dict[str, list[Path]] = {}
    for p in paths:
        groups.setdefault(p.parent.name, []).append(p)
    return groups


def evaluate(stage: Stage, run: Any) -> None:
    """Claims from the train outputs; inputs: workbook, source.json, long.parquet, then the model CSVs."""
    cfg = stage.config
    workbook, source_json, long_path = stage.input(0), stage.input(1), stage.input(2)
    models = _model_inputs(stage.inputs[3:])
    source = read_json(source_json)
    real = source["source"] in ("mirror", "remote")
    data = D.data_label(source)
    sheet = read_workbook(workbook)
    if "table_iii" not in models:
        raise SystemExit(f"{SLUG} evaluate: no table_iii model among the inputs {list(stage.inputs[3:])}")
    table = unflatten_table(pd.read_csv(models["table_iii"][0]))
    direct = table_iii(sheet)  # the same table straight from the workbook: a pipeline consistency check
    drift = compare_tables(table, direct)
    if drift:
        raise RuntimeError(f"{SLUG} evaluate: train's Table III differs from the workbook's: {drift[:3]}")
    reference = None
    if cfg.reference_table:
        reference = unflatten_table(pd.read_csv(cfg.reference_table))
    power = pd.concat([pd.read_csv(p) for p in models["power_sim"]], ignore_index=True) \
        if "power_sim" in models else None

    c1 = anchors_claim(table, real, data)
    c2, mismatches = full_table_claim(table, reference, real, data, cfg.reference_table)
    c3a, sum_problems = row_sum_claim(table, data)
    c3b, row15_diff = row15_claim(sheet, data)
    c3c, planted_problems = planted_claim(cfg.synthetic_seed)
    c3d, parser_diff = parser_claim(workbook, sheet, data)
    c4, power_sum = underpowering_claim(power, cfg, real, data)
    claims = [c1, c2, c3a, c3b, c3c, c3d, c4]

    data_source = f"{stage.data_source} ({source['source']})"
    from . import PAPER

    seeds = sorted({int(s) for s in power["seed"].unique()}) if power is not None and "seed" in power else []
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    long = pd.read_parquet(long_path)
    rigor = rigor_scores(long)
    flat = flat_table(table)
    eval_doc = {
        "study": SLUG, "scale": stage.scale, "data_source": data_source, "data": data, "source": source,
        "table_iii": flat.replace({np.nan: None}).to_dict(orient="records"), "mismatches": mismatches,
        "row_sum_problems": sum_problems, "row15_differences": row15_diff, "planted_problems": planted_problems,
        "parser_differences": parser_diff[:50], "power": {str(k): v for k, v in power_sum.items()},
        "rigor": {"mean": float(rigor["score"].mean()), "by_year": rigor_summary(rigor, "year").to_dict("records"),
                  "by_venue": rigor_summary(rigor, "venue").to_dict("records")},
        "claims": doc["claims"]}
    write_json(stage.output(1), eval_doc)
    D.write_csv(flat, stage.output(2))
    log_verdicts(run, doc)
    run.log_metrics({"eval/power_analysis_yes_n": int(table.at["1.8 Power analysis", ("all", "yes_n")]),
                     "eval/significance_test_yes_n": int(table.at["4.1 Significance test", ("all", "yes_n")]),
                     "eval/parser_differences": len(parser_diff), "eval/row15_differences": len(row15_diff)})
    run.set_tags({"workbook_source": source["source"], "sha256": source["sha256"], "licence": source["licence"]})
    for path in stage.outputs:
        run.log_artifact(path)


def report(stage: Stage, run: Any) -> None:
    """Figures and report.md; inputs: eval.json, metrics/table_iii.csv, then the model CSVs."""
    from .report import checklist_figure, power_figure, report_markdown, rigor_figure  # matplotlib: only here

    eval_doc = read_json(stage.input(0))
    flat = pd.read_csv(stage.input(1))
    models = _model_inputs(stage.inputs[2:])
    fig_check, fig_power, fig_rigor, md = stage.output(0), stage.output(1), stage.output(2), stage.output(3)
    save_figure(checklist_figure(flat), fig_check)
    if "power_sim" in models:
        power = pd.concat([pd.read_csv(p) for p in models["power_sim"]], ignore_index=True)
        save_figure(power_figure(power, stage.config.power.target_power), fig_power)
    else:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.text(0.5, 0.5, "power_sim arm not run at this scale", ha="center")
        save_figure(fig, fig_power)
    if "rigor_score" in models:
        save_figure(rigor_figure(pd.read_csv(models["rigor_score"][0])), fig_rigor)
    else:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots()
        ax.text(0.5, 0.5, "rigor_score arm not run at this scale", ha="center")
        save_figure(fig, fig_rigor)
    figures = {p.stem: os.path.relpath(p, md.parent) for p in (fig_check, fig_power, fig_rigor)}
    write_text(md, report_markdown(eval_doc, flat, figures))
    run.set_tags({"licence": eval_doc["source"]["licence"]})
    for path in stage.outputs:
        run.log_artifact(path)


STAGES = {"download": download, "preprocess": preprocess, "train": train, "evaluate": evaluate, "report": report}
