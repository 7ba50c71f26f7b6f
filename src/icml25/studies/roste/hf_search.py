"""Rotation search, weight checks and held-out metrics of a Hugging Face model prepared by :mod:`.hf` (paper path).

The search is the study's own (:mod:`.search`, paper §4.2, Algorithm 1 with K = 1) measured on a transformers
model: for every slot ``r2.{l}`` (W_o, the o_proj input, the V cache), ``r3.{l}`` (the K cache after RoPE) and
``r4.{l}`` (W_down and its input, after the online rotation) the quantization error

    E_i = Σ_{W ∈ 𝒲_i} ||Q_w(W) - W||_F^2 + (1/n) Σ_j ||Q_x(X_ij) - X_ij||_F^2

of the deployed configuration, with the activations ``X_ij`` recorded in a full-precision forward (quantizers off,
R1 applied) of ``n`` calibration examples, one at a time (no padding). One all-I pass and one all-H pass give
every ``(E_i(I), E_i(H))``; :func:`.search.choose` takes the per-slot argmin; a third pass of the chosen
configuration re-measures ``E(R*)`` (check 3b).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from .hadamard_any import rotate
from .method import QuantConfig, quant_error
from .search import choose, total_error

OFF = QuantConfig(None, None, None)


def _layers(model: nn.Module) -> Any:
    return model.model.layers


def slot_errors(model: nn.Module, calib: Sequence[Tensor], qcfg: QuantConfig) -> dict[str, float]:
    """Per-slot error ``E_i`` of a model prepared (:func:`.hf.prepare_for_roste`) with every quantizer off.

    ``calib``: token-id LongTensors (T_j,) run one at a time; activation terms are summed over tokens and divided by
    ``n = len(calib)``, accumulated in float64.
    """
    q, n = qcfg, len(calib)
    layers = _layers(model)
    acc = {f"r{k}.{l}": 0.0 for l in range(len(layers)) for k in (2, 3, 4)}
    hooks = []

    def f64(x: Tensor) -> Tensor:
        return x.detach().to(torch.float64)

    for l, layer in enumerate(layers):
        att, mlp = layer.self_attn, layer.mlp

        def o_in(_m: nn.Module, args: tuple, l: int = l) -> None:
            acc[f"r2.{l}"] += quant_error(f64(args[0]), q.a_bits, q.symmetric, None, q.clip) / n

        def down_in(m: nn.Module, args: tuple, l: int = l) -> None:
            x = args[0] if m.online is None else rotate(args[0], m.online)
            acc[f"r4.{l}"] += quant_error(f64(x), q.a_bits, q.symmetric, None, q.clip) / n

        def kv(key: Tensor, value: Tensor, l: int = l) -> None:  # (B, H_kv, T, hd): groups per token and head
            hd = key.shape[-1]
            acc[f"r3.{l}"] += quant_error(f64(key), q.kv_bits, q.symmetric, hd, q.clip) / n
            acc[f"r2.{l}"] += quant_error(f64(value), q.kv_bits, q.symmetric, hd, q.clip) / n

        hooks.append(att.o_proj.register_forward_pre_hook(o_in))
        hooks.append(mlp.down_proj.register_forward_pre_hook(down_in))
        att.roste_record = kv
    dev = next(model.parameters()).device
    try:
        with torch.no_grad():
            for x in calib:
                model(input_ids=x.reshape(1, -1).to(dev), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
        for layer in layers:
            layer.self_attn.roste_record = None
    for l, layer in enumerate(layers):
        w_o, w_d = f64(layer.self_attn.o_proj.weight), f64(layer.mlp.down_proj.weight)  # (out, in): per out channel
        acc[f"r2.{l}"] += quant_error(w_o, q.w_bits, q.symmetric, None, q.clip)
        acc[f"r4.{l}"] += quant_error(w_d, q.w_bits, q.symmetric, None, q.clip)
    return acc


def search_record(load: Callable[[], nn.Module], calib: Sequence[Tensor], qcfg: QuantConfig, seed: int
                  ) -> dict[str, Any]:
    """The rotation search of one seed on a freshly loaded model per pass (``load()``: the start model, on its
    device; R1 always on, as the official code). Returns the record :func:`.evaluate.decide_search` checks:
    ``{"seed", "choices", "errors": {slot: [E_I, E_H]}, "totals", "measured"}``."""
    from .hf import prepare_for_roste

    def measure(config: Mapping[str, bool] | str) -> dict[str, float]:
        model = load()
        n_layers = model.config.num_hidden_layers
        rot = config if not isinstance(config, str) else {
            "r1": True, **{f"r{k}.{l}": config == "all" for l in range(n_layers) for k in (2, 3, 4)}}
        out = slot_errors(prepare_for_roste(model, rot, OFF, seed), calib, qcfg)
        del model
        return out

    e_i, e_h = measure("none"), measure("all")
    choices = choose(e_i, e_h, list(e_i))
    errors = {s: (e_i[s], e_h[s]) for s in e_i}
    measured = measure({"r1": True, **choices})
    return {"seed": seed, "choices": choices, "errors": {s: list(v) for s, v in errors.items()},
            "totals": total_error(errors, choices), "measured": sum(measured.values())}


def block_weights(state: Mapping[str, Tensor]) -> Iterable[Tensor]:
    """The decoder-block linear weights (out, in) of a prepared model's state dict (not embedding, lm_head)."""
    names = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    for k, v in state.items():
        if k.endswith(".weight") and k.split(".")[-2] in names:
            yield v


