"""RoSTE on a Hugging Face Llama-family model (the paper path; needs the optional extra ``icml25[roste-paper]``).

The paper (Wei et al., ICML 2025, §3-§5) fine-tunes Llama 3.1 8B, Qwen2.5 and Pythia with W4A4KV4 fake
quantization and straight-through gradients after merging Walsh–Hadamard rotations into the weights. This module
does the same to a ``transformers`` causal LM whose decoder has the Llama layout (``model.embed_tokens``,
``model.layers[l].self_attn.{q,k,v,o}_proj``, ``.mlp.{gate,up,down}_proj``, ``input_layernorm``,
``post_attention_layernorm``, ``model.norm``, ``lm_head``): Llama and Qwen2 (biases on q/k/v are handled). Pythia
(GPT-NeoX: LayerNorm with a mean, parallel attention/MLP) is not supported: its LayerNorm would first have to be
turned into an RMSNorm, and :func:`prepare_for_roste` says so.

What :func:`prepare_for_roste` does, in place, with the same conventions as the tiny decoder of :mod:`.model`
(``nn.Linear`` stores ``W`` as ``(out, in)``, ``y = x W^T + b``):

* unties ``lm_head`` from the embedding, folds every RMSNorm gain into the next linears (gains set to 1);
* signs: ``R = diag(r) H / sqrt(d)``; R1's signs ``r`` are random (seeded), R2-R4 have none (``r = 1``), as the
  official code;
* R1 (hidden size): ``E R1`` for the embedding, ``W R1`` for q/k/v/gate/up and lm_head, ``R1^T W`` (and
  ``R1^T b``) for o_proj and down_proj;
* R2 (head_dim, per layer): each o_proj input block ``W_o[:, h] R2`` merged; v_proj is quantized unrotated and
  its output (bias included) rotated online per head, ``V_h R2``, before the V cache quantizer (the official
  ``QuantLinear_R_v``);
* R3 (head_dim, per layer): online on Q and K after RoPE, inside the registered attention function ``"roste"``;
* R4 (intermediate size, per layer): ``W_down R4`` merged, ``x R4`` online (fast Walsh–Hadamard transform) on the
  down_proj input;
* sizes that are not powers of 2 (Llama 3.1 8B's intermediate 14336 = 28 * 2^9, Qwen2.5's hidden and intermediate
  sizes) use ``H_m ⊗ H_{2^k}`` with a Paley ``H_m`` (:mod:`.hadamard_any`), as the paper's fast-hadamard-transform
  kernels do;
* every decoder linear becomes a :class:`QuantLinear`: per-token activation and per-output-channel weight fake
  quantization with STE (``x + (Q(x) - x).detach()``); K and V are fake-quantized per token and head in the
  attention function. Embedding, lm_head, norms and softmax stay in full precision.

With every quantizer off the prepared model computes the original function (up to float rounding), which the tests
check on a tiny random ``LlamaConfig`` model. :func:`sft_steps` runs the STE fine-tuning (AdamW on the latent
rotated weights). The K cache of a generation with ``use_cache=True`` holds unrotated, unquantized keys; the
attention function rotates and quantizes them at every call, which computes the same attention.

Model ids and revisions: ``models.csv`` beside this module, read by :mod:`icml25.core.hub` (the spec gives no
revision: every row is ``UNPINNED`` until a download has been verified; loading an unpinned row needs
``trust_unpinned``, which resolves the hub's commit once and records it). :func:`resolve_model` gives the
:class:`~icml25.core.hub.ResolvedModel` that :func:`load_causal_lm` and :func:`load_tokenizer` load, always with
``trust_remote_code=False``.
"""
from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from icml25.core import hub

from .hadamard_any import matrix as _matrix
from .hadamard_any import rotate
from .hadamard_any import signs as hadamard_signs
from .method import QuantConfig, quantize, slot_seed

#: The paper models at their hub commits (``name,repo_id,revision,licence``; see :mod:`icml25.core.hub`).
MODELS_CSV = Path(__file__).with_name("models.csv")
EXTRA = "icml25[roste-paper]"
ATTENTION = "roste"


