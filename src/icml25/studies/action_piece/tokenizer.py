"""ActionPiece vocabulary construction and tokenization (Hou et al., ICML 2025, §3: "ActionPiece").

An action is a *set* of item features; a sequence of actions is a linked list ``A_1, s_1, A_2, ..., A_t`` of
*nodes* ``A_j`` (token lists, initially one token per feature) and *slots* ``s_j`` (at most one token, initially
empty; ``0`` = empty, since 0 is PAD and never a real token). The vocabulary is built like BPE, but the count of a
token pair is its *expected adjacency* when every node is shuffled (§3.2.1, Fig. 2):

* inside a node ``A``: ``2/|A|`` per unordered pair;
* adjacent nodes ``A, B`` with an empty slot: ``1/(|A||B|)`` per ``(u in A, v in B)``;
* a slot holding ``c``: ``(u, c) = 1/|A|`` and ``(c, v) = 1/|B|``, no direct ``A``-``B`` pairs.

Weights are kept as integers scaled by ``L = lcm(1..m)^2`` so that ties are exact. Per sequence the weights sum to
``n_tokens - n_runs`` (mass identity; a run is a stretch not broken by an empty node). The most frequent pair (ties:
the lexicographically smallest ``(a, b)``, [R]) is merged into a new token by the update rules of §3.2.2
(:func:`apply_merge`); per-sequence counters, a pair -> sequences index and a lazy max-heap keep each merge's cost
proportional to the sequences that hold the pair. After a merge each affected sequence is recounted from scratch, so
the heap always equals a brute-force recount (the official incremental update does not subtract vanished pairs).

Encoding (§3.3): set permutation regularisation (``shuffle="feature"``) permutes each action's feature tokens and
applies BPE to the flat sequence (leftmost pair of smallest rule id first); ``"none"`` repeatedly merges the
best-scoring (rule, place) on the linked list at that place only (official ``encode(..., shuffle="none")``).

Token ids: PAD = 0; the F features (category k, value v) present get ids 1..F in (k, v) order; ``n_init = F + 1``;
merge ``i`` creates id ``n_init + i``; ``vocab_size = n_init + len(merges)``; BOS = ``vocab_size``, EOS = ``+1``.
"""
from __future__ import annotations

import heapq
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Literal

import numpy as np

Pair = tuple[int, int]
State = tuple[list[list[int]], list[int]]  # (nodes, slots); len(slots) == len(nodes) - 1


def scale_L(m: int) -> int:
    """``L = lcm(1..m)^2``: every weight times L is an integer when node sizes are <= m."""
    return math.lcm(*range(1, m + 1)) ** 2


def _key(u: int, v: int) -> Pair:
    return (u, v) if u <= v else (v, u)


# ------------------------------------------------------------------------------------------- weights


def state_weights(nodes: Sequence[Sequence[int]], slots: Sequence[int], L: int) -> dict[Pair, int]:
    """Integer pair weights (x L) of one sequence state: ``{(a, b) with a <= b: W}`` (no zero entries)."""
    c: dict[Pair, int] = {}
    get = c.get
    t = len(nodes)
    for j in range(t):
        A = nodes[j]
        n = len(A)
        if n >= 2:
            w = 2 * L // n
            for i in range(n):
                x = A[i]
                for k in range(i + 1, n):
                    y = A[k]
                    p = (x, y) if x <= y else (y, x)
                    c[p] = get(p, 0) + w
        if j + 1 < t:
            B, s = nodes[j + 1], slots[j]
            if s == 0:
                if A and B:
                    w = L // (n * len(B))
                    for x in A:
                        for y in B:
                            p = (x, y) if x <= y else (y, x)
                            c[p] = get(p, 0) + w
            else:
                if A:
                    w = L // n
                    for x in A:
                        p = (x, s) if x <= s else (s, x)
                        c[p] = get(p, 0) + w
                if B:
                    w = L // len(B)
                    for y in B:
                        p = (s, y) if s <= y else (y, s)
                        c[p] = get(p, 0) + w
    return c