@torch.no_grad()
def response_metrics(model: nn.Module, examples: Sequence[Mapping[str, Sequence[int]]]) -> dict[str, float]:
    """``test_loss`` (cross-entropy, nats per response token, token-weighted) and ``token_acc`` (teacher-forced argmax
    accuracy on the response tokens) over ``examples`` (``input_ids``, ``labels`` with -100 on the prompt)."""
    dev = next(model.parameters()).device
    nll, hit, count = 0.0, 0, 0
    for ex in examples:
        ids = torch.tensor([ex["input_ids"]], device=dev)
        lab = torch.tensor(ex["labels"][1:], device=dev)
        logits = model(input_ids=ids, use_cache=False).logits[0, :-1].float()
        keep = lab != -100
        nll += float(nn.functional.cross_entropy(logits[keep], lab[keep], reduction="sum"))
        hit += int((logits[keep].argmax(-1) == lab[keep]).sum())
        count += int(keep.sum())
    if count == 0:
        raise ValueError("response_metrics: no response tokens in the examples")
    return {"test_loss": nll / count, "token_acc": hit / count}


@torch.no_grad()
def greedy_texts(model: nn.Module, tokenizer: Any, prompts: Sequence[Sequence[int]], max_new_tokens: int
                 ) -> list[str]:
    """Greedy answers (decoded, special tokens skipped, stripped) of ``prompts`` (token-id lists), one at a time;
    generation stops at EOS or after ``max_new_tokens``."""
    dev = next(model.parameters()).device
    out = []
    for p in prompts:
        ids = torch.tensor([list(p)], device=dev)
        gen = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=tokenizer.eos_token_id,
                             pad_token_id=tokenizer.pad_token_id)
        out.append(tokenizer.decode(gen[0, ids.shape[1]:], skip_special_tokens=True).strip())
    return out


@torch.no_grad()
def weight_error(model: nn.Module, qcfg: QuantConfig) -> float:
    """E(W) = Σ ||Q_w(W) - W||_F^2 over the decoder-block linears (paper Fig. 4)."""
    return sum(quant_error(w.detach().to(torch.float64), qcfg.w_bits, qcfg.symmetric, None, qcfg.clip)
               for w in block_weights(model.state_dict()))


def channel_max(model: nn.Module, examples: Sequence[Tensor]) -> list[float]:
    """Per-channel max |activation| (hidden,) of the block inputs (RMSNorm outputs) over ``examples``."""
    layers = _layers(model)
    best: list[Tensor] = []
    hooks = []

    def rec(_m: nn.Module, _args: tuple, out: Tensor) -> None:
        best.append(out.detach().abs().flatten(0, -2).amax(0).float().cpu())

    for layer in layers:
        hooks += [layer.input_layernorm.register_forward_hook(rec),
                  layer.post_attention_layernorm.register_forward_hook(rec)]
    dev = next(model.parameters()).device
    try:
        with torch.no_grad():
            for x in examples:
                model(input_ids=x.reshape(1, -1).to(dev), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return torch.stack(best).amax(0).tolist()


__all__ = ["slot_errors", "search_record", "block_weights", "response_metrics", "greedy_texts", "weight_error",
           "channel_max"]