def _transformers() -> Any:
    if importlib.util.find_spec("transformers") is None:
        raise RuntimeError(f"the roste paper path needs transformers: pip install '{EXTRA}'")
    import transformers

    return transformers


def transformers_available() -> bool:
    """True when the optional ``transformers`` dependency is importable."""
    return importlib.util.find_spec("transformers") is not None


# ------------------------------------------------------------------------------------------------ loading


def hub_model(model_id: str, revision: str | None = None) -> hub.HubModel:
    """The row of :data:`MODELS_CSV` whose ``repo_id`` is ``model_id``; ``revision`` (a 40-hex commit, the config's
    ``paper.revision``) replaces the row's. Raises :class:`~icml25.core.hub.HubError` naming the file for an id
    that is not listed or a revision that is not a commit."""
    return hub.model_by_repo(MODELS_CSV, model_id, revision, what="roste paper model", revision_key="paper.revision")


def resolve_model(model_id: str, revision: str | None = None, *, local_dir: str | Path | None = None,
                  trust_unpinned: bool = False, commit_of: Callable[[str], str] = hub.hub_commit) -> hub.ResolvedModel:
    """Where and at which commit to load ``model_id`` (:func:`icml25.core.hub.resolve` of :func:`hub_model`):
    ``local_dir`` (the rehearsal's tiny model, or weights placed by hand) replaces the hub id and is recorded as
    ``local:<sha256>``; a pinned row loads at its commit; an UNPINNED row raises unless ``trust_unpinned``, then
    ``commit_of(repo_id)`` is resolved once."""
    return hub.resolve(hub_model(model_id, revision), trust_unpinned=trust_unpinned, local_dir=local_dir,
                       commit_of=commit_of)


def load_causal_lm(model: hub.ResolvedModel, *, dtype: torch.dtype = torch.bfloat16, local_files_only: bool = True,
                   cache_dir: str | Path | None = None) -> nn.Module:
    """``AutoModelForCausalLM.from_pretrained(model.path, **model.kwargs())``: the resolved commit (none for a local
    directory) and ``trust_remote_code=False``.

    ``local_files_only=True`` (default) reads the Hugging Face cache only: nothing is fetched unless the caller
    allows it. Raises ``RuntimeError`` without transformers.
    """
    tf = _transformers()
    kwargs: dict[str, Any] = {"torch_dtype": dtype, "local_files_only": local_files_only, **model.kwargs()}
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    return tf.AutoModelForCausalLM.from_pretrained(model.path, **kwargs)


def load_tokenizer(model: hub.ResolvedModel, *, local_files_only: bool = True,
                   cache_dir: str | Path | None = None) -> Any:
    """``AutoTokenizer.from_pretrained`` at the commit :func:`load_causal_lm` uses (``trust_remote_code=False``);
    a tokenizer without a pad token pads with its EOS token."""
    tf = _transformers()
    kwargs: dict[str, Any] = {"local_files_only": local_files_only, **model.kwargs()}
    if cache_dir is not None:
        kwargs["cache_dir"] = str(cache_dir)
    tok = tf.AutoTokenizer.from_pretrained(model.path, **kwargs)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


# ------------------------------------------------------------------------------------------- quantized linear