def state_mass(nodes: Sequence[Sequence[int]], slots: Sequence[int]) -> int:
    """``n_tokens - n_runs``: what the weights of a state sum to (divided by L)."""
    n_tokens = sum(len(A) for A in nodes) + sum(1 for s in slots if s)
    runs, in_run = 0, False
    for j, A in enumerate(nodes):
        slot_before = slots[j - 1] if j > 0 else 0
        if A or slot_before:
            if not in_run:
                runs += 1
                in_run = True
        if not A:  # an empty node breaks the run (a slot after it starts a new one)
            in_run = False
    return n_tokens - runs


def exhaustive_weights(nodes: Sequence[Sequence[int]], slots: Sequence[int]) -> dict[Pair, Fraction]:
    """Reference for the weights: adjacency counts of the flattened runs averaged exactly over every permutation of
    every node (``Fraction``); exponential, for tests on tiny states only."""
    import itertools

    # runs: split at empty nodes; a run is a list of units (("node", tokens) | ("slot", tok))
    runs: list[list[tuple[str, object]]] = [[]]
    for j, A in enumerate(nodes):
        if j > 0 and slots[j - 1]:
            runs[-1].append(("slot", slots[j - 1]))
        if A:
            runs[-1].append(("node", list(A)))
        else:
            runs.append([])
    total: dict[Pair, Fraction] = {}
    for run in runs:
        node_units = [u for kind, u in run if kind == "node"]
        perms = [list(itertools.permutations(u)) for u in node_units]
        n_comb = math.prod(len(p) for p in perms)
        counts: Counter = Counter()
        for choice in itertools.product(*perms):
            flat, it = [], iter(choice)
            for kind, u in run:
                flat.extend(next(it) if kind == "node" else [u])
            for x, y in zip(flat, flat[1:]):
                counts[_key(x, y)] += 1
        for k, v in counts.items():
            total[k] = total.get(k, Fraction(0)) + Fraction(v, n_comb)
    return total


# -------------------------------------------------------------------------------------------- update


def normalize(nodes: list[list[int]], slots: list[int]) -> None:
    """In place, until stable: an empty non-first node takes the token of a non-empty preceding slot; an empty node
    followed by an empty slot is deleted with that slot (an empty last node with an empty slot before it: with that
    slot)."""
    changed = True
    while changed:
        changed = False
        for j in range(len(nodes)):
            if nodes[j]:
                continue
            if j > 0 and slots[j - 1]:
                nodes[j] = [slots[j - 1]]
                slots[j - 1] = 0
                changed = True
                break
            if j + 1 < len(nodes) and slots[j] == 0:
                del nodes[j], slots[j]
                changed = True
                break
            if j == len(nodes) - 1 and j > 0 and slots[j - 1] == 0:
                del nodes[j], slots[j - 1]
                changed = True
                break


def apply_merge(nodes: Sequence[Sequence[int]], slots: Sequence[int], a: int, b: int, new: int) -> State:
    """The state after merging the pair ``(a, b)`` into ``new`` (a copy), §3.2.2, scanning left to right; at A_j:

    1. if ``a, b in A_j`` (a != b): ``new`` goes first in A_j, a and b are removed;
    2. then, if ``s_j`` holds one member and ``A_j`` the other: that member leaves A_j and ``s_j <- new``; else the
       same test on ``(A_{j+1}, s_j)``;
    3. or, if ``s_j`` is empty and ``a in A_j, b in A_{j+1}`` (or the reverse; a == b allowed): both leave and
       ``s_j <- new``;

    then :func:`normalize`.
    """
    ns = [list(A) for A in nodes]
    ss = list(slots)
    for j in range(len(ns)):
        A = ns[j]
        if a != b and a in A and b in A:
            A.remove(a)
            A.remove(b)
            A.insert(0, new)
        if j + 1 >= len(ns):
            continue
        B, s = ns[j + 1], ss[j]
        if s and (s == a or s == b):
            other = b if s == a else a
            if other in A:
                A.remove(other)
                ss[j] = new
            elif other in B:
                B.remove(other)
                ss[j] = new
        elif not s:
            if a in A and b in B:
                A.remove(a)
                B.remove(b)
                ss[j] = new
            elif b in A and a in B:
                A.remove(b)
                B.remove(a)
                ss[j] = new
    normalize(ns, ss)
    return ns, ss


