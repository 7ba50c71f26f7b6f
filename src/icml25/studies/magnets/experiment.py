"""One seed of the magnets study end to end in memory (the benchmark driver's unit; the pipeline stages call the
same functions): train the nested generator, decode every arm, score with the evaluator, run the mechanism checks.

``settings`` is the study config as a plain dict (``Config.model_dump()``): ``split_seed``, ``tokenizer``,
``model``, ``train``, ``evaluator``, ``decode`` sections and ``decode_arms``.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from . import data as D
from .evaluate import (arm_schedule, decide_cache, decide_flop_counter, decide_slicing, frechet_distance)
from .method import count_flops, decode_noise, decode_trace
from .model import NestedMaskedTransformer, PlainTransformer, sliced_standalone
from .train import evaluator_outputs, train_evaluator, train_generator


def prepare_data(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Split, tokenizer, tokens, evaluator CNN and the real test features (the preprocess stage in memory)."""
    tk, ev = settings["tokenizer"], settings["evaluator"]
    s = D.load_split(settings["split_seed"])
    cb = D.fit_tokenizer(s["X_train"], tk["K"], tk["pool"], tk["patch"], tk["kmeans_seed"])
    tok_tr = D.encode(s["X_train"], cb, tk["pool"], tk["patch"])
    tok_te = D.encode(s["X_test"], cb, tk["pool"], tk["patch"])
    rt_tr = D.decode_images(tok_tr, cb, tk["pool"], tk["patch"])
    net = train_evaluator(rt_tr, s["y_train"], ev["epochs"], ev["batch_size"], ev["lr"], ev["seed"])
    return {"codebook": cb, "tokens_train": tok_tr, "tokens_test": tok_te, "y_train": s["y_train"],
            "y_test": s["y_test"], "X_train": s["X_train"], "X_test": s["X_test"], "evaluator": net,
            **preprocess_metrics(s, cb, tok_tr, tok_te, net, tk)}


def preprocess_metrics(s: Mapping[str, np.ndarray], cb: np.ndarray, tok_tr: np.ndarray, tok_te: np.ndarray,
                       net: Any, tk: Mapping[str, Any]) -> dict[str, Any]:
    """Real test features and the preprocess metrics: reconstruction MSE, codebook perplexity, evaluator accuracy
    (real and round-tripped test images), the real-vs-real FD floor (100 train images per class vs the test set)
    and the tokenizer floor (round-tripped vs real test)."""
    real_feats, real_pred = evaluator_outputs(net, s["X_test"])
    rt_te = D.decode_images(tok_te, cb, tk["pool"], tk["patch"])
    rt_feats, rt_pred = evaluator_outputs(net, rt_te)
    per_class = [np.flatnonzero(s["y_train"] == c)[:100] for c in range(10)]
    floor_feats, _ = evaluator_outputs(net, s["X_train"][np.concatenate(per_class)])
    return {"real_test_features": real_feats, "metrics": {
        "recon_mse": float(((rt_te - s["X_test"]) ** 2).mean()),
        "codebook_perplexity": D.codebook_perplexity(tok_tr, len(cb)),
        "evaluator_acc_real": float((real_pred == s["y_test"]).mean()),
        "evaluator_acc_roundtrip": float((rt_pred == s["y_test"]).mean()),
        "fd_floor_real": frechet_distance(floor_feats, real_feats),
        "fd_floor_tokenizer": frechet_distance(rt_feats, real_feats)}}


def arm_noise(model: NestedMaskedTransformer, settings: Mapping[str, Any], seed: int) -> list:
    """The random numbers every arm of one seed decodes with (:func:`.method.decode_noise` of the decoding
    generator ``seed_offset + seed``): drawn once per seed and passed to :func:`decode_arm` as ``noise``."""
    dc = settings["decode"]
    gen = torch.Generator().manual_seed(int(dc["seed_offset"]) + int(seed))
    return decode_noise(int(dc["n_samples"]), model.seq_len, model.vocab, int(dc["T"]), gen)


def decode_arm(model: NestedMaskedTransformer, arm: str, settings: Mapping[str, Any], seed: int,
               codebook: np.ndarray, evaluator: Any, real_feats: np.ndarray, noise: list | None = None
               ) -> dict[str, Any]:
    """Decode ``decode.n_samples`` class-balanced samples with one arm (decoding seed = ``seed_offset + seed``,
    the same for every arm: common random numbers; ``noise``: :func:`arm_noise` of this seed, else drawn here) and
    score them. Returns metrics and the tokens."""
    dc, tk = settings["decode"], settings["tokenizer"]
    schedule, use_cache = arm_schedule(arm, dc["magnets_schedule"], dc["T"])
    classes = D.balanced_classes(dc["n_samples"])
    gen = torch.Generator().manual_seed(int(dc["seed_offset"]) + int(seed))
    t0 = time.perf_counter()
    tr = decode_trace(model, torch.as_tensor(classes), schedule, use_cache, dc["T"], dc["choice_temperature"], gen,
                      on_width_change=dc["on_width_change"], noise=noise)
    wall = time.perf_counter() - t0
    tokens = tr["tokens"].numpy().astype(np.uint8)
    feats, pred = evaluator_outputs(evaluator, D.decode_images(tokens, codebook, tk["pool"], tk["patch"]))
    closed = count_flops(schedule, use_cache, model.seq_len, model.dim, model.depth, model.vocab, dc["T"],
                         on_width_change=dc["on_width_change"])
    return {"arm": arm, "seed": int(seed), "schedule": schedule, "use_cache": use_cache,
            "fd": frechet_distance(feats, real_feats), "class_acc": float((pred == classes).mean()),
            "flops_step": [int(f) for f in tr["flops"]], "flops_total": int(sum(tr["flops"])),
            "counter_matches_closed_form": [int(f) for f in tr["flops"]] == closed,
            "wall_s": wall, "wall_ms_per_sample": 1e3 * wall / len(classes), "tokens": tokens, "classes": classes}


