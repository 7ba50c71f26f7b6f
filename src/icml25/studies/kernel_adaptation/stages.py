"""The stages of the kernel_adaptation study; each ``(stage, run)`` reads ``stage.inputs``, writes
``stage.outputs`` atomically and logs to the MLflow run.

download   → raw/sources.json (generators and the bundled digits: nothing to fetch) and, when ``mnist03`` is a
             task (paper scale), the OpenML MNIST file of the manifest, sha256-verified
preprocess → interim/tasks.npz: every (task, seed) pair's X, y, X_test, y_test, teacher
train      → models/{arm}/chunk{k}.npz: one arm on every pair of the chunk's seeds over the χ grid (per χ the train
             and test means, A, the observables); ``rescaling``/``rescaling_langevin`` read the adaptive/Langevin
             output of their chunk
sweep      → models/sweep_{kind}/chunk{k}.npz (paper scale, ``n_sweep.widths``): the width sweep of one kind
             (adaptive_tree | langevin) on every pair of the chunk's seeds: ε at χ = N for every width N
evaluate   → claims.json, metrics/eval.json (per-pair statistics, verdicts, diagnostics)
report     → figures/eps_vs_chi.png, figures/r_vs_chi.png, figures/u_vs_chi.png, report.md
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np

from icml25.core.claims import log_verdicts, write_claims
from icml25.core.cli import Stage
from icml25.core.config import config_hash, to_dict
from icml25.core.download import all_or_nothing, fetch, read_manifest, verified
from icml25.core.io import load_npz, read_json, save_figure, save_npz, write_json, write_text

from . import MANIFEST, PAPER
from .config import SWEEP_KINDS, TASK_FILES, UPSTREAM

SLUG = "kernel_adaptation"
ARMS = ("nngp", "rescaling", "rescaling_langevin", "adaptive_tree", "langevin")
DATA_KEYS = ("X", "y", "X_test", "y_test", "teacher")
METRIC_KEYS = ("eps_train", "eps_test", "r_label", "r_teacher", "residual", "u", "eps_test_total")
EXTRA_KEYS = ("chi_path", "min_eig", "iters", "rescale_err_path", "trace", "prior_A", "step_check_eps_test",
              "step_check_r_label")
log = logging.getLogger(f"icml25.{SLUG}")


def task_file_names(tasks) -> list[str]:
    """Manifest rows read by the downloaded tasks, sorted."""
    return sorted({name for t in tasks for name in TASK_FILES.get(t, ())})


def download(stage: Stage, run: Any) -> None:
    """Generators and digits03 need nothing; mnist03 (paper) is fetched from the manifest (``--out sources.json
    FILE ...`` in the order of :func:`task_file_names`)."""
    names = task_file_names(stage.config.tasks)
    if len(stage.outputs) != 1 + len(names):
        raise SystemExit(f"{SLUG} download: expected --out sources.json and {len(names)} file(s) {names}")
    record: dict[str, Any] = {"generated": [t for t in stage.config.tasks if t in ("ising", "teacher")],
                              "packaged": [t for t in stage.config.tasks if t == "digits03"], "files": {}}
    if names:
        if stage.data_source != "remote":
            raise SystemExit(f"{SLUG} download: task mnist03 needs {names}: run with data_source=remote (and "
                             "trust_unpinned=true for rows marked UNPINNED), or drop mnist03 from tasks")
        manifest = read_manifest(MANIFEST)
        with all_or_nothing(stage.outputs[1:]):  # no orphan pins when file k fails
            for name, dest in zip(names, stage.outputs[1:]):
                from .data import mnist_arff_check

                entry = manifest[name]  # an unpinned row is pinned only after its whole file checks out
                fetch(entry, dest, stage.mirror, trust_unpinned=stage.trust_unpinned,
                      check=None if entry.sha256 else mnist_arff_check)
                record["files"][name] = {"path": str(dest), "url": manifest[name].url}
                run.log_metric(f"download/{name}_bytes", dest.stat().st_size)
        run.log_artifact(MANIFEST)
    write_json(stage.output(0), record)


def preprocess(stage: Stage, run: Any) -> None:
    """Every (task, seed) pair's data → one npz (keys ``<task>/s<seed>/<X|y|X_test|y_test|teacher>``)."""
    from .data import make_task, mnist03

    cfg = stage.config
    files = dict(zip(task_file_names(cfg.tasks), stage.inputs[1:]))
    arrays: dict[str, np.ndarray] = {}
    for task in cfg.tasks:
        for seed in cfg.seeds:
            if task == "mnist03":
                d = mnist03(verified(files["mnist_784_arff"]), cfg.P, cfg.P_test, seed)
            else:
                d = make_task(task, cfg.D, cfg.P, cfg.P_test, seed, J=cfg.ising_J)
            for k in DATA_KEYS:
                arrays[f"{task}/s{seed}/{k}"] = d[k]
            run.log_metric(f"preprocess/{task}/label_balance", float(np.mean(d["y"] > 0)), step=seed)
    save_npz(stage.output(0), **arrays)


