"""gpu-check builder of roste (issue 39; :mod:`icml25.core.gpucheck`): the paper's QAT fine-tuning step (§5,
Algorithm 1 with K = 1) through the study's own :mod:`.hf` path — a Hugging Face causal LM of Qwen2.5-0.5B's
architecture, folded, rotated and fake-quantized W4A4KV4 by :func:`.hf.prepare_for_roste` (every rotation on: the
``ste_rot_all`` layout, the most online-rotation work of any arm), trained by :func:`.hf.sft_step` with the
optimizer of :func:`.hf.sft_optimizer`, latent weights in ``paper.dtype`` and ``paper.autocast`` mixed precision.

The model is built from a ``Qwen2Config`` with Qwen2.5-0.5B's sizes (hidden 896, 24 layers, 14 query / 2 K-V heads,
intermediate 4864, vocabulary 151,936, tied embeddings, which preparation unties) and random weights: nothing is
downloaded, and the step's cost does not depend on the weights' values. Tiny shapes: the rehearsal's 2-layer
Qwen2 at 1/8 width (:mod:`.rehearsal`; hidden 112, intermediate 304, 7 / 1 heads), vocabulary 256.

The synthetic batch is ``paper.batch`` sequences of :data:`SEQ_LEN` tokens [R]: the paper path pads each batch to
its longest example (:func:`.paper_data.batches`), ``paper.max_length`` (2048) is only a cap, and TL;DR's posts are
filtered to at most 512 tokens; the first half of each sequence is prompt (label -100). Steps per run: ``epochs``
× ceil(training rows / ``batch``) (TL;DR: 116,722 rows unless ``train_examples``); runs: trained arms (``arms``
without the PTQ arms) × ``seeds`` (one GPU job each, ``seeds_per_job`` 1), every arm counted at this step.
Not in the step: the E(W) logs every ``e_every`` steps, the rotation search and the evaluation's generation.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from icml25.core.gpucheck import Bench

from .config import PTQ_ARMS
from .hf import prepare_for_roste, sft_optimizer, sft_step
from .method import QuantConfig
from .paper_stages import DTYPES

TLDR_TRAIN = 116_722  #: rows of trl-lib/tldr's train split (paper.train_examples null: all of them)
SEQ_LEN = 512  #: [R] padded tokens per sequence at paper shapes (TL;DR posts are filtered to <= 512 tokens)
QWEN25_05B = dict(vocab_size=151_936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32_768,
                  rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True)  #: Qwen2.5-0.5B config.json
TINY = dict(vocab_size=256, hidden_size=112, intermediate_size=304, num_hidden_layers=2, num_attention_heads=7,
            num_key_value_heads=1, max_position_embeddings=512, rope_theta=1_000_000.0, rms_norm_eps=1e-6,
            tie_word_embeddings=True)  #: the rehearsal's tiny Qwen2 (rehearsal._model), vocabulary 256


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    p, q = config.paper, config.quant
    sizes, batch, seq = (QWEN25_05B, p.batch, SEQ_LEN) if shapes == "paper" else (TINY, 2, 32)
    dtype = DTYPES[p.dtype]
    with torch.device(device):
        model = Qwen2ForCausalLM(Qwen2Config(**sizes, torch_dtype=p.dtype)).to(dtype)
    qcfg = QuantConfig(q.w_bits, q.a_bits, q.kv_bits, q.symmetric, q.clip)
    model = prepare_for_roste(model, "all", qcfg, seed=int(config.seeds[0]))

    if p.train_examples is not None:
        rows = int(p.train_examples)
    elif p.dataset == "tldr":
        rows = TLDR_TRAIN
    else:
        raise ValueError(f"roste gpu-check: paper.dataset {p.dataset!r} with paper.train_examples null: the number "
                         "of training rows is unknown here; set paper.train_examples")
    steps_per_run = p.epochs * math.ceil(rows / p.batch)
    opt, sched = sft_optimizer(model, p.lr, p.weight_decay, steps_per_run)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, sizes["vocab_size"], (batch, seq), generator=gen).to(device)
    labels = ids.clone()
    labels[:, : seq // 2] = -100  # the prompt half is masked, as paper_data.tokenise_pair does
    batch_d = {"input_ids": ids, "labels": labels}
    autocast = None if p.autocast is None else DTYPES[p.autocast]
    model.train()

    def step() -> None:
        sft_step(model, opt, sched, batch_d, device, autocast)

    trained = [a for a in config.arms if a not in PTQ_ARMS]
    runs = len(trained) * len(config.seeds)
    return Bench(model=f"Qwen2ForCausalLM({'Qwen2.5-0.5B' if shapes == 'paper' else 'tiny'} sizes, random init; "
                       f"W{q.w_bits}A{q.a_bits}KV{q.kv_bits}, all rotations; batch {batch} x {seq} tokens)",
                 module=model, step=step, steps_per_run=steps_per_run, runs=runs,
                 note=f"{p.epochs} epoch x ceil({rows:,} rows / batch {p.batch}) steps (paper shapes: {SEQ_LEN} tokens [R]); "
                      f"{len(trained)} trained arms {trained} x {len(config.seeds)} seeds, each counted at the "
                      f"all-rotations W4A4KV4 step; latent {p.dtype}, autocast {p.autocast}")