def merge_at(nodes: Sequence[Sequence[int]], slots: Sequence[int], a: int, b: int, new: int,
             place: tuple[str, int]) -> State:
    """The state after merging ``(a, b)`` into ``new`` at one place only (a copy), then :func:`normalize`; the
    naive encoding's update (official ``encode(..., shuffle="none")``). ``place``:

    * ``("in", j)``: a, b in A_j; ``new`` goes first, a and b leave;
    * ``("slot_left", j)`` / ``("slot_right", j)``: s_j holds one member, A_j / A_{j+1} the other, which leaves;
      s_j <- new;
    * ``("across", j)``: s_j empty, a in A_j and b in A_{j+1} (tested first) or the reverse; both leave, s_j <- new.
    """
    ns = [list(A) for A in nodes]
    ss = list(slots)
    kind, j = place
    if kind == "in":
        A = ns[j]
        A.remove(a)
        A.remove(b)
        A.insert(0, new)
    elif kind in ("slot_left", "slot_right"):
        node = ns[j] if kind == "slot_left" else ns[j + 1]
        other = b if ss[j] == a else a
        node.remove(other)
        ss[j] = new
    elif kind == "across":
        A, B = ns[j], ns[j + 1]
        if a in A and b in B:
            A.remove(a)
            B.remove(b)
        else:
            A.remove(b)
            B.remove(a)
        ss[j] = new
    else:
        raise ValueError(f"merge_at: unknown place {place!r}")
    normalize(ns, ss)
    return ns, ss


def flatten_state(nodes: Sequence[Sequence[int]], slots: Sequence[int]) -> list[int]:
    """Tokens of the units in order: ``A_1, s_1, A_2, ...`` (empty slots skipped)."""
    out: list[int] = []
    for j, A in enumerate(nodes):
        out.extend(A)
        if j < len(slots) and slots[j]:
            out.append(slots[j])
    return out


# -------------------------------------------------------------------------------------------- tokenizer