def _save_result(arrays: dict[str, np.ndarray], prefix: str, res: dict[str, Any]) -> None:
    for k in ("chi", "f_train", "f_test", "A"):
        arrays[prefix + k] = np.asarray(res[k])
    for k in METRIC_KEYS:
        vals = [m.get(k, np.nan) for m in res["metrics"]]
        arrays[f"{prefix}metrics/{k}"] = np.asarray(vals, dtype=np.float64)
    for k in EXTRA_KEYS:
        if k in res:
            arrays[prefix + k] = np.asarray(res[k])
    arrays[prefix + "runtime_s"] = np.asarray(res["runtime_s"])


def load_result(arrays: dict[str, np.ndarray], prefix: str, arm: str, task: str, seed: int) -> dict[str, Any]:
    """An :func:`experiment.run` result read back from a train output (error naming the missing key)."""
    if prefix + "chi" not in arrays:
        raise KeyError(f"{arm}: no result for {task} seed {seed} ({prefix}chi)")
    res: dict[str, Any] = {"arm": arm, "task": task, "seed": seed}
    for k in ("chi", "f_train", "f_test", "A", *EXTRA_KEYS):
        if prefix + k in arrays:
            res[k] = arrays[prefix + k]
    cols = {k: arrays[f"{prefix}metrics/{k}"] for k in METRIC_KEYS}
    res["metrics"] = [{"chi": float(c), **{k: float(v[g]) for k, v in cols.items() if not np.isnan(v[g])}}
                      for g, c in enumerate(res["chi"])]
    return res


