"""``icml25 gpu-check``: the cost of every study's paper training on one device, measured (issue 39, item 4).

For each study with a GPU paper path and a ``src/icml25/studies/<slug>/gpucheck.py``, the study's own builder
(:func:`build`, see :class:`Bench`) constructs the study's **own** paper model class at paper shapes (``--shapes
paper``) or at tiny shapes (``--shapes tiny``: the test suite, CPU) on synthetic inputs, with the study's own train
step (forward + backward + optimizer update). The step is timed over ``--steps`` steps after ``--warmup`` steps
(CUDA: synchronised), and multiplied by the study's paper steps per run and number of runs, read from the study's
paper config (``config/studies/<slug>.yaml``, scale paper). The table gives study, model, parameters, step time
(ms), steps/run, runs, GPU-hours (step time x steps/run x runs; training steps only: data loading, evaluation and
per-epoch work such as k-means are not in it) and peak GPU memory (n/a on CPU).

A study's ``gpucheck.py`` defines ``build(config, shapes, device) -> Bench``; ``config`` is the study's validated
paper ``Config``. Discovery: every slug of :data:`icml25.studies.STUDIES` whose package has that module.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHAPES = ("tiny", "paper")


@dataclass
class Bench:
    """What a study's builder returns. ``step()`` runs one train step on ``device`` (synthetic batch already on
    it); ``module`` is the trained model (its parameters are counted: trainable and frozen, e.g. a target network,
    are both in GPU memory, the count is of ``requires_grad`` ones unless ``count_all``); ``steps_per_run`` and
    ``runs`` come from the paper config (``note`` says how)."""

    model: str
    module: Any
    step: Callable[[], Any]
    steps_per_run: int
    runs: int
    note: str = ""
    count_all: bool = False


def n_parameters(module: Any, trainable_only: bool = True) -> int:
    """Number of scalar parameters (``requires_grad`` ones by default)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def discover(studies: Sequence[str] | None = None) -> list[str]:
    """Slugs with a ``gpucheck`` module (all of them, or those of ``studies``, which must all have one)."""
    from icml25.studies import STUDIES

    have = [s for s in STUDIES if importlib.util.find_spec(f"icml25.studies.{s}.gpucheck") is not None]
    if not studies:
        return have
    missing = [s for s in studies if s not in have]
    if missing:
        raise SystemExit(f"gpu-check: --studies {missing}: no studies/<slug>/gpucheck.py (have: {have})")
    return list(studies)


def paper_config(slug: str, root: Path) -> Any:
    """The study's validated paper config (``config/studies/<slug>.yaml`` at scale paper)."""
    from icml25.studies import study_config_class

    from .config import build, load_yaml, merge_scale

    return build(study_config_class(slug), merge_scale(load_yaml(root / "config" / "studies" / f"{slug}.yaml"),
                                                       "paper"), path=slug)


