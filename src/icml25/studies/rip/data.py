"""The synthetic instruction world (spec "Instruction world" [R]) and the raw split files.

Vocabulary (24 tokens), one character per token so that strings, lengths (m2, in characters) and the judge's
Levenshtein distance all work on tokens:

=========  =====  ==========================================
token ids  chars  meaning
=========  =====  ==========================================
0–9        0–9    digits
10–13      RSCI   ops REV, SORT, COPY, INC
14         A      AMBIG (hidden intent REV or SORT)
15–19      VWXYZ  junk ops J0–J4
20, 21     < |    BOS, SEP
22, 23     > _    EOS, PAD
=========  =====  ==========================================

A prompt is ``BOS op a_1..a_k SEP`` (string ``"<R3141|"``); a target is ``op(a)`` without EOS (``"1413"``).
Quality classes (column ``quality``): clean, garbled (junk op or args cut to 1–2 digits; judged against a hidden
random op on the full args, reward capped), ambiguous (AMBIG, hidden intent U{REV, SORT}), wrong_pref (the judge
uses another op). Splits are drawn with ``default_rng([data_seed, split_id])``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

CHARS = "0123456789RSCIAVWXYZ<|>_"
VOCAB_SIZE = len(CHARS)  # 24
OPS = ("R", "S", "C", "I")  # REV, SORT, COPY, INC
AMBIG, JUNK = "A", "VWXYZ"
BOS, SEP, EOS, PAD = 20, 21, 22, 23
CHAR_TO_ID = {c: i for i, c in enumerate(CHARS)}
SPLITS = {"sft": 0, "pool": 1, "val": 2, "test": 3}
QUALITIES = ("clean", "garbled", "ambiguous", "wrong_pref")
RAW_COLUMNS = ("prompt_id", "prompt", "quality", "target", "cap")


def apply_op(op: str, args: str) -> str:
    """``op(args)`` on a digit string: R reverses, S sorts ascending, C copies, I adds 1 mod 10 per digit."""
    if op == "R":
        return args[::-1]
    if op == "S":
        return "".join(sorted(args))
    if op == "C":
        return args
    if op == "I":
        return "".join(str((int(c) + 1) % 10) for c in args)
    raise ValueError(f"apply_op: unknown op {op!r} (known: {OPS})")


def encode(text: str) -> list[int]:
    """Token ids of a string in the world's alphabet; an unknown character raises naming it."""
    try:
        return [CHAR_TO_ID[c] for c in text]
    except KeyError as err:
        raise ValueError(f"encode: character {err.args[0]!r} is not in the vocabulary {CHARS!r}") from None


def decode(ids) -> str:
    """String of token ids up to (excluding) the first EOS; PAD is skipped."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS:
            break
        if i != PAD:
            out.append(CHARS[i])
    return "".join(out)


def _digits(rng: np.random.Generator, k: int) -> str:
    return "".join(map(str, rng.integers(0, 10, size=k)))


def corrupt(target: str, rng: np.random.Generator) -> str:
    """A corrupted demonstration [R]: 1–2 random edits (substitute, delete or insert a digit)."""
    out = list(target)
    for _ in range(int(rng.integers(1, 3))):
        kind = int(rng.integers(0, 3)) if out else 2
        if kind == 0:
            out[int(rng.integers(0, len(out)))] = str(int(rng.integers(0, 10)))
        elif kind == 1:
            del out[int(rng.integers(0, len(out)))]
        else:
            out.insert(int(rng.integers(0, len(out) + 1)), str(int(rng.integers(0, 10))))
    return "".join(out)


def generate_split(split: str, n: int, *, data_seed: int = 0, min_args: int = 3, max_args: int = 8,
                   share_garbled: float = 0.15, share_ambiguous: float = 0.15, share_wrong_pref: float = 0.0,
                   garbled_cap: float = 0.3, sft_corrupt: float = 0.2) -> pd.DataFrame:
    """One split of the world as a frame with columns ``prompt_id`` (int64), ``prompt``, ``quality``,
    ``target`` (the hidden-intent answer the judge compares with), ``cap`` (float64, the judge's cap: 1 or
    ``garbled_cap``) and, for ``sft``, ``demo`` (the demonstration: target, corrupted with prob ``sft_corrupt``).

    ``val`` and ``test`` are clean only (spec: clean validation/test prompts); ``sft`` and ``pool`` follow the
    class mix. Deterministic in ``(data_seed, split)``.
    """
    if split not in SPLITS:
        raise ValueError(f"generate_split: unknown split {split!r} (known: {list(SPLITS)})")
    rng = np.random.default_rng([data_seed, SPLITS[split]])
    mixed = split in ("sft", "pool")
    p = np.array([1 - share_garbled - share_ambiguous - share_wrong_pref, share_garbled, share_ambiguous,
                  share_wrong_pref]) if mixed else np.array([1.0, 0, 0, 0])
    classes = rng.choice(len(QUALITIES), size=n, p=p)
    rows = []
    for i, c in enumerate(classes):
        quality = QUALITIES[c]
        args = _digits(rng, int(rng.integers(min_args, max_args + 1)))
        op = OPS[int(rng.integers(0, len(OPS)))]
        cap = 1.0
        if quality == "clean":
            shown, target = op + args, apply_op(op, args)
        elif quality == "garbled":
            hidden = OPS[int(rng.integers(0, len(OPS)))]
            if rng.random() < 0.5:  # junk op token, full args
                shown = JUNK[int(rng.integers(0, len(JUNK)))] + args
            else:  # real op, args cut to 1–2 digits
                shown = op + args[: int(rng.integers(1, 3))]
            target, cap = apply_op(hidden, args), garbled_cap
        elif quality == "ambiguous":
            intent = ("R", "S")[int(rng.integers(0, 2))]
            shown, target = AMBIG + args, apply_op(intent, args)
        else:  # wrong_pref: the judge prefers another op than the one shown
            other = [o for o in OPS if o != op][int(rng.integers(0, len(OPS) - 1))]
            shown, target = op + args, apply_op(other, args)
        rows.append((i, f"<{shown}|", quality, target, cap))
    df = pd.DataFrame(rows, columns=list(RAW_COLUMNS))
    df["prompt_id"] = df["prompt_id"].astype("int64")
    df["cap"] = df["cap"].astype("float64")
    if split == "sft":
        crng = np.random.default_rng([data_seed, SPLITS[split], 1])
        flags = crng.random(n) < sft_corrupt
        df["demo"] = [corrupt(t, crng) if f else t for t, f in zip(df["target"], flags)]
    return df


def generate_world(world, data_seed: int = 0) -> dict[str, pd.DataFrame]:
    """All four splits from a :class:`~.config.World`."""
    kw = dict(data_seed=data_seed, min_args=world.min_args, max_args=world.max_args,
              share_garbled=world.share_garbled, share_ambiguous=world.share_ambiguous,
              share_wrong_pref=world.share_wrong_pref, garbled_cap=world.garbled_cap,
              sft_corrupt=world.sft_corrupt)
    sizes = {"sft": world.n_sft, "pool": world.n_pool, "val": world.n_val, "test": world.n_test}
    return {split: generate_split(split, n, **kw) for split, n in sizes.items()}


def read_split(path: str | Path, split: str = "") -> pd.DataFrame:
    """Read a raw split parquet; a missing column raises naming it and the file."""
    df = pd.read_parquet(path)
    need = RAW_COLUMNS + (("demo",) if split == "sft" else ())
    missing = [c for c in need if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    return df