def train(stage: Stage, run: Any) -> None:
    """One arm on every (task, seed) pair of the chunk over the χ grid. Logs per seed ``train/<task>/eps_test``,
    ``train/<task>/r_label`` (step = χ index) and, for Langevin, ``train/<task>/chi_e<e>/test_discrepancy_running``
    (step = Langevin step)."""
    from .experiment import run as run_arm
    from .experiment import settings_from_config

    cfg, arm = stage.config, stage.arm
    if arm not in ARMS:
        raise SystemExit(f"{SLUG} train: --arm must be one of {list(ARMS)}, got {arm!r}")
    if arm not in cfg.arms:
        raise SystemExit(f"{SLUG} train: arm {arm!r} is not in the config's arms {list(cfg.arms)}")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} train: seeds {unknown} are not in the config's seeds")
    need = 2 if arm in UPSTREAM else 1
    if len(stage.inputs) != need:
        raise SystemExit(f"{SLUG} train: --in tasks.npz" + (f" models/{UPSTREAM[arm]}/chunkK.npz" if need == 2 else ""))
    settings = settings_from_config({k: to_dict(getattr(cfg, k)) for k in (
        "N", "g_v", "g_w", "kappa0", "chi_exponents", "n_anneal", "damping", "tol", "max_iter", "langevin",
        "prior_check", "step_check")})
    data_all = load_npz(stage.input(0))
    upstream_all = load_npz(stage.input(1)) if need == 2 else None
    arrays: dict[str, np.ndarray] = {"seeds": np.asarray(seeds, dtype=np.int64),
                                     "tasks": np.asarray(list(cfg.tasks), dtype=str)}
    for seed in seeds:
        with run.seed_run(seed) as srun:
            for task in cfg.tasks:
                prefix = f"{task}/s{seed}/"
                missing = [prefix + k for k in DATA_KEYS if prefix + k not in data_all]
                if missing:
                    raise KeyError(f"{stage.input(0)}: missing {missing}; rerun preprocess")
                data = {k: data_all[prefix + k] for k in DATA_KEYS}
                upstream = None
                if need == 2:
                    upstream = {UPSTREAM[arm]: load_result(upstream_all, prefix, UPSTREAM[arm], task, seed)}
                res = run_arm(settings, arm, task, seed, upstream=upstream, data=data)
                _save_result(arrays, prefix, res)
                for g, m in enumerate(res["metrics"]):
                    srun.log_metrics({f"train/{task}/eps_test": m["eps_test"], f"train/{task}/r_label": m["r_label"],
                                      f"train/{task}/chi": m["chi"]}, step=g)
                    if "u" in m:
                        srun.log_metric(f"train/{task}/u", m["u"], step=g)
                for g, trace in enumerate(res.get("trace", [])):
                    e = cfg.chi_exponents[g]
                    for w, value in enumerate(trace):
                        srun.log_metric(f"train/{task}/chi_e{e:g}/test_discrepancy_running", float(value),
                                        step=1000 * (w + 1))
                srun.log_metric(f"train/{task}/seconds", float(res["runtime_s"]))
                log.info("%s %s seed %d: eps_test %s (%.1f s)", arm, task, seed,
                         [round(m["eps_test"], 4) for m in res["metrics"]], res["runtime_s"])
    save_npz(stage.output(0), **arrays)
    run.log_model(stage.output(0), cfg)


def sweep(stage: Stage, run: Any) -> None:
    """The paper's width sweep, one kind (``--arm adaptive_tree|langevin``) on every (task, seed) pair of the chunk:
    ε at χ = N for every N of ``n_sweep.widths`` (:func:`experiment.sweep`). Output keys ``seeds``, ``tasks``,
    ``widths`` and ``<task>/s<seed>/<eps_test|eps_train|r_label|step_check_eps_test|runtime_s>``. Logs per seed
    ``sweep/<task>/eps_test`` with step = width index."""
    from .experiment import settings_from_config
    from .experiment import sweep as run_sweep

    cfg, kind = stage.config, stage.arm
    if kind not in SWEEP_KINDS:
        raise SystemExit(f"{SLUG} sweep: --arm must be one of {list(SWEEP_KINDS)}, got {kind!r}")
    widths = list(cfg.n_sweep.widths)
    if not widths:
        raise SystemExit(f"{SLUG} sweep: n_sweep.widths is empty (the sweep is off at this scale)")
    seeds = stage.seeds or cfg.seeds
    unknown = sorted(set(seeds) - set(cfg.seeds))
    if unknown:
        raise SystemExit(f"{SLUG} sweep: seeds {unknown} are not in the config's seeds")
    if len(stage.inputs) != 1 or len(stage.outputs) != 1:
        raise SystemExit(f"{SLUG} sweep: --in tasks.npz --out models/sweep_{kind}/chunkK.npz")
    step_check = to_dict(cfg.step_check) if cfg.n_sweep.step_check and kind == "langevin" else {}
    settings = settings_from_config({**{k: to_dict(getattr(cfg, k)) for k in (
        "N", "g_v", "g_w", "kappa0", "n_anneal", "damping", "tol", "max_iter", "langevin")},
        "step_check": {**step_check, "enabled": bool(step_check)}})
    data_all = load_npz(stage.input(0))
    tasks = list(cfg.n_sweep.tasks or cfg.tasks)
    arrays: dict[str, np.ndarray] = {"seeds": np.asarray(seeds, dtype=np.int64),
                                     "tasks": np.asarray(tasks, dtype=str),
                                     "widths": np.asarray(widths, dtype=np.int64)}
    for seed in seeds:
        with run.seed_run(seed) as srun:
            for task in tasks:
                prefix = f"{task}/s{seed}/"
                missing = [prefix + k for k in DATA_KEYS if prefix + k not in data_all]
                if missing:
                    raise KeyError(f"{stage.input(0)}: missing {missing}; rerun preprocess")
                res = run_sweep(settings, kind, seed, {k: data_all[prefix + k] for k in DATA_KEYS}, widths)
                for k in ("eps_test", "eps_train", "r_label", "step_check_eps_test", "runtime_s"):
                    if k in res:
                        arrays[prefix + k] = np.asarray(res[k])
                for w, value in enumerate(res["eps_test"]):
                    srun.log_metric(f"sweep/{task}/eps_test", float(value), step=w)
                srun.log_metric(f"sweep/{task}/seconds", float(res["runtime_s"]))
                log.info("sweep %s %s seed %d: N %s eps_test %s (%.1f s)", kind, task, seed, widths,
                         [round(float(v), 4) for v in res["eps_test"]], res["runtime_s"])
    save_npz(stage.output(0), **arrays)
    run.log_model(stage.output(0), cfg)


