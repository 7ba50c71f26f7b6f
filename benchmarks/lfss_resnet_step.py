"""lfss: the paper's ResNet-18/34/50 at full width on the CPU, one optimiser step at the paper's batch and image size.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/lfss_resnet_step.py                 # the README's table
    python benchmarks/lfss_resnet_step.py --nets resnet50:96 --micro 2 --micro-steps 1    # one row, faster

For each ``backbone:image_size`` (paper: ResNet-18 on the 32 px CIFAR images, ResNet-34/50 on the ImageNet subsets
at ``data.image_size`` = 96 px, CIFAR stem as configured) it builds :class:`icml25.studies.lfss.model.LFSSNet` at
width 1 with the paper's heads (h = 4096, D = 256), compares the encoder's parameter count with the closed count
(torchvision's ResNet minus its 1000-way classifier, with the 3x3 CIFAR stem instead of the 7x7 one), and times
the optimiser step of the ``lfss`` arm on random images: two colour views, online / target / old networks, the
loss L_n + λ L_ss + λ L_p (random pseudo-labels over 10 clusters), backward, SGD with the released parameter
groups, EMA update. The paper's batch (``--batch`` 256) is processed in micro-batches of ``--micro`` images with
gradient accumulation (the 256-image activations of ResNet-34/50 at 96 px need tens of GB); ``--micro-steps``
micro-batches are timed and the step time is extrapolated linearly to the whole batch when fewer than
batch/micro are run (the table says which). The contrastive losses see each micro-batch's negatives only, so the
numbers are the cost of the paper's step, not its exact gradient. Prints a Markdown table (CPU-s is process time).
"""
from __future__ import annotations

import argparse
import math
import resource
import time

#: Closed parameter counts of the encoders (CIFAR stem, no classifier): torchvision's resnet18/34/50
#: (11,689,512 / 21,797,672 / 25,557,032) minus the fc layer (513,000 / 513,000 / 2,049,000) minus the 7x7 stem
#: (9,408) plus the 3x3 stem (1,728).
CLOSED_COUNTS = {"resnet18": 11_168_832, "resnet34": 21_276_992, "resnet50": 23_500_352}


def step(net, opt, x, gen, *, micro: int, micro_steps: int, n_clusters: int = 10, lam: float = 0.1,
         temperature: float = 0.5, sigma: float = 0.001, ema: float = 0.996) -> dict:
    """One ``lfss`` step over the batch ``x`` (B, 3, S, S) in micro-batches of ``micro`` images (only the first
    ``micro_steps`` of them are run). Returns the summed loss, the micro-batches run and the timings."""
    import torch

    from icml25.studies.lfss.data import augment_colour
    from icml25.studies.lfss.method import byol_loss, prototype_loss, sample_stability_loss

    b = len(x)
    n_micro = math.ceil(b / micro)
    run = min(micro_steps, n_micro)
    opt.zero_grad(set_to_none=True)
    total, t0, c0 = 0.0, time.perf_counter(), time.process_time()
    for i in range(run):
        xb = x[i * micro:(i + 1) * micro]
        x1, x2 = augment_colour(xb, gen), augment_colour(xb, gen)
        q1, q2 = net.online(x1), net.online(x2)
        k1, k2 = net.target(x1), net.target(x2)
        p1 = net.predictor(q1 + sigma * torch.randn(q1.shape, generator=gen))
        p2 = net.predictor(q2 + sigma * torch.randn(q2.shape, generator=gen))
        o1, o2 = net.old_embed(x1), net.old_embed(x2)
        pseudo = torch.randint(0, n_clusters, (len(xb),), generator=gen)
        loss = (0.5 * (byol_loss(p1, k2) + byol_loss(p2, k1))
                + lam * 0.5 * (sample_stability_loss(q1, o1, temperature) + sample_stability_loss(q2, o2, temperature))
                + lam * 0.5 * (prototype_loss(q1, k2, pseudo, n_clusters, temperature)
                               + prototype_loss(q2, k1, pseudo, n_clusters, temperature)))
        (loss * len(xb) / b).backward()
        total += float(loss.detach()) * len(xb) / b
    opt.step()
    net.ema_update(ema)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    scale = n_micro / run
    return {"loss": total * scale, "micro_run": run, "micro_total": n_micro, "wall_s": wall * scale,
            "cpu_s": cpu * scale, "extrapolated": run < n_micro}


