"""Benchmark rip's pair scoring (spec "Pair scoring"): responses sampled and scored per second, batched on the
tensor side (one forward per new token for a whole batch, key/value cache) vs one sequence at a time.

    python benchmarks/rip_pair_scoring.py                         # default world pool, N=16, 1 torch thread
    python benchmarks/rip_pair_scoring.py --prompts 500 --n 16 --seed-model results/default/rip/models/seed.pt

Without ``--seed-model`` (or if the file is missing) a seed model is SFT-trained here for ``--sft-steps`` steps
(an untrained model never emits EOS, which would make every response as long as possible). The one-at-a-time
mode runs on ``--single-prompts`` prompts only (it is slow) and its rate is extrapolated per response.
Prints a table: mode, batch size, responses, sample s, judge s, responses/s, speed-up over one at a time.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2000, help="pool prompts (default world: 2000)")
    parser.add_argument("--n", type=int, default=16, help="responses per prompt")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 1024, 8192],
                        help="tensor batch sizes of the batched mode")
    parser.add_argument("--single-prompts", type=int, default=25, help="prompts of the one-at-a-time mode")
    parser.add_argument("--seed-model", type=Path, default=Path("results/default/rip/models/seed.pt"))
    parser.add_argument("--sft-steps", type=int, default=300, help="SFT steps if no seed model is found")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)

    from icml25.studies.rip.config import ModelCfg, World
    from icml25.studies.rip.data import decode, generate_split
    from icml25.studies.rip.judge import judge_matrix
    from icml25.studies.rip.model import build_model, encode_batch, generate, load_state, sample_responses
    from icml25.studies.rip.train import train_sft

    model = build_model(ModelCfg())
    if args.seed_model.is_file():
        model.load_state_dict(load_state(args.seed_model))
        source = str(args.seed_model)
    else:
        sft = generate_split("sft", World().n_sft)
        torch.manual_seed(0)
        train_sft(model, list(sft["prompt"]), list(sft["demo"]), steps=args.sft_steps, batch=64, lr=3e-3, seed=0)
        source = f"SFT {args.sft_steps} steps here"
    model.eval()
    pool = generate_split("pool", args.prompts)
    prompts, targets, caps = list(pool["prompt"]), list(pool["target"]), list(pool["cap"])
    kw = dict(temperature=0.8, top_p=0.95)

    rows = []
    # one at a time: a Python loop over sequences, each decoded alone (batch of 1)
    k = min(args.single_prompts, len(prompts))
    gen = torch.Generator().manual_seed(0)
    t0 = time.perf_counter()
    single = [[decode(generate(model, encode_batch([p]), 12, generator=gen, **kw)[0].tolist())
               for _ in range(args.n)] for p in prompts[:k]]
    t1 = time.perf_counter()
    judge_matrix(single, targets[:k], caps[:k], 0.05, np.random.default_rng(0))
    t2 = time.perf_counter()
    rows.append(("one at a time", 1, k * args.n, t1 - t0, t2 - t1))
    for bs in args.batch_sizes:
        t0 = time.perf_counter()
        resp = sample_responses(model, prompts, args.n, 12, seed=0, batch_size=bs, **kw)
        t1 = time.perf_counter()
        judge_matrix(resp, targets, caps, 0.05, np.random.default_rng(0))
        t2 = time.perf_counter()
        rows.append(("batched", bs, len(prompts) * args.n, t1 - t0, t2 - t1))

    base = rows[0][2] / (rows[0][3] + rows[0][4])
    print(f"rip pair scoring: seed model {source}; {args.prompts} prompts x N={args.n}; T=0.8, top_p=0.95, "
          f"<=12 new tokens; torch threads {args.threads}")
    print(f"{'mode':<14} {'batch':>6} {'responses':>9} {'sample s':>9} {'judge s':>8} {'resp/s':>9} {'speed-up':>8}")
    for mode, bs, n, ts, tj in rows:
        rate = n / (ts + tj)
        print(f"{mode:<14} {bs:>6} {n:>9} {ts:>9.2f} {tj:>8.2f} {rate:>9.0f} {rate / base:>7.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
