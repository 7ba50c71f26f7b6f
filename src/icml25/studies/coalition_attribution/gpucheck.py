"""gpu-check builder of coalition_attribution (issue 39; :mod:`icml25.core.gpucheck`): the training steps of the
paper's real-data experiments (Sec. 5; ``train_real`` jobs, :mod:`.realexp`), with the study's own classes and
step functions:

* ``cifar10_resnet20``: :class:`~.realnets.ResNet20` (width 16) on a CIFAR-10 batch of 128, augmented on the CPU
  by :func:`~.realnets._augment` and copied to the device as :func:`~.realnets.train_classifier` does, one
  :func:`~.realnets.classifier_step` (SGD + cosine of :func:`~.realnets.sgd_cosine`);
* ``mnist_vgg11``: :class:`~.realnets.VGG11` (width 64) on a zero-padded MNIST batch of 128, the same step;
* ``sst2_bert_large``: ``BertForSequenceClassification`` built from a ``BertConfig`` of bert-large-uncased's sizes
  (24 layers, hidden 1024, 16 heads, intermediate 4096, vocabulary 30,522; random weights, nothing downloaded) on
  a batch of 32 sequences of ``max_length`` (128) tokens, one :func:`~.realtext.fine_tune_step` (AdamW + warm-up
  / linear decay of :func:`~.realtext.adamw_warmup_linear`, every weight trained). 128 tokens is the cap: the job
  pads each batch to its longest sentence, and SST-2's are short, so the real step is cheaper.

The table has one row per study, so the experiments share it: ``step()`` runs one step of one experiment, chosen
by a fixed interleaving in proportion to the experiments' step counts (each experiment once first, then the one
furthest behind its share), so that the mean step time times the total steps is the summed cost. Steps per run:
the sum over the experiments of ``epochs`` × ceil(training examples / ``batch_size``) (CIFAR-10 50,000, MNIST
60,000, SST-2 67,349, or ``real.max_train``); runs: 1 (one job per experiment, seed ``real.seed``). Not in the
step: the tokenisation, the test accuracy and the 2^n masked forwards of the games. ``sst2_llama`` (a linear head
on a frozen Llama-2-7B) is not built (not part of this check). Tiny shapes: ResNet-20 at width 4, VGG-11 at width
8, a 2-layer BERT of hidden 32, batches of 4 (16 tokens).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from icml25.core.config import to_dict
from icml25.core.gpucheck import Bench

from .realnets import ResNet20, VGG11, _augment, classifier_step, sgd_cosine
from .realtext import adamw_warmup_linear, fine_tune_step

TRAIN_EXAMPLES = {"cifar10_resnet20": 50_000, "mnist_vgg11": 60_000, "sst2_bert_large": 67_349}  #: train splits
BERT_LARGE = dict(vocab_size=30_522, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                  intermediate_size=4096, max_position_embeddings=512, type_vocab_size=2)  #: bert-large-uncased
BERT_TINY = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 max_position_embeddings=64, type_vocab_size=2)


class Interleave:
    """Which experiment the next call runs: each once first, then the one furthest behind its share ``counts[i] /
    sum(counts)`` (ties: the first). After k calls experiment i has run k × share_i times to within the number of
    experiments (the first round puts the small ones ahead; once k × share_i >= 1 for all, to within 1)."""

    def __init__(self, counts: list[int]) -> None:
        if not counts or min(counts) < 1:
            raise ValueError(f"Interleave: counts must be positive, got {counts}")
        self.share = np.asarray(counts, dtype=float) / sum(counts)
        self.done = np.zeros(len(counts))

    def __call__(self) -> int:
        k = int(self.done.sum())
        i = k if k < len(self.share) else int(np.argmax((k + 1) * self.share - self.done))
        self.done[i] += 1
        return i


def _image(name: str, s: dict[str, Any], paper: bool, steps: int, device: torch.device,
           gen: torch.Generator) -> tuple[nn.Module, Any]:
    cifar = name == "cifar10_resnet20"
    width = int(s["width"]) if paper else (4 if cifar else 8)
    model = (ResNet20(3, 10, width) if cifar else VGG11(1, 10, width)).to(device).train()
    opt, sched = sgd_cosine(model, s, steps)
    bs = int(s["batch_size"]) if paper else 4
    x = torch.randn(bs, 3 if cifar else 1, 32, 32, generator=gen)  # normalised images, on the CPU as in training
    y = torch.randint(0, 10, (bs,), generator=gen)

    def step() -> None:
        xb = _augment(x, gen) if s["augment"] else x
        classifier_step(model, opt, sched, xb.to(device), y.to(device))

    return model, step


def _bert(s: dict[str, Any], paper: bool, steps: int, device: torch.device,
          gen: torch.Generator) -> tuple[nn.Module, Any]:
    from transformers import BertConfig, BertForSequenceClassification

    sizes = BERT_LARGE if paper else BERT_TINY
    with torch.device(device):
        model = BertForSequenceClassification(BertConfig(**sizes, num_labels=2)).train()
    opt, sched = adamw_warmup_linear(model, s, steps)
    bs, length = (int(s["batch_size"]), int(s["max_length"])) if paper else (4, 16)
    ids = torch.randint(0, sizes["vocab_size"], (bs, length), generator=gen).to(device)
    enc = {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": torch.ones_like(ids)}
    y = torch.randint(0, 2, (bs,), generator=gen).to(device)

    def step() -> None:
        fine_tune_step(model, opt, sched, enc, y)

    return model, step


def build(config: Any, shapes: str, device: torch.device) -> Bench:
    real = to_dict(config)["real"]
    paper = shapes == "paper"
    names = [e for e in real["experiments"] if e in TRAIN_EXAMPLES]
    if not names:
        raise ValueError(f"coalition_attribution gpu-check: real.experiments {real['experiments']} holds none of "
                         f"{sorted(TRAIN_EXAMPLES)}")
    gen = torch.Generator().manual_seed(0)
    counts, models, steps, labels = {}, [], [], []
    for name in names:
        s = real[name]
        n = TRAIN_EXAMPLES[name] if real["max_train"] is None else min(int(real["max_train"]), TRAIN_EXAMPLES[name])
        counts[name] = int(s["epochs"]) * math.ceil(n / int(s["batch_size"]))
        model, step = (_bert(s, paper, counts[name], device, gen) if name.startswith("sst2")
                       else _image(name, s, paper, counts[name], device, gen))
        models.append(model)
        steps.append(step)
        labels.append(f"{type(model).__name__}")
    total = sum(counts.values())
    pick = Interleave([counts[n] for n in names])

    def step() -> None:
        steps[pick()]()

    return Bench(model=" + ".join(labels) + f" ({'paper' if paper else 'tiny'} sizes, interleaved)",
                 module=nn.ModuleList(models), step=step, steps_per_run=total, runs=1,
                 note="steps " + " + ".join(f"{n} {counts[n]:,}" for n in names)
                      + " (epochs x ceil(train examples / batch)), one step of each per call in proportion; one job "
                      "per experiment; sst2_llama not built; tokenisation and games not in the step")
