"""The ActionPiece vocabulary at the paper's size (40,000 tokens) on an Amazon-shaped corpus: does the merge code
scale to 40k merges, and what would the paper's categories cost?

    PYTHONPATH=src python benchmarks/action_piece_vocab40k.py [--users 4000] [--items 3000] [--vocab 40000]

The corpus has the paper's item shape (4 product-quantiser codes of 256 values + a hash feature, m = 5; codes drawn
so that items of one of 64 "topics" share leading codes, as sentence-embedding codes of similar texts do) and the
5-core sequence lengths of Amazon 2014 Sports (5-20 actions; train prefixes = all but the last two). The build
records, per merge, the sequences it touched (``affected``) and its CPU time.

Why the bound below holds: every sequence a merge touches holds the pair, so the merge rewrites at least one place
there and the sequence loses at least one token; a sequence of T tokens in R runs can lose at most T - R. Hence
sum over all merges of ``affected`` <= total tokens of the corpus, whatever the vocabulary size, and the whole build
costs at most (total tokens) x (seconds per affected sequence) plus the heap work. Printed: merges/s by merge range,
sum of affected vs total tokens, seconds per affected sequence, peak RSS, and the bound for the paper's three
categories (token counts from the paper's Table 1 statistics: users x (mean actions - 2) x 5).
"""
from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from icml25.studies.action_piece.tokenizer import build_vocabulary_with_stats

#: users, interactions of the Amazon 2014 5-core categories (McAuley et al.; the paper's Table 1)
PAPER = {"Sports_and_Outdoors": (35598, 296337), "Beauty": (22363, 198502), "CDs_and_Vinyl": (75258, 1097592)}


def amazon_like(n_users: int, n_items: int, seed: int = 0) -> tuple[list[tuple[int, ...]], list[list[tuple]]]:
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, 64, n_items)
    base = rng.integers(0, 256, (64, 4))
    codes = np.where(rng.random((n_items, 4)) < np.array([0.8, 0.6, 0.3, 0.1]), base[topic],
                     rng.integers(0, 256, (n_items, 4)))
    seen: dict[tuple, int] = {}
    items = []
    for row in codes:
        t = tuple(int(v) for v in row)
        seen[t] = seen.get(t, -1) + 1
        items.append((*t, seen[t]))
    by_topic = {k: np.flatnonzero(topic == k) for k in range(64)}
    corpus = []
    for _ in range(n_users):
        length = int(min(20, 5 + rng.geometric(0.3)))
        k = int(rng.integers(64))
        s = []
        for _ in range(length):
            if rng.random() < 0.3:
                k = int(rng.integers(64))
            pool = by_topic[k] if len(by_topic[k]) else np.arange(n_items)
            s.append(items[int(rng.choice(pool))])
        corpus.append(s[:-2])
    return items, corpus


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=4000)
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--vocab", type=int, default=40000)
    args = ap.parse_args()
    items, corpus = amazon_like(args.users, args.items)
    tokens = sum(len(s) for s in corpus) * 5
    t0 = time.process_time()
    tok, st = build_vocabulary_with_stats(corpus, args.vocab, items=items)
    cpu = time.process_time() - t0
    n = len(tok.merges)
    aff = np.asarray(st.affected)
    sec = np.asarray(st.merge_cpu_seconds)
    print(f"corpus: {args.users} sequences, {tokens} tokens, {tok.n_init} initial tokens; vocabulary "
          f"{tok.vocab_size} ({n} merges) in {cpu:.1f} CPU-s (build incl. counting), peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print("| merges | merges/s | mean affected | CPU-s |")
    print("|---|---|---|---|")
    for lo, hi in ((0, 1000), (1000, 5000), (5000, 10000), (10000, 20000), (20000, 30000), (30000, n)):
        if lo >= n:
            break
        s = sec[lo:hi]
        print(f"| {lo}-{min(hi, n)} | {len(s) / max(s.sum(), 1e-9):.0f} | {aff[lo:hi].mean():.1f} | {s.sum():.1f} |")
    per = sec.sum() / max(aff.sum(), 1)
    print(f"sum of affected {aff.sum()} <= tokens {tokens}: {aff.sum() <= tokens}; {per * 1e6:.0f} µs of merge CPU "
          f"per affected sequence; cross-action share {st.cross / max(n, 1):.3f}")
    for cat, (users, inter) in PAPER.items():
        t = 5 * (inter - 2 * users)
        print(f"{cat}: {t} train tokens -> merge work <= {t * per / 60:.1f} CPU-min at this cost per affected "
              f"sequence (longer sequences cost more per recount)")


if __name__ == "__main__":
    main()
