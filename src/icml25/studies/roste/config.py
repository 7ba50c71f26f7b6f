"""Configuration of the roste study: the single definition of every key (type, bounds, default, meaning).

``config/studies/roste.yaml`` sets the values (common keys + one block per scale); the JSON schema of that file is
generated from :class:`Config`. [R] marks reconstructions of details the paper leaves open or that stand in for
its LLM setting. ``STAGE_KEYS`` declares the keys each stage reads. No torch import here (Snakemake parses it).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from icml25.core.config import Section, StudyConfig

Arm = Literal["fp_sft", "rtn", "quarot_lite", "ste", "ste_rot_all", "roste", "ste_a1", "roste_a1"]
#: arms derived from ``fp_sft`` by post-training quantization (no training of their own)
PTQ_ARMS = ("rtn", "quarot_lite")
#: arms run at the control α (``control_alpha``); every other arm runs at ``alpha``
CONTROL_ARMS = ("ste_a1", "roste_a1")


class ModelSection(Section):
    """Tiny Llama-style decoder standing in for Pythia/Qwen/Llama [R]."""

    vocab: int = Field(64, ge=8, description="vocabulary (chain tokens + SEP + EOS must fit) [R]")
    d_model: int = Field(64, ge=8, description="residual width d (power of 2: R1 is a Hadamard rotation) [R]")
    n_layers: int = Field(2, ge=1, description="decoder layers [R]")
    n_heads: int = Field(4, ge=1, description="attention heads; head_dim = d_model / n_heads (power of 2) [R]")
    d_ff: int = Field(128, ge=8, description="SwiGLU hidden width (power of 2: R4) [R]")
    context: int = Field(48, ge=8, description="context length (pretraining sequence length) [R]")
    outlier_channels: tuple[int, ...] = Field((3, 17), min_length=1,
                                              description="embedding channels scaled by alpha (outliers) [R]")
    init_std: float = Field(0.02, gt=0, description="std of the normal initialisation of the weights [R]")


class DataSection(Section):
    """Generated Markov language and top-k SFT task (stand-ins for the pretraining corpus and TL;DR) [R]."""

    data_seed: int = Field(0, ge=0, description="seed of the chain and of every split (fixed across QAT seeds)")
    n_states: int = Field(60, ge=4, description="chain tokens [R]")
    successors: int = Field(4, ge=1, description="successors per state (sparse chain) [R]")
    dirichlet: float = Field(0.5, gt=0, description="Dirichlet concentration of the transition probabilities [R]")
    input_len: int = Field(20, ge=4, description="SFT input tokens before SEP [R]")
    top_k: int = Field(4, ge=1, description="SFT answer: the top_k most frequent input tokens, then EOS [R]")
    sft_train: int = Field(4000, ge=32, description="SFT training examples")
    sft_test: int = Field(500, ge=10, description="SFT held-out test examples (the claims' metric)")


class PretrainSection(Section):
    """Pretraining of the tiny decoder (one model per α, fixed across QAT seeds) [R]."""

    steps: int = Field(400, ge=1, description="AdamW steps (sequences generated = steps x batch)")
    batch: int = Field(32, ge=1, description="sequences per step")
    lr: float = Field(3e-3, gt=0, description="AdamW peak learning rate (cosine decay) [R]")
    seed: int = Field(0, ge=0, description="initialisation and data-order seed of pretraining")


class SftSection(Section):
    """Supervised fine-tuning, identical for every trained arm."""

    steps: int = Field(200, ge=1, description="AdamW steps")
    batch: int = Field(32, ge=1, description="examples per step")
    lr: float = Field(2e-3, gt=0, description="AdamW peak learning rate, cosine decay to 0")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay [R]")
    e_every: int = Field(50, ge=1, description="steps between logs of the weight quantization error E(W) (Fig. 4)")


class QuantSection(Section):
    """W/A/KV fake quantizers of the deployed model (paper: W4A4KV4, asymmetric)."""

    w_bits: int | None = Field(4, ge=2, le=16, description="weight bits, per output channel; null: off")
    a_bits: int | None = Field(4, ge=2, le=16, description="activation bits, per token; null: off")
    kv_bits: int | None = Field(4, ge=2, le=16, description="K/V cache bits, per token and head [R]; null: off")
    symmetric: bool = Field(False, description="symmetric quantizer (false: asymmetric, as everywhere in the paper)")
    clip: float = Field(1.0, gt=0, le=1, description="clip factor c of the quantization step (paper sweeps 1, 0.95, 0.9)")


class SearchSection(Section):
    """Rotation-configuration search (K = 1, one shot from the SFT-start weights)."""

    calib_examples: int = Field(128, ge=1, description="calibration examples n drawn from the SFT train split")
    r1: Literal["always", "search"] = Field(
        "always", description="R1 always on (the official code) or decided by its own error E_r1 [R]")


class EvalSection(Section):
    """Evaluation and claims."""

    invariance_configs: int = Field(4, ge=1, description="random rotation configurations of check 3a (plus none, all)")
    c1_margin: float = Field(0.02, gt=0, description="claim 1's effect-size floor in nats: RoSTE must beat STE's "
                                                    "held-out loss by more than this on average (the study spec's "
                                                    "reading of the paper's Table 1 gain); also the qat_headroom gate")


class PaperSection(Section):
    """Paper-scale setting (GPU nodes, weights in the Hugging Face cache): model, data, optimiser, evaluation."""

    model: str = Field(
        "Qwen/Qwen2.5-0.5B",
        description="the model fine-tuned by this run (Llama/Qwen2 layout; Pythia is refused): a repo_id of "
                    "roste/models.csv, the paper's five (EleutherAI/pythia-1b-deduped, EleutherAI/pythia-6.9b-deduped, "
                    "Qwen/Qwen2.5-0.5B, Qwen/Qwen2.5-7B, meta-llama/Llama-3.1-8B)")
    revision: str | None = Field(None, pattern=r"^[0-9a-f]{40}$",
                                 description="hub commit (40 hex) the model is loaded at, replacing its models.csv "
                                             "revision; null: the models.csv row (UNPINNED rows need trust_unpinned: "
                                             "true, which resolves the hub's commit once and records it)")
    local_dir: str | None = Field(None, description="a local save_pretrained directory that stands in for the hub "
                                                    "weights of paper.model (the rehearsal's tiny model, or weights "
                                                    "placed by hand); recorded as revision local:<sha256 of its "
                                                    "files>; null: the hub")
    dataset: Literal["tldr", "tulu3"] = Field("tldr", description="SFT data: TL;DR (trl-lib/tldr) or the Tulu 3 "
                                                                  "mixture (allenai/tulu-3-sft-mixture)")
    train_examples: int | None = Field(None, ge=1, description="seeded subsample of the training rows (null: all; "
                                                               "the paper's Tulu 3 runs use 100000)")
    tulu3_test_examples: int = Field(1000, ge=1, description="Tulu 3 rows held out for evaluation (the mixture has "
                                                             "no test split) [R]")
    lr: float = Field(5e-5, gt=0, description="AdamW learning rate (paper: Pythia 3e-5/6e-6/3e-6, Qwen 5e-5/1e-5/"
                                              "5e-6, Llama 5e-6/1e-6/5e-7), cosine decay to 0")
    weight_decay: float = Field(0.0, ge=0, description="AdamW decoupled weight decay [R]")
    batch: int = Field(8, ge=1, description="sequences per optimiser step on one device [R] (the paper's global "
                                            "batch over 8 GPUs is not stated in the spec)")
    epochs: int = Field(1, ge=1, description="SFT epochs (paper: 1)")
    max_length: int = Field(2048, ge=16, description="maximum sequence length (paper: 2048, Llama 1024)")
    e_every: int = Field(500, ge=1, description="steps between logs of E(W), the weight quantization error (Fig. 4)")
    eval_examples: int | None = Field(None, ge=1, description="test examples scored (loss, accuracy, ROUGE-L); null: "
                                                              "the whole test split")
    max_new_tokens: int = Field(64, ge=1, description="greedy tokens generated per test prompt for ROUGE-L [R]")
    dtype: Literal["bfloat16", "float32", "float64"] = Field(
        "float32", description="dtype of the latent weights while training and evaluating [R] (the paper trains in "
                               "mixed precision; pure bf16 AdamW updates at lr <= 5e-5 round away)")
    autocast: Literal["bfloat16"] | None = Field(
        "bfloat16", description="mixed precision of the SFT forward/backward (torch.autocast) over the float32 latent "
                                "weights: the official recipes' bf16: True; null: compute in paper.dtype")
    search_dtype: Literal["bfloat16", "float32", "float64"] = Field(
        "float32", description="dtype of the calibration passes of the rotation search and of check 3a")
    invariance_tokens: int = Field(128, ge=8, description="check 3a: leading tokens of each of 4 test sequences")
    device: Literal["auto", "cuda", "cpu"] = Field("auto", description="torch device (auto: cuda when available)")
    gpus: int = Field(8, ge=1, description="GPUs requested per training job (paper: 8xA100; a job uses one device)")

    @model_validator(mode="after")
    def _known_model(self):
        from pathlib import Path

        from icml25.core.hub import require_listed

        require_listed(Path(__file__).with_name("models.csv"), self.model, key="paper.model",
                       local_key="paper.local_dir")
        return self


class Config(StudyConfig):
    """roste study configuration (merged common keys + one scale)."""

    arms: tuple[Arm, ...] = Field(min_length=1, description="arms compared")
    alpha: float = Field(30.0, gt=0, description="outlier scale of the embedding channels [R]")
    control_alpha: float = Field(1.0, gt=0, description="outlier scale of the control arms ste_a1, roste_a1 [R]")
    model: ModelSection = Field(ModelSection(), description="tiny decoder [R]")
    data: DataSection = Field(DataSection(), description="generated data [R]")
    pretrain: PretrainSection = Field(PretrainSection(), description="pretraining")
    sft: SftSection = Field(SftSection(), description="fine-tuning")
    quant: QuantSection = Field(QuantSection(), description="quantizers")
    search: SearchSection = Field(SearchSection(), description="rotation search")
    eval: EvalSection = Field(EvalSection(), description="evaluation")
    paper: PaperSection = Field(PaperSection(), description="paper-scale setting")
    threads: int = Field(1, ge=1, description="torch threads per job (2 shared cores: more threads spin-wait)")

    @model_validator(mode="after")
    def _consistent(self):
        if any(a in self.arms for a in PTQ_ARMS) and "fp_sft" not in self.arms:
            raise ValueError("arms: rtn and quarot_lite quantize fp_sft, which must be an arm too")
        m, d = self.model, self.data
        for name, v in (("model.d_model", m.d_model), ("model.d_ff", m.d_ff)):
            if v & (v - 1):
                raise ValueError(f"{name}: {v} must be a power of 2 (Hadamard rotation)")
        if m.d_model % m.n_heads or (hd := m.d_model // m.n_heads) & (hd - 1):
            raise ValueError(f"model.n_heads: head_dim = d_model / n_heads must be a power-of-2 integer")
        if d.n_states + 2 > m.vocab:
            raise ValueError(f"data.n_states: {d.n_states} chain tokens + SEP + EOS exceed model.vocab {m.vocab}")
        if d.input_len + d.top_k + 2 > m.context:
            raise ValueError(f"data.input_len: SFT sequences of {d.input_len + d.top_k + 2} tokens exceed "
                             f"model.context {m.context}")
        if any(not 0 <= c < m.d_model for c in m.outlier_channels):
            raise ValueError(f"model.outlier_channels: {m.outlier_channels} outside [0, {m.d_model})")
        if self.search.calib_examples > d.sft_train:
            raise ValueError("search.calib_examples: more than data.sft_train")
        return self

    def alphas(self) -> tuple[float, ...]:
        """The α values pretrained: ``alpha``, and ``control_alpha`` when a control arm runs."""
        out = [self.alpha]
        if any(a in CONTROL_ARMS for a in self.arms) and self.control_alpha != self.alpha:
            out.append(self.control_alpha)
        return tuple(out)

    def arm_alpha(self, arm: str) -> float:
        return self.control_alpha if arm in CONTROL_ARMS else self.alpha

    def trained_arms(self) -> tuple[str, ...]:
        return tuple(a for a in self.arms if a not in PTQ_ARMS)


#: Config keys each stage reads (dotted paths; a section name covers all its keys). The stage sees only these.
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "prepare": ("data", "pretrain.steps", "pretrain.batch", "model.context", "paper"),
    "pretrain": ("model", "pretrain", "data.n_states", "data.data_seed", "threads", "paper"),
    "preprocess": ("seeds", "model", "quant", "search", "data.input_len", "threads", "paper"),
    "train": ("arms", "seeds", "alpha", "control_alpha", "model", "data.input_len", "sft", "quant", "threads",
              "paper"),
    "evaluate": ("arms", "seeds", "alpha", "control_alpha", "model", "data.input_len", "data.n_states", "quant",
                 "search", "eval", "threads", "paper"),
    "report": (),
}