def sweep_pairs(files: dict[str, dict[str, np.ndarray]]) -> list[dict[str, Any]]:
    """Per (task, seed) pair the width sweep's ``{task, seed, widths, eps_AD, eps_L, eps_L_half}`` from the loaded
    sweep outputs keyed by kind (errors name the kind and the missing pair)."""
    if set(files) != set(SWEEP_KINDS):
        raise ValueError(f"width sweep: need the outputs of both kinds {list(SWEEP_KINDS)}, got {sorted(files)}")
    ad, lg = files["adaptive_tree"], files["langevin"]
    if not np.array_equal(ad["widths"], lg["widths"]):
        raise ValueError(f"width sweep: the kinds ran different widths {ad['widths']} and {lg['widths']}")
    pairs = sorted({(t, int(s)) for a in (ad, lg) for t in a["tasks"].tolist() for s in a["seeds"].tolist()})
    out = []
    for task, seed in pairs:
        prefix = f"{task}/s{seed}/"
        for kind, a in files.items():
            if prefix + "eps_test" not in a:
                raise KeyError(f"width sweep {kind}: no result for {task} seed {seed}")
        half = lg.get(prefix + "step_check_eps_test")
        out.append({"task": task, "seed": seed, "widths": ad["widths"].tolist(),
                    "eps_AD": ad[prefix + "eps_test"].tolist(), "eps_L": lg[prefix + "eps_test"].tolist(),
                    "eps_L_half": None if half is None else half.tolist()})
    return out