def measure(bench: Bench, device: Any, steps: int, warmup: int) -> dict[str, Any]:
    """Time ``bench.step`` (mean seconds per step over ``steps`` after ``warmup``) and the peak GPU memory."""
    import torch

    cuda = device.type == "cuda"
    for _ in range(warmup):
        bench.step()
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        bench.step()
    if cuda:
        torch.cuda.synchronize(device)
    step_s = (time.perf_counter() - t0) / steps
    return {"model": bench.model, "parameters": n_parameters(bench.module, not bench.count_all),
            "step_ms": 1000 * step_s, "steps_per_run": int(bench.steps_per_run), "runs": int(bench.runs),
            "gpu_hours": step_s * bench.steps_per_run * bench.runs / 3600,
            "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if cuda else None, "note": bench.note}


def check(slug: str, *, device: str, shapes: str, steps: int, warmup: int, root: Path) -> dict[str, Any]:
    """Build and time one study's paper step; a row of the table. On cuda the step runs under the settings of a
    pipeline job (:func:`icml25.core.device.configure_cuda_determinism`: strict deterministic algorithms unless
    the study is in ``NONDETERMINISTIC_CUDA``), so its time is the one the paper jobs will see, and a study that
    needs an op without a deterministic CUDA kernel is found here (:func:`timed_row`)."""
    import torch

    if shapes not in SHAPES:
        raise ValueError(f"shapes: {shapes!r} not in {SHAPES}")
    dev = torch.device(device)
    if dev.type == "cuda":
        from .device import NONDETERMINISTIC_CUDA, configure_cuda_determinism

        configure_cuda_determinism(strict=slug not in NONDETERMINISTIC_CUDA)
    torch.manual_seed(0)
    builder = importlib.import_module(f"icml25.studies.{slug}.gpucheck").build
    bench = builder(paper_config(slug, root), shapes, dev)
    return {"study": slug, **timed_row(bench, dev, steps, warmup)}


def timed_row(bench: Bench, device: Any, steps: int, warmup: int) -> dict[str, Any]:
    """:func:`measure`, or, when the step raises for want of a deterministic kernel (strict determinism on cuda),
    a row without times whose note quotes the error: the study then belongs in ``NONDETERMINISTIC_CUDA``."""
    try:
        return measure(bench, device, steps, warmup)
    except RuntimeError as err:
        if "deterministic" not in str(err):
            raise
        first = str(err).strip().splitlines()[0]
        return {"model": bench.model, "parameters": n_parameters(bench.module, not bench.count_all),
                "step_ms": None, "steps_per_run": int(bench.steps_per_run), "runs": int(bench.runs),
                "gpu_hours": None, "peak_mem_gib": None,
                "note": f"NOT DETERMINISTIC under use_deterministic_algorithms(True): {first}"}


COLUMNS = ("study", "model", "parameters", "step_ms", "steps_per_run", "runs", "gpu_hours", "peak_mem_gib")


def table(rows: Sequence[dict[str, Any]], device_name: str) -> str:
    """The rows as an aligned text table (Markdown pipe syntax), with a header line naming the device."""
    def fmt(key: str, v: Any) -> str:
        if v is None:
            return "n/a"
        if key == "parameters":
            return f"{v:,}"
        if key == "step_ms":
            return f"{v:.2f}"
        if key == "gpu_hours":
            return f"{v:.3g}"
        if key == "peak_mem_gib":
            return f"{v:.2f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)
    head = ("study", "model", "parameters", "step (ms)", "steps/run", "runs", "GPU-hours", "peak GPU mem (GiB)")
    body = [[fmt(k, r.get(k)) for k in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [f"device: {device_name}", line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(b) for b in body]
    return "\n".join(out)


def device_name(device: str) -> str:
    import platform

    import torch

    if device == "cuda":
        return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return f"cpu {platform.processor() or platform.machine()} x{torch.get_num_threads()} threads (torch {torch.__version__})"


def main(argv: Sequence[str] | None = None) -> int:
    """``icml25 gpu-check``: time each study's paper train step and print the GPU-hours table."""
    parser = argparse.ArgumentParser(
        prog="icml25 gpu-check", description=__doc__.split("\n\n")[0] + " See src/icml25/core/gpucheck.py.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda", help="device to time on")
    parser.add_argument("--shapes", choices=SHAPES, default="paper",
                        help="paper: the paper's model and batch sizes; tiny: small stand-ins of the same classes")
    parser.add_argument("--steps", type=int, default=200, help="timed train steps per study (after warm-up)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (allocation, autotuning)")
    parser.add_argument("--studies", nargs="*", default=None, help="slugs (default: every study with a gpucheck.py)")
    parser.add_argument("--root", default=".", help="project root holding config/studies/")
    parser.add_argument("--json", dest="json_out", default=None, help="also write the rows as json to this file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        parser.error("--steps must be >= 1 and --warmup >= 0")
    root = Path(args.root)
    if not (root / "config" / "studies").is_dir():
        parser.error(f"--root {root}: no config/studies/ there (run from the project root)")
    from .device import cuda_available

    if args.device == "cuda" and not cuda_available():
        print("gpu-check: error: --device cuda, but no CUDA device is visible (use --device cpu)", file=sys.stderr)
        return 2
    rows = []
    for slug in discover(args.studies):
        t0 = time.perf_counter()
        rows.append(check(slug, device=args.device, shapes=args.shapes, steps=args.steps, warmup=args.warmup,
                          root=root))
        print(f"gpu-check: {slug} done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    print(table(rows, device_name(args.device)))
    notes = [f"- {r['study']}: {r['note']}" for r in rows if r.get("note")]
    if notes:
        print(f"\nshapes: {args.shapes}; steps timed: {args.steps} after {args.warmup} warm-up; GPU-hours = step "
              "time x steps/run x runs (training steps only)\n" + "\n".join(notes))
    if args.json_out:
        import json

        Path(args.json_out).write_text(json.dumps({"device": device_name(args.device), "shapes": args.shapes,
                                                   "steps": args.steps, "rows": rows}, indent=1))
    return 0
