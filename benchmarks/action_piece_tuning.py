"""The learner sweep behind action_piece's default ``train.batch``: arms trained on a *tuning* world and tuning seeds,
never on the evaluation world (``world.seed`` 0) or the evaluation seeds (0, 1, 2).

    PYTHONPATH=src python benchmarks/action_piece_tuning.py [--world-seed 100] [--seeds 100 101]
        [--arms fixed_tokens spr] [--grid '{"b128": {}, "b32": {"train.batch": 32}}']

The world has the default scale's size (300 items x 500 users, vocabulary 300); the settings start from the default
scale's values with batch 128 and each grid entry overrides ``section.key``. Prints per arm and seed the test
NDCG@10 of one encoding (q1) and of the fused q-ensemble, the invalid-beam rate, validation NDCG@10 per epoch and
the CPU seconds.
"""
from __future__ import annotations

import argparse
import copy
import json
import time

import torch

from icml25.studies.action_piece import data as D
from icml25.studies.action_piece import experiment as X
from icml25.studies.action_piece.stages import vocab_corpus
from icml25.studies.action_piece.tokenizer import build_vocabulary

BASE = {"model": dict(backend="torch", d_model=64, d_ff=256, n_heads=4, d_kv=16, n_enc=2, n_dec=2, dropout=0.1),
        "train": dict(history=5, batch=128, lr=3e-3, weight_decay=0.1, epochs=2), "infer": dict(beams=10, q=3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world-seed", type=int, default=100, help="tuning world (the evaluation world is seed 0)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[100, 101], help="tuning training seeds (>= 100)")
    ap.add_argument("--arms", nargs="+", default=["fixed_tokens", "spr"], choices=list(X.ARM_MODE))
    ap.add_argument("--grid", default='{"b128": {}, "b32": {"train.batch": 32}}',
                    help="JSON {name: {section.key: value}}")
    args = ap.parse_args()
    if args.world_seed == 0 or min(args.seeds) < 100:
        ap.error("tune on a world other than seed 0 and on training seeds >= 100 only")
    torch.set_num_threads(1)
    items_df, seqs_df = D.generate_world(300, 500, args.world_seed)
    items = [tuple(int(v) for v in r) for r in items_df.drop(columns="item_id").itertuples(index=False)]
    seqs = [list(map(int, s)) for s in seqs_df["item_ids"]]
    tok = build_vocabulary(vocab_corpus("world", items, seqs, 30), 300, items=items)
    splits = D.split(seqs)
    print("| setting | arm | seed | NDCG@10 q1 | NDCG@10 fused | invalid beams | val NDCG@10 per epoch | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, overrides in json.loads(args.grid).items():
        settings = copy.deepcopy(BASE)
        for key, value in overrides.items():
            section, field = key.split(".")
            settings[section][field] = value
        for arm in args.arms:
            arm_tok = X.no_merge_tokenizer(tok) if arm == "fixed_tokens" else tok
            for seed in args.seeds:
                t0 = time.process_time()
                r = X.run(settings, arm, seed, items, splits, arm_tok)
                q1, fused = (X.ranking_metrics(r[k])["ndcg10"] for k in ("test_q1", "test_fused"))
                val = ", ".join(f"{v:.4f}" for v in r["val_ndcg10"])
                print(f"| {name} | {arm} | {seed} | {q1:.4f} | {fused:.4f} | {r['invalid_rate']:.2f} | {val} "
                      f"| {time.process_time() - t0:.1f} |", flush=True)


if __name__ == "__main__":
    main()