def measure(name: str, size: int, *, batch: int, micro: int, micro_steps: int, seed: int = 0) -> dict:
    """Build the paper's network, check its parameter count, run one step; return a table row."""
    import torch

    from icml25.studies.lfss.model import LFSSNet
    from icml25.studies.lfss.train import _param_groups

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    net = LFSSNet(hidden=4096, dim=256, in_channels=3, backbone=name, stem="cifar").train()
    n_enc = sum(p.numel() for p in net.encoder_q.parameters())
    if n_enc != CLOSED_COUNTS[name]:
        raise SystemExit(f"{name}: encoder has {n_enc:,} parameters, the closed count is {CLOSED_COUNTS[name]:,}")
    n_all = sum(p.numel() for m in (net.encoder_q, net.projector_q, net.predictor) for p in m.parameters())
    opt = torch.optim.SGD(_param_groups(net, 5e-4, True), lr=0.05, momentum=0.9)
    before = next(net.encoder_q.parameters()).detach().clone()
    x = torch.rand(batch, 3, size, size, generator=gen)
    out = step(net, opt, x, gen, micro=micro, micro_steps=micro_steps)
    if not math.isfinite(out["loss"]):
        raise SystemExit(f"{name}: the loss is not finite ({out['loss']})")
    if torch.equal(before, next(net.encoder_q.parameters())):
        raise SystemExit(f"{name}: the step left the first convolution unchanged")
    return {"net": name, "size": size, "batch": batch, "micro": micro, "encoder_params": n_enc,
            "trained_params": n_all, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", nargs="+", default=["resnet18:32", "resnet34:96", "resnet50:96"],
                        help="backbone:image_size pairs (paper: resnet18:32 for CIFAR, resnet34/50:96 for ImageNet)")
    parser.add_argument("--batch", type=int, default=256, help="images per optimiser step (paper 256)")
    parser.add_argument("--micro", nargs="+", type=int, default=[64, 2, 2],
                        help="micro-batch per net (one value for all, or one per --nets entry)")
    parser.add_argument("--micro-steps", nargs="+", type=int, default=[4, 2, 2],
                        help="micro-batches run per net (fewer than batch/micro: the step time is extrapolated)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    per = lambda v, i: v[i] if len(v) > 1 else v[0]  # noqa: E731
    rows = []
    for i, spec in enumerate(args.nets):
        name, size = spec.split(":")
        rows.append(measure(name, int(size), batch=args.batch, micro=per(args.micro, i),
                            micro_steps=per(args.micro_steps, i)))
        r = rows[-1]
        print(f"# {name} {size}px: loss {r['loss']:.4f}, {r['micro_run']}/{r['micro_total']} micro-batches, "
              f"{r['wall_s']:.1f} s/step", flush=True)
    print(f"\ntorch {torch.__version__}, {args.threads} thread(s); lfss step (two views, online/target/old, "
          f"L_n + λ L_ss + λ L_p, SGD, EMA) at batch {args.batch}\n")
    print("| net | px | encoder params (= closed count) | trained params | micro-batch | micro-batches run | "
          "loss | s/step wall | CPU-s/step | peak RSS GB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mark = " (extrapolated)" if r["extrapolated"] else ""
        print(f"| {r['net']} | {r['size']} | {r['encoder_params']:,} | {r['trained_params']:,} | {r['micro']} | "
              f"{r['micro_run']}/{r['micro_total']} | {r['loss']:.4f} | {r['wall_s']:.1f}{mark} | "
              f"{r['cpu_s']:.1f}{mark} | {r['peak_rss_gb']:.2f} |")


if __name__ == "__main__":
    main()