def mechanism_checks(model: NestedMaskedTransformer, settings: Mapping[str, Any], seed: int = 0) -> dict[str, Any]:
    """Checks 4(a)–(c) on a trained model. (a) every sub-model vs the standalone sliced model and f = 1 vs
    ``nn.TransformerEncoderLayer`` (float64); (b) a cached pass recomputing every row (shuffled order) vs the
    plain forward, and decoding with the width changing at every step with and without the cache (every row is
    then recomputed: identical tokens); (c) per-step analytic FLOPs vs ``FlopCounterMode`` for every arm."""
    dc = settings["decode"]
    g = torch.Generator().manual_seed(10_000 + seed)
    B, N, K = 16, model.seq_len, model.vocab
    dev = model.pos_emb.device  # inputs are drawn on the CPU generator and moved to the model's device
    tokens = torch.randint(0, K + 1, (B, N), generator=g).to(dev)
    cls = torch.randint(0, model.n_classes, (B,), generator=g).to(dev)
    m64 = _copy(model).double().to(dev)
    with torch.no_grad():
        d_sa = max(float((m64(tokens, cls, f) - sliced_standalone(m64, f)(tokens, cls, 1.0)).abs().max())
                   for f in m64.widths)
        d_pl = float((m64(tokens, cls, 1.0) - PlainTransformer(m64)(tokens, cls)).abs().max())
        d_cache = 0.0
        for f in model.widths:
            ref = model(tokens, cls, f)
            rows = torch.stack([torch.randperm(N + 1, generator=g) for _ in range(B)]).to(dev)
            cache = model.new_cache(B, f)
            out = model.run_rows(tokens, cls, f, rows, N + 1, cache)
            pos = rows - 1  # the class row (-1) is not a position
            keep = pos >= 0
            got = torch.zeros_like(ref)
            got[torch.arange(B, device=dev).unsqueeze(1).expand(-1, N + 1)[keep], pos[keep]] = out[keep]
            d_cache = max(d_cache, float((got - ref).abs().max()))
    widths = sorted(model.widths)
    alternating = [widths[t % 2] if len(widths) > 1 else widths[0] for t in range(dc["T"])]
    classes = torch.arange(min(model.n_classes, 10), device=dev).repeat(2)  # ImageNet: the first 10 classes
    runs = [decode_trace(model, classes, alternating, use, dc["T"], dc["choice_temperature"],
                         torch.Generator().manual_seed(20_000 + seed), on_width_change="refresh")
            for use in (True, False)]
    d_dec = max(float((a - b).abs().max()) for a, b in zip(runs[0]["logits"], runs[1]["logits"]))
    tokens_equal = bool(torch.equal(runs[0]["tokens"], runs[1]["tokens"]))
    analytic, measured = [], []
    for arm in settings["decode_arms"]:
        sched, use = arm_schedule(arm, dc["magnets_schedule"], dc["T"])
        tr = decode_trace(model, classes, sched, use, dc["T"], dc["choice_temperature"],
                          torch.Generator().manual_seed(seed), on_width_change=dc["on_width_change"],
                          measure_flops=True)
        analytic += tr["flops"]
        measured += tr["measured_flops"]
    a_ok, a_stat = decide_slicing(d_sa, d_pl)
    b_ok, b_stat = decide_cache(max(d_cache, d_dec), tokens_equal)
    b_stat.update(max_abs_diff_shuffled_rows=d_cache, max_abs_diff_decode=d_dec)
    c_ok, c_stat = decide_flop_counter(analytic, measured)
    return {"slicing": (a_ok, a_stat), "cache": (b_ok, b_stat), "flop_counter": (c_ok, c_stat)}


def _copy(model: NestedMaskedTransformer) -> NestedMaskedTransformer:
    new = NestedMaskedTransformer(model.vocab, model.n_classes, model.seq_len, model.dim, model.depth, model.heads,
                                  model.mlp_ratio, model.widths).to(model.pos_emb.device)
    new.load_state_dict(model.state_dict())
    return new.eval()


def run(settings: Mapping[str, Any], arm: str, seed: int, data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Train arm ``nested`` for one seed, decode every arm of ``settings['decode_arms']`` and run the mechanism
    checks. ``data`` = :func:`prepare_data` output (computed if None). Returns ``curves`` (per-step training
    curves), ``arms`` {arm: metrics}, ``checks`` and ``train_seconds``."""
    if arm != "nested":
        raise ValueError(f"the only trained arm is 'nested', got {arm!r}")
    data = prepare_data(settings) if data is None else data
    model, curves = train_generator(data["tokens_train"], data["y_train"], settings["model"], settings["train"],
                                    settings["tokenizer"]["K"], seed)
    noise = arm_noise(model, settings, seed)
    arms = {a: decode_arm(model, a, settings, seed, data["codebook"], data["evaluator"], data["real_test_features"],
                          noise) for a in settings["decode_arms"]}
    return {"seed": seed, "curves": curves, "train_seconds": curves["seconds"], "arms": arms,
            "checks": mechanism_checks(model, settings, seed), "model": model}
