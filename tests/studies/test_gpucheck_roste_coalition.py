"""gpu-check builders of roste and coalition_attribution (issue 39 item 4): the paper-size constants against the
published parameter counts (hand formulas; models built on the meta device, nothing allocated or downloaded), the
tiny benches' counts, steps per run and runs against the paper configs by hand, a step that trains, and the
interleaving of coalition_attribution's experiments."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml25.core import gpucheck

from conftest import ROOT

pytest.importorskip("transformers")


def _qwen2_params(c: dict, tied: bool) -> int:
    """Qwen2 causal LM by hand: q/k/v with biases, o and the SwiGLU MLP without, two RMSNorms per layer."""
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * h // c["num_attention_heads"]
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * i + 2 * h
    return v * h * (1 if tied else 2) + c["num_hidden_layers"] * layer + h


def _bert_params(c: dict, labels: int = 2) -> int:
    """BertForSequenceClassification by hand: embeddings + LayerNorm, layers, pooler, classifier."""
    h, i = c["hidden_size"], c["intermediate_size"]
    emb = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return emb + c["num_hidden_layers"] * layer + (h * h + h) + (h * labels + labels)


def _resnet20_params(w: int, cin: int = 3, classes: int = 10) -> int:
    """ResNet-20 (option-A shortcuts: no parameters) by hand."""
    total, c = 9 * cin * w + 2 * w, w
    for c_out in (w, 2 * w, 4 * w):
        for _ in range(3):
            total += 9 * c * c_out + 9 * c_out * c_out + 4 * c_out
            c = c_out
    return total + c * classes + classes


def test_paper_size_constants_give_the_published_counts():
    from transformers import BertConfig, BertForSequenceClassification, Qwen2Config, Qwen2ForCausalLM

    from icml25.studies.coalition_attribution.gpucheck import BERT_LARGE
    from icml25.studies.coalition_attribution.realnets import ResNet20
    from icml25.studies.roste.gpucheck import QWEN25_05B

    assert _qwen2_params(QWEN25_05B, tied=True) == 494_032_768  # Qwen2.5-0.5B's model card: 0.49B
    assert _bert_params(BERT_LARGE, labels=0) == 335_141_888  # bert-large-uncased with pooler: 336M
    assert _resnet20_params(16) == 269_722  # He et al. 2016 Table 6: 0.27M
    with torch.device("meta"):
        qwen = Qwen2ForCausalLM(Qwen2Config(**QWEN25_05B))
        bert = BertForSequenceClassification(BertConfig(**BERT_LARGE, num_labels=2))
    assert gpucheck.n_parameters(qwen) == _qwen2_params(QWEN25_05B, tied=True)
    assert gpucheck.n_parameters(bert) == _bert_params(BERT_LARGE)
    assert gpucheck.n_parameters(ResNet20(3, 10, 16)) == _resnet20_params(16)


def test_roste_tiny_bench_counts_steps_and_trains():
    from icml25.studies.roste import gpucheck as rg

    cfg = gpucheck.paper_config("roste", ROOT)
    bench = rg.build(cfg, "tiny", torch.device("cpu"))
    # prepare_for_roste unties lm_head; QuantLinear adds buffers only
    assert gpucheck.n_parameters(bench.module) == _qwen2_params(rg.TINY, tied=False) == 319_824
    assert bench.steps_per_run == math.ceil(116_722 / 8) == 14_591  # TL;DR train rows, paper.batch 8, 1 epoch
    assert bench.runs == 4 * 3  # fp_sft, ste, ste_rot_all, roste (rtn, quarot_lite untrained) x seeds 1003-1005
    before = bench.module.model.layers[0].mlp.down_proj.weight.detach().clone()
    bench.step()
    assert not torch.equal(before, bench.module.model.layers[0].mlp.down_proj.weight)


def test_coalition_tiny_bench_counts_steps_and_trains():
    from icml25.studies.coalition_attribution import gpucheck as cg

    cfg = gpucheck.paper_config("coalition_attribution", ROOT)
    bench = cg.build(cfg, "tiny", torch.device("cpu"))
    # CIFAR-10 182 x 391, MNIST 20 x 469, SST-2 3 x 2105 (batches of 128, 128, 32)
    assert bench.steps_per_run == 182 * 391 + 20 * 469 + 3 * 2105 == 86_857
    assert bench.runs == 1
    resnet = bench.module[-1]
    assert gpucheck.n_parameters(resnet) == _resnet20_params(4)
    params = [p.detach().clone() for p in bench.module.parameters()]
    for _ in range(3):  # each experiment once first
        bench.step()
    assert all(not torch.equal(a, b) for a, b in zip(params, bench.module.parameters()) if b.grad is not None)
    assert all(p.grad is not None for p in bench.module.parameters() if p.requires_grad)


def test_interleave_keeps_each_experiment_within_one_step_of_its_share():
    from icml25.studies.coalition_attribution.gpucheck import Interleave

    for counts in ([6_315, 9_380, 71_162], [1, 1, 1_000], [5, 7]):
        pick = Interleave(counts)
        share = np.asarray(counts) / sum(counts)
        seen = np.zeros(len(counts))
        assert [pick() for _ in counts] == list(range(len(counts)))  # each experiment once first
        seen += 1
        for k in range(len(counts) + 1, 5_000):
            seen[pick()] += 1
            dev = np.abs(seen - k * share).max()
            assert dev < len(counts)
            if k * share.min() >= 1:
                assert dev < 1.0 + 1e-9, (counts, k, seen)
    with pytest.raises(ValueError, match="counts"):
        Interleave([3, 0])
