"""Run the morphing_flow grid of one scale in memory (every dataset x arm x seed through ``experiment.run``), print
the metrics, the claim verdicts, the wall time and the peak RSS.

    python benchmarks/morphing_flow_default.py                      # default scale, its evaluation seeds
    python benchmarks/morphing_flow_default.py --scale smoke
    python benchmarks/morphing_flow_default.py --seeds 100 101 102  # tuning seeds (never the evaluation seeds)
    python benchmarks/morphing_flow_default.py --json /tmp/mof.json
"""
from __future__ import annotations

import argparse
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # before numpy / torch load BLAS
    os.environ.setdefault(_var, "1")

import json  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def verdicts(st: dict, res: dict) -> dict[str, dict]:
    """The four verdicts from the results ``{(dataset, arm, seed): run output}`` (claims whose arms are missing are
    skipped)."""
    from icml25.studies.morphing_flow import evaluate as E

    seeds, ev = st["seeds"], st["eval"]
    have = lambda ds, arm: all((ds, arm, s) in res for s in seeds)  # noqa: E731
    pooled = lambda ds, arm, seg=False: np.concatenate(  # noqa: E731
        [res[(ds, arm, s)]["per_window"]["mse"][res[(ds, arm, s)]["per_window"]["segment"]] if seg
         else res[(ds, arm, s)]["per_window"]["mse"] for s in seeds])
    out: dict[str, dict] = {}
    ids = [r["identities"] for r in res.values() if r["identities"] is not None]
    if ids:
        holds, stat = E.check_flow_identities([i["inverse_err"] for i in ids], [i["logdet_err"] for i in ids],
                                              [i["monotone"] for i in ids], [i["zero_identity_err"] for i in ids],
                                              [i["m1_bitwise"] for i in ids])
        out["c1_flow_identities"] = {"holds": holds, **stat}
    if have("synth", "mof_flow") and have("synth", "revin_linear"):
        k = lambda arm: [res[("synth", arm, s)]["metrics"]["kurtosis_in"] for s in seeds]  # noqa: E731
        rep, nrep, stat = E.verdict_tail_slimming(k("mof_flow"), k("revin_linear"))
        out["c2_tail_slimming"] = {"reproduced": rep, "not_reproduced": nrep, **stat}
    for ds in st["datasets"]:
        if have(ds, "mof_linear") and have(ds, "revin_linear"):
            rep, nrep, stat = E.verdict_accuracy(pooled(ds, "mof_linear"), pooled(ds, "revin_linear"),
                                                 ev["n_boot"], ev["boot_seed"])
            out[f"c3_accuracy_{ds}"] = {"reproduced": rep, "not_reproduced": nrep, **stat}
    if have("synth", "mof_linear") and have("synth", "mof_flow"):
        rep, nrep, stat = E.verdict_morph(pooled("synth", "mof_linear", True), pooled("synth", "mof_flow", True),
                                          ev["n_boot"], ev["boot_seed"])
        out["c4_morph"] = {"reproduced": rep, "not_reproduced": nrep, **stat}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="default", choices=["smoke", "default"], help="settings scale")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the seeds")
    parser.add_argument("--arms", nargs="+", default=None, help="restrict to these arms")
    parser.add_argument("--datasets", nargs="+", default=None, help="restrict to these datasets")
    parser.add_argument("--set", nargs="+", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting (JSON value), e.g. train.windows_per_epoch=2048")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--json", default=None, help="write metrics and verdicts to this JSON file")
    args = parser.parse_args(argv)

    import torch

    from icml25.studies.morphing_flow import settings as S
    from icml25.studies.morphing_flow.experiment import run

    torch.set_num_threads(args.threads)
    st = S.get(args.scale)
    if args.seeds is not None:
        st["seeds"] = list(args.seeds)
    for item in args.set:
        key, value = item.split("=", 1)
        section, name = key.split(".", 1)
        st[section][name] = json.loads(value)
    arms = [a for a in st["arms"] if not args.arms or a in args.arms]
    datasets = [d for d in st["datasets"] if not args.datasets or d in args.datasets]

    t0, c0 = time.perf_counter(), time.process_time()
    res: dict[tuple[str, str, int], dict] = {}
    for ds in datasets:
        for arm in arms:
            for seed in st["seeds"]:
                out = run(st, arm, seed, ds)
                res[(ds, arm, seed)] = out
                m = out["metrics"]
                seg = f"{m['segment_mse']:.4f}" if m["segment_mse"] is not None else "-"
                print(f"{ds:6s} {arm:17s} seed {seed:3d} {out['seconds']:6.1f}s (cpu {out['cpu_seconds']:5.1f}s)  mse {m['test_mse']:.4f}  "
                      f"mae {m['test_mae']:.4f}  kurt_in {m['kurtosis_in']:7.3f}  seg_mse {seg}  "
                      f"epochs {m['epochs_run']} (best {m['best_epoch']})  val {m['val_mse']:.4f}", flush=True)
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print("\ntest MSE, mean ± sd over seeds", st["seeds"])
    for ds in datasets:
        for arm in arms:
            v = np.array([res[(ds, arm, s)]["metrics"]["test_mse"] for s in st["seeds"]])
            k = np.array([res[(ds, arm, s)]["metrics"]["kurtosis_in"] for s in st["seeds"]])
            print(f"  {ds:6s} {arm:17s} mse {v.mean():.4f} ± {v.std(ddof=1) if len(v) > 1 else 0:.4f}   "
                  f"kurtosis_in {k.mean():7.3f}")
    verd = verdicts(st, res)
    print("\nverdicts")
    for name, v in verd.items():
        if "holds" in v:
            word = "holds" if v["holds"] else "FAILS"
        else:
            word = "reproduced" if v["reproduced"] else ("not reproduced" if v["not_reproduced"] else "inconclusive")
        brief = {k: (round(x, 5) if isinstance(x, float) else x) for k, x in v.items()
                 if k in ("max_inverse_err", "max_logdet_err", "max_zero_identity_err", "n_m1_bitwise", "n",
                          "reduction", "mean_reduction", "rel_change", "lo", "hi", "mean_diff")}
        print(f"  {name:22s} {word:15s} {brief}")
    print(f"\nscale {args.scale}: {len(res)} runs, wall {total:.1f} s, process CPU {cpu:.1f} s, peak RSS {rss_mb:.0f} MB")
    if args.json:
        doc = {"scale": args.scale, "seconds": total, "cpu_seconds": cpu, "peak_rss_mb": rss_mb, "verdicts": verd,
               "metrics": {f"{d}/{a}/seed{s}": r["metrics"] for (d, a, s), r in res.items()},
               "curves": {f"{d}/{a}/seed{s}": r["curves"] for (d, a, s), r in res.items()}}
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
