"""ActionPiece vocabulary construction on corpora of growing size: the cost of a merge follows the sequences it
touches, not the corpus size.

    PYTHONPATH=src python benchmarks/action_piece_merges.py [--sizes 500 1000 2000 4000 8000] [--merges 200]

Each corpus is the train prefixes of a Markov feature world (600 items, ``--sizes`` users, generator seed 0);
:func:`build_vocabulary_with_stats` makes ``--merges`` merges with no brute-force checks and records, per merge, the
sequences it updated and its CPU time (selection from the lazy heap + update of the affected sequences). Printed:

1. per corpus: merges/s, mean affected sequences per merge (and their share of the corpus), time per affected
   sequence (flat across sizes if the corpus size adds nothing), and the time of one brute-force recount of the
   whole corpus (what every merge would cost without the pair -> sequences index) relative to a mean merge;
2. a least-squares fit over every merge of every corpus, ``seconds = a + b * affected + c * corpus_size``: ``b``
   is the cost per affected sequence, ``c`` what the corpus size adds with the affected count held fixed.

Timings are CPU time of this process (``time.process_time``), which a loaded machine inflates less than wall time;
still compare ratios within one run.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from icml25.studies.action_piece.data import generate_world, split
from icml25.studies.action_piece.tokenizer import (ActionPieceTokenizer, brute_force_totals,
                                                   build_vocabulary_with_stats, scale_L)


def world_corpus(n_users: int, n_items: int, seed: int = 0) -> tuple[list[tuple[int, ...]], list[list[tuple]]]:
    """Item tuples and the vocabulary corpus (train prefixes: all but the last two actions) of one world."""
    items_df, seqs_df = generate_world(n_items, n_users, seed)
    items = [tuple(int(v) for v in row) for row in items_df.drop(columns="item_id").itertuples(index=False)]
    train = split(list(seqs_df["item_ids"]))["train"]
    return items, [[items[i] for i in s] for s in train]


def recount_seconds(items, corpus) -> float:
    """CPU time of one brute-force recount of every pair weight of the (unmerged) corpus."""
    m = len(items[0])
    tok = ActionPieceTokenizer(m, sorted({(k, v) for it in items for k, v in enumerate(it)}))
    states = [tok.initial_state(s) for s in corpus]
    t0 = time.process_time()
    brute_force_totals(states, scale_L(m))
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000, 4000, 8000],
                    help="corpus sizes (users = sequences)")
    ap.add_argument("--merges", type=int, default=200, help="merges per corpus")
    ap.add_argument("--items", type=int, default=600, help="items of the world")
    args = ap.parse_args()

    rows, xs, ys = [], [], []
    print("| sequences | merges | merges/s | mean affected / merge | affected share | µs / affected seq "
          "| ms / full recount | recount / merge |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        items, corpus = world_corpus(n, args.items)
        n_init = len({(k, v) for it in items for k, v in enumerate(it)}) + 1
        tok, st = build_vocabulary_with_stats(corpus, n_init + args.merges, items=items)
        sec = np.asarray(st.merge_cpu_seconds)
        aff = np.asarray(st.affected, dtype=float)
        rec = recount_seconds(items, corpus)
        total = float(sec.sum())
        rows.append((n, len(tok.merges), len(tok.merges) / total, aff.mean(), 1e6 * total / aff.sum(), 1e3 * rec))
        print(f"| {n} | {len(tok.merges)} | {rows[-1][2]:.0f} | {aff.mean():.1f} | {aff.mean() / len(corpus):.3f} "
              f"| {rows[-1][4]:.1f} | {1e3 * rec:.1f} | {rec * len(tok.merges) / total:.1f} |")
        xs.append(np.column_stack([np.ones_like(aff), aff, np.full_like(aff, n)]))
        ys.append(sec)
    X, y = np.vstack(xs), np.concatenate(ys)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    a, b, c = coef
    resid = y - X @ coef
    r2 = 1 - float(resid @ resid) / float(((y - y.mean()) ** 2).sum())
    small, large = rows[0], rows[-1]
    print()
    print(f"least squares over {len(y)} merges: CPU s/merge = {a * 1e6:.0f} µs + {b * 1e6:.1f} µs x affected "
          f"+ {c * 1e9:.0f} µs x (corpus size / 1000) (R² = {r2:.3f})")
    print(f"at the mean affected count of the largest corpus ({large[3]:.0f}) the affected term is "
          f"{b * large[3] * 1e6:.0f} µs, the corpus-size term at {large[0]} sequences {c * large[0] * 1e6:.0f} µs")
    print(f"corpus x{large[0] / small[0]:.0f}: mean affected x{large[3] / small[3]:.1f}, time/merge "
          f"x{small[2] / large[2]:.1f}, time/affected seq x{large[4] / small[4]:.2f}, full recount "
          f"x{large[5] / small[5]:.1f}")


if __name__ == "__main__":
    main()
