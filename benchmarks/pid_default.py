"""Run the pid grid (arms x seeds at one scale) in memory and print metrics, checks and verdicts.

    python benchmarks/pid_default.py                       # default scale, seeds 0 1 2, 2 workers
    python benchmarks/pid_default.py --scale smoke
    python benchmarks/pid_default.py --seeds 100 101 102   # tuning seeds (never the evaluation seeds)

The data and the three autoencoder generators are prepared once (generators at seed 0), then each arm x seed runs
:func:`icml25.studies.pid.experiment.run` in a worker process with one torch thread. Prints per arm the seed means
of held-out accuracies (decoders A, B, C; JPEG 95/75; PNG- vs JPEG-sourced reals), the checks of claims 1-2, the
verdict of claim 3, the wall time and the peak RSS.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from icml25.studies.pid import experiment as E  # noqa: E402

_DATA = None


def _init(settings):
    global _DATA
    import torch
    torch.set_num_threads(1)
    _DATA = E.prepare(settings)  # deterministic: every worker rebuilds the same data (cheaper than pickling AEs)


def _job(args):
    settings, arm, seed = args
    out = E.run(settings, arm, seed, _DATA)
    out.pop("model")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="default", choices=sorted(E.SCALES))
    ap.add_argument("--seeds", type=int, nargs="*", help="detector seeds (default: the scale's)")
    ap.add_argument("--arms", nargs="*", help="arms (default: the scale's)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    s = dict(E.SCALES[a.scale])
    if a.seeds:
        s["seeds"] = tuple(a.seeds)
    if a.arms:
        s["arms"] = tuple(a.arms)
    t0 = time.time()
    import torch
    torch.set_num_threads(1)
    data = E.prepare(s)
    print(f"prepare {time.time() - t0:.1f}s  train crops {len(data['train_real'])}  test crops "
          f"{len(data['test_real'])}  AE test PSNR " + " ".join(f"{g}={v:.2f}" for g, v in data["ae_psnr"].items()))
    chk = E.checks(s, data)
    for name, (holds, st) in chk.items():
        print(f"check {name}: holds={holds} {json.dumps(st)}")
    jobs = [(s, arm, seed) for arm in s["arms"] for seed in s["seeds"]]
    with ProcessPoolExecutor(a.workers, initializer=_init, initargs=(s,)) as ex:
        runs = list(ex.map(_job, jobs))
    summ = E.summarise(s, runs)
    keys = list(next(iter(summ["table"].values())))
    print("arm        " + " ".join(k.replace("test/", "")[:14].rjust(14) for k in keys))
    for arm, row in summ["table"].items():
        print(f"{arm:10s} " + " ".join(f"{row[k]:14.3f}" for k in keys))
    for r in runs:
        print(f"{r['arm']:10s} seed {r['seed']}: val/acc {[round(v, 3) for v in r['curves']['val/acc']]} "
              f"heldout {r['metrics']['test/acc_heldout']:.3f}")
    if "generalisation" in summ:
        rep, nrep, st = summ["generalisation"]
        print(f"claim 3 (pid - rgb held-out acc): reproduced={rep} not_reproduced={nrep} {json.dumps(st)}")
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(f"wall {time.time() - t0:.1f}s  peak RSS {rss / 1024:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