class QuantLinear(nn.Module):
    """A decoder linear with fake-quantized input (per token) and weight (per output channel), STE gradients.

    Keeps the wrapped layer's ``weight``/``bias`` parameters (the latent weights AdamW updates). ``online``:
    signs of an online rotation applied to the input first (R4 on down_proj), or None. ``out_rot``: signs of an
    online rotation of the output in blocks of ``len(out_rot)`` (R2 on each V head), or None.
    """

    def __init__(self, linear: nn.Linear, qcfg: QuantConfig, online: Tensor | None = None,
                 out_rot: Tensor | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        self.qcfg = qcfg
        self.register_buffer("online", None if online is None else online.to(linear.weight.dtype), persistent=False)
        self.register_buffer("out_rot", None if out_rot is None else out_rot.to(linear.weight.dtype),
                             persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        q = self.qcfg
        if self.online is not None:
            x = rotate(x, self.online)
        x = quantize(x, q.a_bits, q.symmetric, None, q.clip)
        w = quantize(self.weight, q.w_bits, q.symmetric, None, q.clip)
        y = nn.functional.linear(x, w, self.bias)
        if self.out_rot is not None:
            hd = self.out_rot.shape[0]
            y = rotate(y.reshape(*y.shape[:-1], -1, hd), self.out_rot).reshape(y.shape)
        return y


def roste_attention(module: nn.Module, query: Tensor, key: Tensor, value: Tensor, attention_mask: Tensor | None,
                    **kwargs: Any) -> tuple[Tensor, Any]:
    """Attention function ``"roste"``: R3 on Q and K after RoPE (``module.roste_r3`` signs or None), K and V
    fake-quantized per token and head (``module.roste_qcfg``), then PyTorch's scaled-dot-product attention.
    ``query`` (B, H, T, hd), ``key``/``value`` (B, H_kv, T, hd)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    r3 = getattr(module, "roste_r3", None)
    q = getattr(module, "roste_qcfg", None) or QuantConfig(None, None, None)
    if r3 is not None:
        query, key = rotate(query, r3), rotate(key, r3)
    record = getattr(module, "roste_record", None)
    if record is not None:  # the rotation search's calibration pass (hf_search): K, V as the cache quantizer sees them
        record(key, value)
    hd = key.shape[-1]
    key = quantize(key, q.kv_bits, q.symmetric, hd, q.clip)
    value = quantize(value, q.kv_bits, q.symmetric, hd, q.clip)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def register_attention() -> None:
    """Register :func:`roste_attention` with transformers' attention interface under the name ``"roste"``."""
    _transformers().AttentionInterface.register(ATTENTION, roste_attention)


# ------------------------------------------------------------------------------------------- rotation + folding


def _decoder(model: nn.Module) -> nn.Module:
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if inner is None or layers is None or not hasattr(inner, "embed_tokens") or not hasattr(model, "lm_head"):
        raise NotImplementedError(
            f"roste paper path: {type(model).__name__} has no Llama layout (model.embed_tokens, model.layers, "
            "lm_head); Pythia/GPT-NeoX needs its LayerNorms turned into RMSNorms first, which is not implemented")
    attn = layers[0].self_attn
    if not all(hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj")):
        raise NotImplementedError(f"roste paper path: {type(attn).__name__} has no q/k/v/o projections")
    return inner


def slot_dims(model: nn.Module) -> dict[str, int]:
    """Rotation sizes: ``r1`` hidden size, ``r2``/``r3`` head_dim, ``r4`` intermediate size."""
    c = model.config
    hd = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return {"r1": c.hidden_size, "r2": hd, "r3": hd, "r4": c.intermediate_size}


def resolve_choices(model: nn.Module, rotations: Mapping[str, bool] | str) -> dict[str, bool]:
    """``{"r1": bool, "r2.{l}", "r3.{l}", "r4.{l}": bool}`` from ``"none"`` (R1 off too), ``"all"`` or a dict of
    the per-layer slots (R1 on unless ``"r1": False``), as :func:`.model.resolve_rotations`."""
    n = model.config.num_hidden_layers
    slots = [f"r{k}.{l}" for l in range(n) for k in (2, 3, 4)]
    if isinstance(rotations, str):
        if rotations not in ("none", "all"):
            raise ValueError(f"rotations must be 'none', 'all' or a dict, got {rotations!r}")
        return {"r1": rotations == "all", **{s: rotations == "all" for s in slots}}
    missing = [s for s in slots if s not in rotations]
    unknown = [s for s in rotations if s not in slots and s != "r1"]
    if missing or unknown:
        raise ValueError(f"rotations: missing slots {missing}, unknown slots {unknown}")
    return {"r1": bool(rotations.get("r1", True)), **{s: bool(rotations[s]) for s in slots}}


@torch.no_grad()
def _set(p: nn.Parameter | None, value: Tensor | None) -> None:
    if p is not None and value is not None:
        p.copy_(value.to(p.dtype))


def untie(model: nn.Module) -> nn.Module:
    """Give ``lm_head`` its own copy of a tied embedding matrix (R1 and the final-norm folding change them
    differently), in place; a model already untied is left as is."""
    inner = _decoder(model)
    if model.lm_head.weight is inner.embed_tokens.weight:
        model.lm_head.weight = nn.Parameter(inner.embed_tokens.weight.detach().clone())
        model.config.tie_word_embeddings = False
    return model


@torch.no_grad()
def fold_and_rotate(model: nn.Module, choices: Mapping[str, bool], seed: int = 0) -> dict[str, Tensor | None]:
    """Untie lm_head, fold the RMSNorm gains and merge R1, R2's o_proj side and the weight side of R4 into
    ``model`` (in place, computed in float64). Returns the online signs ``{"r2.{l}" (V output), "r3.{l}",
    "r4.{l}": signs or None}``."""
    inner = _decoder(model)
    dims = slot_dims(model)
    dev = inner.embed_tokens.weight.device
    def slot_signs(s: str) -> Tensor:
        d = dims[s.split(".")[0]]
        r = hadamard_signs(d, slot_seed(seed, s)) if s == "r1" else torch.ones(d, dtype=torch.float64)
        return r.to(dev)

    signs = {s: slot_signs(s) if on else None for s, on in choices.items()}
    untie(model)
    f64 = torch.float64
    r1 = _matrix(signs["r1"]) if signs.get("r1") is not None else None
    emb = inner.embed_tokens.weight.to(f64)
    _set(inner.embed_tokens.weight, emb @ r1 if r1 is not None else emb)
    head = model.lm_head.weight.to(f64) * inner.norm.weight.to(f64)[None, :]
    _set(model.lm_head.weight, head @ r1 if r1 is not None else head)
    inner.norm.weight.fill_(1.0)
    hd = dims["r2"]
    for l, layer in enumerate(inner.layers):
        att, mlp = layer.self_attn, layer.mlp
        ga, gm = layer.input_layernorm.weight.to(f64), layer.post_attention_layernorm.weight.to(f64)
        for lin, g in ((att.q_proj, ga), (att.k_proj, ga), (att.v_proj, ga), (mlp.gate_proj, gm), (mlp.up_proj, gm)):
            w = lin.weight.to(f64) * g[None, :]
            _set(lin.weight, w @ r1 if r1 is not None else w)
        layer.input_layernorm.weight.fill_(1.0)
        layer.post_attention_layernorm.weight.fill_(1.0)
        if r1 is not None:
            for lin in (att.o_proj, mlp.down_proj):
                _set(lin.weight, r1.T @ lin.weight.to(f64))
                _set(lin.bias, lin.bias.to(f64) @ r1 if lin.bias is not None else None)
        if signs.get(f"r2.{l}") is not None:
            r2 = _matrix(signs[f"r2.{l}"])  # v_proj stays unrotated: its output is rotated online (QuantLinear)
            wo = att.o_proj.weight.to(f64)
            _set(att.o_proj.weight, (wo.reshape(wo.shape[0], -1, hd) @ r2).reshape(wo.shape))
        if signs.get(f"r4.{l}") is not None:
            _set(mlp.down_proj.weight, mlp.down_proj.weight.to(f64) @ _matrix(signs[f"r4.{l}"]))
    return {s: signs.get(s) for l in range(len(inner.layers)) for s in (f"r2.{l}", f"r3.{l}", f"r4.{l}")}


def prepare_for_roste(model: nn.Module, rotations: Mapping[str, bool] | str, qcfg: QuantConfig,
                      seed: int = 0) -> nn.Module:
    """Fold, rotate and fake-quantize a Llama-layout causal LM in place (see the module docstring) and return it.

    ``rotations``: ``"none"`` (the ``ste`` arm), ``"all"`` (``ste_rot_all``) or the searched slot choices
    (``roste``); Hadamard signs from ``seed``. ``qcfg``: the W/A/KV bit widths (``QuantConfig(None, None,
    None)`` turns every quantizer off). Calling it twice on one model is an error.
    """
    inner = _decoder(model)
    if getattr(model, "roste_prepared", False):
        raise ValueError("prepare_for_roste: this model is already prepared")
    choices = resolve_choices(model, rotations)
    online = fold_and_rotate(model, choices, seed)
    register_attention()
    for l, layer in enumerate(inner.layers):
        att, mlp = layer.self_attn, layer.mlp
        for name in ("q_proj", "k_proj", "o_proj"):
            setattr(att, name, QuantLinear(getattr(att, name), qcfg))
        att.v_proj = QuantLinear(att.v_proj, qcfg, out_rot=online[f"r2.{l}"])
        for name in ("gate_proj", "up_proj"):
            setattr(mlp, name, QuantLinear(getattr(mlp, name), qcfg))
        mlp.down_proj = QuantLinear(mlp.down_proj, qcfg, online[f"r4.{l}"])
        r3 = online[f"r3.{l}"]
        att.roste_r3 = None if r3 is None else r3.to(att.q_proj.weight.dtype)
        att.roste_qcfg = qcfg
    model.config._attn_implementation = ATTENTION
    model.roste_prepared = True
    model.roste_choices = choices
    return model


# ------------------------------------------------------------------------------------------------ fine-tuning


def sft_optimizer(model: nn.Module, lr: float, weight_decay: float, steps: int) -> tuple[torch.optim.Optimizer, Any]:
    """The fine-tuning's AdamW on the trainable (latent) weights and its cosine decay to 0 over ``steps`` steps."""
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=weight_decay)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5 * (1 + math.cos(math.pi * min(k, steps) / steps)))


def sft_step(model: nn.Module, opt: torch.optim.Optimizer, sched: Any, batch: Mapping[str, Tensor],
             dev: torch.device, autocast: torch.dtype | None = None) -> Tensor:
    """One STE fine-tuning step of :func:`sft_steps`: the causal-LM loss of ``batch`` (``input_ids``, ``labels``
    (B, T), moved to ``dev``) under ``autocast`` (or none), backward, optimizer and scheduler step. Returns the
    detached loss."""
    with torch.autocast(dev.type, dtype=autocast, enabled=autocast is not None):
        loss = model(input_ids=batch["input_ids"].to(dev), labels=batch["labels"].to(dev), use_cache=False).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    return loss.detach()


def sft_steps(model: nn.Module, batches: Iterable[Mapping[str, Tensor]], lr: float, weight_decay: float = 0.0,
              steps: int | None = None, on_step: Callable[[int, float], None] | None = None,
              autocast: torch.dtype | None = None) -> list[float]:
    """STE fine-tuning (paper Algorithm 1, K = 1): AdamW on the latent rotated weights, cosine decay over
    ``steps`` (default: the number of batches). Each batch holds ``input_ids`` (B, T) and ``labels`` (B, T), with
    -100 on the prompt and padding tokens; it is moved to the model's device. ``on_step(k, loss)`` runs after each
    update. ``autocast`` (e.g. ``torch.bfloat16``): forward and backward under ``torch.autocast`` in that dtype
    while the latent weights and AdamW stay in their own dtype (the official recipes' ``bf16: True`` mixed
    precision). Returns the per-step loss."""
    batches = list(batches)
    n = steps or len(batches)
    dev = next(model.parameters()).device
    opt, sched = sft_optimizer(model, lr, weight_decay, n)
    model.train()
    losses = []
    for k in range(n):
        loss = sft_step(model, opt, sched, batches[k % len(batches)], dev, autocast)
        losses.append(float(loss))
        if on_step is not None:
            on_step(k, losses[-1])
    model.eval()
    return losses


__all__ = ["MODELS_CSV", "EXTRA", "QuantLinear", "roste_attention", "register_attention",
           "hub_model", "resolve_model", "load_causal_lm", "load_tokenizer", "untie", "slot_dims", "resolve_choices",
           "fold_and_rotate", "prepare_for_roste", "sft_optimizer", "sft_step", "sft_steps", "transformers_available"]