def _merge_chunks(arrays: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The chunk outputs of one sweep kind as one mapping (seeds and tasks concatenated)."""
    out: dict[str, np.ndarray] = {}
    for a in arrays:
        out.update({k: v for k, v in a.items() if k not in ("seeds", "tasks")})
    out["seeds"] = np.concatenate([a["seeds"] for a in arrays])
    out["tasks"] = arrays[0]["tasks"]
    return out


def evaluate(stage: Stage, run: Any) -> None:
    """Per-pair summaries from every arm's outputs (inputs: the arms' npz files) → claims.json, eval.json."""
    from .evaluate import evaluate_claims, pair_summary

    if not stage.inputs:
        raise SystemExit(f"{SLUG} evaluate: expected --in models/<arm>/chunkK.npz ...")
    by_arm: dict[str, list[dict[str, np.ndarray]]] = {}
    by_kind: dict[str, list[dict[str, np.ndarray]]] = {}
    sweep_dirs = {f"sweep_{k}": k for k in SWEEP_KINDS}
    for path in stage.inputs:
        if path.parent.name in sweep_dirs:
            by_kind.setdefault(sweep_dirs[path.parent.name], []).append(
                load_npz(path, required=("seeds", "tasks", "widths")))
            continue
        if path.parent.name not in ARMS:
            raise ValueError(f"{path}: parent directory must name an arm of {ARMS} or a sweep kind "
                             f"{sorted(sweep_dirs)}")
        by_arm.setdefault(path.parent.name, []).append(load_npz(path, required=("seeds", "tasks")))
    pairs = sorted({(t, int(s)) for files in by_arm.values() for a in files for t in a["tasks"].tolist()
                    for s in a["seeds"].tolist()})
    cfg = stage.config
    summaries = []
    for task, seed in pairs:
        prefix = f"{task}/s{seed}/"
        results = {}
        for arm, files in by_arm.items():
            src = next((a for a in files if prefix + "chi" in a), None)
            if src is None:
                raise KeyError(f"arm {arm}: no result for {task} seed {seed}")
            results[arm] = load_result(src, prefix, arm, task, seed)
        s = pair_summary(results, cfg.chi_exponents, cfg.g_w)
        s.update(task=task, seed=seed)
        if "rescaling" in results:
            s["u_rescaling"] = [m.get("u") for m in results["rescaling"]["metrics"]]
        if "rescaling_langevin" in results:
            s["u_rescaling_langevin"] = [m.get("u") for m in results["rescaling_langevin"]["metrics"]]
        summaries.append(s)
    widths = list(cfg.n_sweep.widths)
    if widths and not by_kind:
        raise SystemExit(f"{SLUG} evaluate: n_sweep.widths is set but no models/sweep_<kind>/chunkK.npz was given")
    sweep = sweep_pairs({k: _merge_chunks(v) for k, v in by_kind.items()}) if by_kind else None
    claims, ev = evaluate_claims(summaries, adequacy=to_dict(cfg.adequacy), tasks=list(cfg.tasks), sweep=sweep)
    seeds = sorted({seed for _, seed in pairs})
    doc = write_claims(stage.output(0), study=SLUG, scale=stage.scale, data_source=stage.data_source, claims=claims,
                       config_hash=config_hash(cfg), paper=PAPER, seeds=seeds)
    write_json(stage.output(1), {"scale": stage.scale, "chi_exponents": list(cfg.chi_exponents), "pairs": summaries,
                                 "width_sweep": ev.get("width_sweep"),
                                 "verdicts": {k: v for k, v in ev.items()},
                                 "claims": [{"id": c.id, "kind": c.kind, "verdict": c.verdict,
                                             "key_numbers": c.key_numbers} for c in claims]})
    arms = sorted(by_arm)
    for arm in arms:  # one nested run per arm: means over pairs, step = χ index
        with run.child(arm=arm) as arun:
            eps = np.mean([s["eps_test"][arm] for s in summaries], axis=0)
            r = np.mean([s["r_label"][arm] for s in summaries], axis=0)
            for g in range(len(eps)):
                arun.log_metrics({"eval/eps_test": float(eps[g]), "eval/r_label": float(r[g])}, step=g)
    for c in claims:
        for k, v in c.key_numbers.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and v is not None:
                run.log_metric(f"eval/{c.id}/{k}", float(v))
    log_verdicts(run, doc)
    for p in stage.outputs[:2]:
        run.log_artifact(p)
    for c in claims:
        log.info("%s (%s): %s %s", c.id, c.kind, c.verdict, c.key_numbers)


def report(stage: Stage, run: Any) -> None:
    """ε, r and u against χ (means over pairs) and report.md from metrics/eval.json and claims.json."""
    from .report import curve_figure, report_markdown

    doc = read_json(stage.input(0))
    claims_doc = read_json(stage.input(1))
    if "pairs" not in doc:
        raise ValueError(f"{stage.input(0)}: missing key 'pairs'")
    for i, what in enumerate(("eps", "r", "u")):
        save_figure(curve_figure(doc, what), stage.output(i))
    write_text(stage.output(3), report_markdown(doc, claims_doc))
    for p in stage.outputs[:4]:
        run.log_artifact(p)


STAGES = {"download": download, "preprocess": preprocess, "train": train, "sweep": sweep, "evaluate": evaluate,
          "report": report}