@dataclass
class ActionPieceTokenizer:
    """A built vocabulary: ``feature_ids[(k, v)] -> id`` (1..F), ``merges[i] = (a, b)`` created ``n_init + i``,
    ``priorities[i]`` = its weight W*/L at selection time (expected adjacencies summed over the corpus)."""

    n_categories: int
    features: list[tuple[int, int]]  # id - 1 -> (category, value), sorted
    merges: list[Pair] = field(default_factory=list)
    priorities: list[float] = field(default_factory=list)
    pad_id: int = 0

    def __post_init__(self) -> None:
        self.feature_ids = {f: i + 1 for i, f in enumerate(self.features)}
        self.rank = {p: i for i, p in enumerate(self.merges)}
        self._expand_cache: dict[int, tuple[tuple[int, int], ...]] = {}
        self._int_prio: tuple[int, list[int]] = (-1, [])  # (len(priorities) it was computed at, values)

    @property
    def n_init(self) -> int:
        return len(self.features) + 1

    @property
    def vocab_size(self) -> int:
        """PAD + features + merges (BOS and EOS come after)."""
        return self.n_init + len(self.merges)

    @property
    def bos_id(self) -> int:
        return self.vocab_size

    @property
    def eos_id(self) -> int:
        return self.vocab_size + 1

    # ---- encoding
    def item_tokens(self, item: Sequence[int]) -> list[int]:
        """Feature ids of one item, in category order; an unseen feature raises KeyError naming it."""
        if len(item) != self.n_categories:
            raise ValueError(f"item {tuple(item)}: expected {self.n_categories} features")
        try:
            return [self.feature_ids[(k, int(v))] for k, v in enumerate(item)]
        except KeyError as err:
            raise KeyError(f"item {tuple(item)}: feature (category, value) {err.args[0]} is not in the vocabulary")

    def initial_state(self, sequence: Sequence[Sequence[int]]) -> State:
        nodes = [self.item_tokens(it) for it in sequence]
        return nodes, [0] * max(len(nodes) - 1, 0)

    def encode(self, sequence: Sequence[Sequence[int]], shuffle: Literal["feature", "none"] = "feature",
               rng: np.random.Generator | None = None) -> list[int]:
        """Tokens of an action sequence (list of item tuples). ``"feature"``: set permutation regularisation, each
        item's feature tokens permuted with ``rng`` (None: ``default_rng(0)``), then BPE on the flat sequence;
        ``"none"``: best-scoring rule on the linked list (:meth:`_encode_none`)."""
        if shuffle == "none":
            return self._encode_none(sequence)
        if shuffle != "feature":
            raise ValueError(f"shuffle must be 'feature' or 'none', got {shuffle!r}")
        rng = np.random.default_rng(0) if rng is None else rng
        toks: list[int] = []
        for it in sequence:
            t = self.item_tokens(it)
            toks.extend(t[i] for i in rng.permutation(len(t)))
        return self._bpe(toks)

    def _bpe(self, toks: list[int]) -> list[int]:
        rank, n_init = self.rank, self.n_init
        while len(toks) > 1:
            best, pos = None, -1
            for i in range(len(toks) - 1):
                x, y = toks[i], toks[i + 1]
                r = rank.get((x, y) if x <= y else (y, x))
                if r is not None and (best is None or r < best):
                    best, pos = r, i
            if best is None:
                break
            toks[pos:pos + 2] = [n_init + best]
        return toks

    def _encode_none(self, sequence: Sequence[Sequence[int]]) -> list[int]:
        """Naive segmentation (§4.4 ablation ii; official ``encode(..., shuffle="none")``): repeatedly find the
        best-scoring (rule, place) on the linked list and merge **at that place only** (:func:`merge_at`), then
        tidy empty nodes (:func:`normalize`); output the units in order.

        Scores: priority·2/|A| for a pair inside a node A; priority/|A| between a node A and the filled slot next
        to it; priority/(|A||B|) across adjacent nodes A, B when the slot between them is empty. Scan order per
        node j: inside A_j, then (A_j, s_j) and (A_{j+1}, s_j), or (A_j, A_{j+1}); ties go to the first hit."""
        if not self.merges:
            return [t for it in sequence for t in self.item_tokens(it)]
        nodes, slots = self.initial_state(sequence)
        L = scale_L(self.n_categories)
        W = self._int_priorities()
        rank = self.rank
        while True:
            best_score, best, place = 0, None, None
            for j, A in enumerate(nodes):
                n = len(A)
                for i in range(n):
                    for k in range(i + 1, n):
                        r = rank.get(_key(A[i], A[k]))
                        if r is not None:
                            score = 2 * W[r] * (L // n)  # priority·L²·2/|A| (exact; |A| divides L)
                            if score > best_score:
                                best_score, best, place = score, r, ("in", j)
                if j + 1 >= len(nodes):
                    continue
                B, s = nodes[j + 1], slots[j]
                if s:
                    for node, kind in ((A, "slot_left"), (B, "slot_right")):
                        for u in node:
                            r = rank.get(_key(u, s))
                            if r is not None:
                                score = W[r] * (L // len(node))
                                if score > best_score:
                                    best_score, best, place = score, r, (kind, j)
                else:
                    for u in A:
                        for v in B:
                            r = rank.get(_key(u, v))
                            if r is not None:
                                score = W[r] * (L // (len(A) * len(B)))
                                if score > best_score:
                                    best_score, best, place = score, r, ("across", j)
            if best is None:
                break
            a, b = self.merges[best]
            nodes, slots = merge_at(nodes, slots, a, b, self.n_init + best, place)
        return flatten_state(nodes, slots)

    def _int_priorities(self) -> list[int]:
        """round(priority · L) per merge, computed once per vocabulary (the build only appends merges; the list is
        recomputed when their number changes): :meth:`_encode_none` reads it for every sequence it encodes."""
        n = len(self.priorities)
        if self._int_prio[0] != n:
            L = scale_L(self.n_categories)
            self._int_prio = (n, [int(round(p * L)) for p in self.priorities])
        return self._int_prio[1]

    # ---- decoding
    def expand_token(self, t: int) -> tuple[tuple[int, int], ...]:
        """The (category, value) features a token stands for; KeyError for PAD/BOS/EOS or unknown ids."""
        t = int(t)
        hit = self._expand_cache.get(t)
        if hit is not None:
            return hit
        if 1 <= t < self.n_init:
            out = (self.features[t - 1],)
        elif self.n_init <= t < self.vocab_size:
            a, b = self.merges[t - self.n_init]
            out = self.expand_token(a) + self.expand_token(b)
        else:
            raise KeyError(f"token {t} is not a feature or merge token (n_init={self.n_init}, "
                           f"vocab_size={self.vocab_size})")
        self._expand_cache[t] = out
        return out

    def expand(self, tokens: Iterable[int]) -> list[tuple[int, int]]:
        """The (category, value) multiset of ``tokens`` (in token order)."""
        return [f for t in tokens for f in self.expand_token(t)]

    def decode(self, tokens: Iterable[int]) -> tuple[int, ...] | None:
        """One item ``(v_0, ..., v_{m-1})``, or None unless every category appears exactly once (special or unknown
        tokens also give None)."""
        try:
            feats = self.expand(tokens)
        except KeyError:
            return None
        if len(feats) != self.n_categories:
            return None
        vals: dict[int, int] = {}
        for k, v in feats:
            if k in vals:
                return None
            vals[k] = v
        if set(vals) != set(range(self.n_categories)):
            return None
        return tuple(vals[k] for k in range(self.n_categories))

    # ---- persistence
    def to_json(self) -> dict:
        """``{n_categories, n_init, token2feat, priority}``: token2feat maps each id to ``{"feature": [k, v]}`` or
        ``{"merge": [a, b]}``; ``priority`` lists the merges' W*/L."""
        t2f: dict[str, dict] = {str(i + 1): {"feature": list(f)} for i, f in enumerate(self.features)}
        t2f.update({str(self.n_init + i): {"merge": list(p)} for i, p in enumerate(self.merges)})
        return {"n_categories": self.n_categories, "n_init": self.n_init, "token2feat": t2f,
                "priority": list(self.priorities)}

    @classmethod
    def from_json(cls, doc: Mapping, where: str = "tokenizer") -> ActionPieceTokenizer:
        try:
            n_init, t2f = int(doc["n_init"]), doc["token2feat"]
            feats = [tuple(t2f[str(i)]["feature"]) for i in range(1, n_init)]
            merges = [tuple(t2f[str(i)]["merge"]) for i in range(n_init, n_init + len(t2f) - (n_init - 1))]
            tok = cls(int(doc["n_categories"]), [(int(k), int(v)) for k, v in feats],
                      [(int(a), int(b)) for a, b in merges], [float(p) for p in doc["priority"]])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{where}: not an ActionPiece tokenizer document ({err!r})") from None
        if len(tok.priorities) != len(tok.merges):
            raise ValueError(f"{where}: {len(tok.priorities)} priorities for {len(tok.merges)} merges")
        return tok

    def save(self, path: str | Path) -> None:
        from icml25.core.io import write_json

        write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> ActionPieceTokenizer:
        return cls.from_json(json.loads(Path(path).read_text()), where=str(path))


# ---------------------------------------------------------------------------------------- construction


@dataclass
class BuildStats:
    """Diagnostics of one construction: per checked merge (index, heap W*, brute-force W, brute-force argmax pair),
    the mass identity per checked merge, merge kinds (intra: both tokens in one node somewhere at merge time)."""

    checks: list[dict] = field(default_factory=list)
    mass_ok: bool = True
    intra: int = 0
    cross: int = 0
    seconds: float = 0.0
    affected: list[int] = field(default_factory=list)  # sequences updated per merge
    merge_cpu_seconds: list[float] = field(default_factory=list)  # CPU time of each merge (selection + update)


def brute_force_totals(states: Sequence[State], L: int) -> Counter:
    """Weights summed over the corpus, recounted from scratch."""
    tot: Counter = Counter()
    for nodes, slots in states:
        tot.update(state_weights(nodes, slots, L))
    return tot


def build_vocabulary_with_stats(corpus: Sequence[Sequence[Sequence[int]]], vocab_size: int, *,
                                items: Iterable[Sequence[int]] | None = None,
                                verify: Iterable[int] | Literal["all"] = ()) -> tuple[ActionPieceTokenizer, BuildStats]:
    """:func:`build_vocabulary` plus diagnostics; merges whose index is in ``verify`` (or all) are checked against a
    brute-force recount of the whole corpus (weight, argmax with the tie rule, mass identity)."""
    import time

    t0 = time.perf_counter()
    seqs = [[tuple(int(v) for v in it) for it in seq] for seq in corpus if len(seq)]
    pool = [tuple(int(v) for v in it) for it in items] if items is not None else [it for s in seqs for it in s]
    if not pool:
        raise ValueError("build_vocabulary: empty corpus and no items")
    m = len(pool[0])
    if any(len(it) != m for it in pool) or any(len(it) != m for s in seqs for it in s):
        raise ValueError(f"build_vocabulary: every item must have {m} features")
    if any(v < 0 for it in pool for v in it):
        raise ValueError("build_vocabulary: feature values must be non-negative")
    feats = sorted({(k, v) for it in pool for k, v in enumerate(it)})
    tok = ActionPieceTokenizer(m, feats)
    L = scale_L(m)
    states = [tok.initial_state(s) for s in seqs]
    counters = [state_weights(n, s, L) for n, s in states]
    totals: dict[Pair, int] = {}
    index: dict[Pair, set[int]] = {}
    for i, c in enumerate(counters):
        for p, w in c.items():
            totals[p] = totals.get(p, 0) + w
        for p in c:
            index.setdefault(p, set()).add(i)
    heap = [(-w, a, b) for (a, b), w in totals.items()]
    heapq.heapify(heap)
    stats = BuildStats()
    check_all = verify == "all"
    verify_set = set() if check_all else set(verify)
    merges, prios = tok.merges, tok.priorities
    while tok.n_init + len(merges) < vocab_size:
        t_merge = time.process_time()
        while heap:
            nw, a, b = heap[0]
            if totals.get((a, b), 0) == -nw and nw < 0:
                break
            heapq.heappop(heap)
        if not heap:
            break
        nw, a, b = heapq.heappop(heap)
        w, i_merge, new = -nw, len(merges), tok.n_init + len(merges)
        if check_all or i_merge in verify_set:
            t_check = time.process_time()
            brute = brute_force_totals(states, L)
            top = max(brute.values())
            arg = min(p for p, v in brute.items() if v == top)
            mass = all(sum(state_weights(n, s, L).values()) == L * state_mass(n, s) for n, s in states)
            stats.mass_ok &= mass
            stats.checks.append({"merge": i_merge, "heap_pair": [a, b], "heap_weight": w,
                                 "brute_weight": brute.get((a, b), 0), "brute_pair": list(arg), "brute_max": top,
                                 "mass_identity": mass})
            t_merge += time.process_time() - t_check  # the brute-force check is not part of the merge's cost
        affected = sorted(index.get((a, b), ()))
        stats.affected.append(len(affected))
        intra = any(a in A and b in A for i in affected for A in states[i][0]) and a != b
        stats.intra += intra
        stats.cross += not intra
        delta: dict[Pair, int] = {}  # change of the corpus totals, pushed once per pair after the update
        for i in affected:
            nodes, slots = apply_merge(*states[i], a, b, new)
            states[i] = (nodes, slots)
            old, cnew = counters[i], state_weights(nodes, slots, L)
            counters[i] = cnew
            for p, wn in cnew.items():
                wo = old.get(p, 0)
                if wn != wo:
                    delta[p] = delta.get(p, 0) + wn - wo
                    if not wo:
                        index.setdefault(p, set()).add(i)
            for p, wo in old.items():
                if p not in cnew:
                    delta[p] = delta.get(p, 0) - wo
                    index[p].discard(i)
        for p, d in delta.items():
            if d == 0:
                continue
            t = totals.get(p, 0) + d
            if t:
                totals[p] = t
                heapq.heappush(heap, (-t, *p))
            else:
                del totals[p]
        merges.append((a, b))
        prios.append(w / L)
        stats.merge_cpu_seconds.append(time.process_time() - t_merge)
    tok.rank = {p: i for i, p in enumerate(merges)}
    stats.seconds = time.perf_counter() - t0
    return tok, stats


def build_vocabulary(corpus: list[list[tuple[int, ...]]], vocab_size: int, *, items=None) -> ActionPieceTokenizer:
    """ActionPiece vocabulary (§3.2): merge the pair of largest expected adjacency until ``vocab_size`` ids
    (PAD + features + merges) or no pair is left. ``corpus``: sequences of item tuples (position = category);
    ``items``: every item tuple (seeds the features; default: those in ``corpus``). Deterministic."""
    return build_vocabulary_with_stats(corpus, vocab_size, items=items)[0]


def brute_force_greedy(corpus: Sequence[Sequence[Sequence[int]]], vocab_size: int,
                       items: Iterable[Sequence[int]] | None = None) -> list[Pair]:
    """Reference construction without counters, index or heap: recount everything before each merge, take the
    argmax (ties: smallest pair). Quadratic; for tests."""
    seqs = [[tuple(it) for it in s] for s in corpus if len(s)]
    pool = list(items) if items is not None else [it for s in seqs for it in s]
    m = len(pool[0])
    tok = ActionPieceTokenizer(m, sorted({(k, v) for it in pool for k, v in enumerate(it)}))
    L = scale_L(m)
    states = [tok.initial_state(s) for s in seqs]
    merges: list[Pair] = []
    while tok.n_init + len(merges) < vocab_size:
        tot = brute_force_totals(states, L)
        tot = {p: w for p, w in tot.items() if w > 0}
        if not tot:
            break
        top = max(tot.values())
        a, b = min(p for p, w in tot.items() if w == top)
        new = tok.n_init + len(merges)
        states = [apply_merge(n, s, a, b, new) for n, s in states]
        merges.append((a, b))
    return merges


# ------------------------------------------------------------------------------------------- ensemble


def fuse_rankings(rankings: list[list[tuple | None]]) -> list[tuple]:
    """Fuse the ranked items of q SPR variants (§3.3, inference ensemble; official ``ActionPiece.generate``): each
    valid beam at 0-based position j of its variant adds 1/log2(j + 2) to its item's score, where j counts **every**
    beam of the variant, invalid ones (None) included; invalid beams score nothing. An item found twice adds both.
    The official code sums where the paper says "average" (same order). Sorted by descending score, ties by first
    insertion (variant by variant, beam by beam; a stable sort)."""
    score: dict[tuple, float] = {}
    for ranking in rankings:
        for j, it in enumerate(ranking):
            if it is None:
                continue
            it = tuple(it)
            score[it] = score.get(it, 0.0) + 1.0 / math.log2(j + 2)
    return sorted(score, key=lambda it: -score[it])  # sorted() is stable: ties keep the insertion order
