"""One real-data experiment of Sec. 5 (Zheng, Deng & Zhang, ICML 2025) end to end: train the paper's network on the
dataset, explain test inputs with n = ``real.n_variables`` (paper: 10) input variables, and compute on each game
(2**n masked forwards) the AND-OR interactions (LP gamma), Shapley values, the identities of Sec. 3 and R, R', Q of
every coalition with ``real.coalition_sizes[0] <= |S| <= real.coalition_sizes[1]``.

Reconstructions [R] (the paper hand-picks its variables and gives no training details): the explained inputs are the
first ``real.n_inputs`` test inputs (SST-2: dev sentences with between n and ``real.max_words`` words); the variables
are the n words (SST-2) or 8 x 8 regions (images; a 4 x 4 grid) whose single removal from the full input changes
v the most (|v(N) - v(N minus i)|), in input order; everything else keeps its value. Experiments: ``sst2_bert_large``,
``sst2_llama`` (:mod:`.realtext`), ``mnist_vgg11``, ``cifar10_resnet20`` (:mod:`.realnets`). The Go experiment
(KataGo) is not run: see the study README (an ``untested`` entry of claims.json says why).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .identities import IDENTITIES, identity_errors
from .method import and_or_interactions, faithfulness, l1_objective, shapley_from_interactions
from .transforms import popcount

log = logging.getLogger("icml25.coalition_attribution")
TEXT = ("sst2_bert_large", "sst2_llama")
IMAGE = {"mnist_vgg11": ("mnist", "vgg11"), "cifar10_resnet20": ("cifar10", "resnet20")}


def choose_variables(v_full: float, v_without: np.ndarray, n: int) -> list[int]:
    """The n candidates with the largest |v(N) - v(N minus i)| (ties: lower index first), in ascending order."""
    v_without = np.asarray(v_without, dtype=np.float64)
    if v_without.size < n:
        raise ValueError(f"{v_without.size} candidate variables, need {n}")
    order = np.argsort(-np.abs(v_full - v_without), kind="stable")[:n]
    return sorted(int(i) for i in order)


def analyse_game(values: np.ndarray, sizes: tuple[int, int], zero_tol: float) -> dict[str, Any]:
    """gamma (LP), I_and, I_or, Shapley values, the identity errors and R, R', Q of every coalition whose size is in
    ``sizes`` for one game (2**n,). JSON-ready lists."""
    v = np.asarray(values, dtype=np.float64)
    i_and, i_or, gamma = and_or_interactions(v, solver="lp", return_gamma=True)
    n = int(np.log2(v.size))
    errs = identity_errors(v[None], i_and[None], i_or[None])
    masks = [int(m) for m in range(1, 2 ** n) if sizes[0] <= int(popcount(np.asarray(m))) <= sizes[1]]
    coal: dict[str, list] = {"mask": masks, "size": [], "R": [], "R_prime": [], "Q": []}
    for m in masks:
        f = faithfulness(i_and, i_or, m, zero_tol=zero_tol)
        coal["size"].append(int(bin(m).count("1")))
        for k in ("R", "R_prime", "Q"):
            coal[k].append(None if np.isnan(f[k]) else float(f[k]))
    return {"values": v.tolist(), "i_and": i_and.tolist(), "i_or": i_or.tolist(),
            "shapley": shapley_from_interactions(i_and, i_or).tolist(),
            "l1_objective": float(l1_objective(v, gamma)), "vmax": float(np.abs(v).max()),
            "identity_errors": {k: float(errs[k][0]) for k in IDENTITIES}, "coalitions": coal}


def _subsample(n_total: int, cap: int | None, seed: int) -> np.ndarray:
    """Indices of a seeded subsample of at most ``cap`` items (all, in order, when cap is None)."""
    if cap is None or cap >= n_total:
        return np.arange(n_total)
    return np.sort(np.random.default_rng([seed, 7]).choice(n_total, size=cap, replace=False))


def run_image(experiment: str, files: Mapping[str, Any], real: Mapping[str, Any], device: str,
              log_metric: Callable[[str, float, int], None] | None = None) -> dict[str, Any]:
    """MNIST + VGG-11 or CIFAR-10 + ResNet-20: train, test accuracy, games on the first n_inputs test images."""
    import torch

    from .realdata import read_cifar10, read_mnist
    from .realnets import build, channel_stats, masked_images, predict_logits, to_32, train_classifier
    from .realtext import log_odds

    dataset, arch = IMAGE[experiment]
    settings, seed, n = real[experiment], int(real["seed"]), int(real["n_variables"])
    t0 = time.perf_counter()
    data = read_cifar10(files["cifar10"]) if dataset == "cifar10" else read_mnist(
        {k: files[f"mnist_{k}"] for k in ("train_images", "train_labels", "test_images", "test_labels")})
    (xtr, ytr), (xte, yte) = data["train"], data["test"]
    tr = _subsample(len(ytr), real["max_train"], seed)
    te = _subsample(len(yte), real["max_test"], seed)
    x = to_32(xtr[tr])
    mean, std = channel_stats(x)
    norm = lambda a: ((to_32(a) - mean[None, :, None, None]) / std[None, :, None, None]).astype(np.float32)  # noqa: E731
    x = (x - mean[None, :, None, None]) / std[None, :, None, None]
    torch.manual_seed(seed)
    model = build(arch, x.shape[1], int(settings["width"]))
    fit = train_classifier(model, x.astype(np.float32), ytr[tr], settings, seed, device,
                           log=(lambda e, l: log_metric("train_real/loss", l, e)) if log_metric else None)
    t1 = time.perf_counter()
    xt = norm(xte[te])
    acc = float((predict_logits(model, xt, device).argmax(1) == yte[te]).mean())
    inputs = []
    for k in range(min(int(real["n_inputs"]), len(te))):
        img, y = xt[k], int(yte[te][k])
        singles = np.stack([masked_images(img, [r], 0.0)[0] for r in range(16)])  # region r at the baseline
        vf = float(log_odds(predict_logits(model, img[None], device), y)[0])
        vw = log_odds(predict_logits(model, singles, device), y)
        regions = choose_variables(vf, vw, n)
        values = log_odds(predict_logits(model, masked_images(img, regions, 0.0), device), y)
        inputs.append({"index": int(te[k]), "label": y, "variables": regions,
                       **analyse_game(values, tuple(real["coalition_sizes"]), real["zero_tol"])})
    return {"experiment": experiment, "dataset": dataset, "model": {"arch": arch, **dict(settings)},
            "train": {"n": int(len(tr)), **fit}, "test": {"n": int(len(te)), "accuracy": acc},
            "n_variables": n, "inputs": inputs,
            "seconds": {"train": t1 - t0, "games": time.perf_counter() - t1}}


def run_text(experiment: str, files: Mapping[str, Any], real: Mapping[str, Any], device: str, resolved: Any,
             log_metric: Callable[[str, float, int], None] | None = None) -> dict[str, Any]:
    """SST-2 with a pretrained text model: fine-tune, dev accuracy, word games on dev sentences. ``resolved``: the
    :class:`~icml25.core.hub.ResolvedModel` of ``real[experiment]`` (:func:`.realtext.resolve_model`), loaded at its
    commit and recorded in the returned ``model.hub``."""
    import torch

    from .realdata import read_sst2
    from .realtext import fine_tune, load_model, log_odds, masked_sequences, predict_logits, sequence_logits

    settings, seed, n = real[experiment], int(real["seed"]), int(real["n_variables"])
    t0 = time.perf_counter()
    data = read_sst2(files["sst2"])
    (s_tr, y_tr), (s_dev, y_dev) = data["train"], data["dev"]
    tr = _subsample(len(y_tr), real["max_train"], seed)
    torch.manual_seed(seed)  # the classification head is initialised at load
    tok, model = load_model(resolved)
    model.to(device)
    fit = fine_tune(model, tok, [s_tr[i] for i in tr], y_tr[tr], settings, seed, device,
                    log=(lambda e, l: log_metric("train_real/loss", l, e)) if log_metric else None)
    t1 = time.perf_counter()
    te = _subsample(len(y_dev), real["max_test"], seed)
    logits = predict_logits(model, tok, [s_dev[i] for i in te], settings["max_length"], device)
    acc = float((logits.argmax(1) == y_dev[te]).mean())
    picked = [i for i, s in enumerate(s_dev) if n <= len(s.split()) <= int(real["max_words"])][:int(real["n_inputs"])]
    inputs = []
    for i in picked:
        words, y = s_dev[i].split(), int(y_dev[i])
        full = masked_sequences(tok, words, [])                            # no variable: the sentence itself
        vf = float(log_odds(sequence_logits(model, full, device), y)[0])
        without = np.stack([masked_sequences(tok, words, [w])[0] for w in range(len(words))])  # word w absent
        vw = log_odds(sequence_logits(model, without, device), y)
        chosen = choose_variables(vf, vw, n)
        values = log_odds(sequence_logits(model, masked_sequences(tok, words, chosen), device), y)
        inputs.append({"index": int(i), "label": y, "sentence": s_dev[i],
                       "variables": [words[w] for w in chosen], "word_index": chosen,
                       **analyse_game(values, tuple(real["coalition_sizes"]), real["zero_tol"])})
    return {"experiment": experiment, "dataset": "sst2",
            "model": {"model": settings["model"], "revision": resolved.revision, "class": type(model).__name__,
                      "hub": {resolved.name: resolved.record()},
                      **{k: v for k, v in settings.items() if k not in ("model", "revision")}},
            "train": {"n": int(len(tr)), **fit}, "test": {"n": int(len(te)), "accuracy": acc, "split": "dev"},
            "n_variables": n, "inputs": inputs,
            "seconds": {"train": t1 - t0, "games": time.perf_counter() - t1}}
