"""Paper scale of the roste study: what it would run and why it stops here.

The paper fine-tunes Pythia (1B, 6.9B), Qwen2.5 (0.5B, 7B) and Llama 3.1 8B on TL;DR (``trl-lib/tldr``) or a 100k
subsample of the Tulu 3 SFT mixture (``allenai/tulu-3-sft-mixture``) with AdamW for one epoch on 8 A100 GPUs,
rotations applied with the ``fast-hadamard-transform`` CUDA kernels. The model side of that path -- loading a
paper model at its pinned revision, folding the norms, merging/online rotations, W4A4KV4 fake quantization and STE
fine-tuning of a Hugging Face Llama/Qwen2 -- is :mod:`.hf` (optional extra ``icml25[roste-paper]``, tested on a
tiny random Llama). The paper-scale stages (TL;DR/Tulu 3 tokenisation, the rotation search on the hub model,
8-GPU training) are not wired to it and need the weights and GPUs, so every stage stops at paper scale with
:func:`paper_stage_error`. Snakemake still plans the paper DAG (``snakemake -n
--config scale=paper studies=[roste]``) with the manifest's files and ``gpu`` resources.
"""
from __future__ import annotations

import importlib.util
from typing import Any

MODELS = ("EleutherAI/pythia-1b-deduped", "EleutherAI/pythia-6.9b-deduped", "Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-7B",
          "meta-llama/Llama-3.1-8B")
#: learning rates swept in the paper per model family
LEARNING_RATES = {"pythia": (3e-5, 6e-6, 3e-6), "qwen": (5e-5, 1e-5, 5e-6), "llama": (5e-6, 1e-6, 5e-7)}
CLIP_FACTORS = (1.0, 0.95, 0.9)


def missing_stack() -> list[str]:
    """What the paper path needs and this machine lacks: packages and CUDA GPUs."""
    missing = [m for m in ("transformers", "fast_hadamard_transform") if importlib.util.find_spec(m) is None]
    try:
        import torch

        if not torch.cuda.is_available():
            missing.append("CUDA GPUs")
    except ImportError:  # pragma: no cover - torch is a core dependency
        missing.append("torch")
    return missing


def paper_stage_error(stage: str, paper: Any) -> str:
    """The message a paper-scale stage stops with."""
    lacking = missing_stack()
    return (f"roste {stage}: the paper scale fine-tunes {paper.model} on {paper.dataset} with {paper.gpus} GPUs "
            f"(transformers + fast-hadamard-transform, weights from the model hub); it is planned by Snakemake; the "
            f"model side is icml25.studies.roste.hf (extra roste-paper), but these stages are not wired to it"
            + (f", and this machine lacks {', '.join(lacking)}" if lacking else "") + ". Run the smoke or default scale (generated data, tiny decoder) instead.")
