"""Diagnostic for the lfss adequacy gate: the base learner's encoder + projector trained *with the labels*.

    python benchmarks/lfss_supervised_bound.py --seed 100          # tuning seeds only (>= 100)

Same network (``model``), augmentations (``augment``), batch size, epochs and base learning rate as the default
scale, but the loss is cross-entropy of a linear head on the online projector output (SGD, momentum of the config,
no schedule). Every 5 epochs it prints the mean ACC of 3 cosine k-means runs on the clean-view projector features:
an upper bound of what the self-supervised learner could reach in the same number of steps (README, "Tuning").
"""
from __future__ import annotations

import argparse
from pathlib import Path


def settings_for(scale: str, overrides: dict) -> dict:
    """The study config of ``scale`` with ``overrides``, validated, as the plain dicts the training loop reads."""
    from icml25.core.config import build, load_yaml, merge_scale
    from icml25.studies.lfss.config import Config
    from icml25.studies.lfss.experiment import settings_of

    yaml = Path(__file__).resolve().parents[1] / "config" / "studies" / "lfss.yaml"
    return settings_of(build(Config, merge_scale(load_yaml(yaml), scale, overrides), "lfss"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=100, help="subset/init seed (use >= 100: not an evaluation seed)")
    args = parser.parse_args()

    import torch

    from icml25.studies.lfss.data import augment, load_dataset
    from icml25.studies.lfss.evaluate import kmeans_eval
    from icml25.studies.lfss.model import LFSSNet

    torch.set_num_threads(1)
    s = settings_for("default", {})
    tr, mo = s["train"], s["model"]
    x, y = load_dataset(s["data"], args.seed)
    xt, yt = torch.as_tensor(x), torch.as_tensor(y)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    net = LFSSNet(mo["channels"], mo["hidden"], mo["dim"], in_channels=xt.shape[1])
    head = torch.nn.Linear(mo["dim"], int(s["data"]["n_classes"]))
    params = [*net.encoder_q.parameters(), *net.projector_q.parameters(), *head.parameters()]
    opt = torch.optim.SGD(params, lr=tr["lr"], momentum=tr["momentum"])
    aug = {k: s["augment"][k] for k in ("crop_scale", "rotation_deg", "erase_p", "erase_scale", "noise_sigma")}
    bs, n = int(tr["batch_size"]), len(xt)
    for epoch in range(1, int(tr["epochs"]) + 1):
        order = torch.randperm(n, generator=gen)
        for b in range(n // bs):
            idx = order[b * bs:(b + 1) * bs]
            loss = torch.nn.functional.cross_entropy(head(net.online(augment(xt[idx], gen, **aug))), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % 5 == 0:
            acc = kmeans_eval(net.features(xt, "online").numpy(), y, int(s["data"]["n_classes"]), runs=3)["acc"]
            print(f"epoch {epoch:3d}  CE {loss.item():.3f}  k-means ACC of the projector features {acc:.3f}", flush=True)


if __name__ == "__main__":
    main()
