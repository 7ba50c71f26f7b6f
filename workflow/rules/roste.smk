# roste: RoSTE quantization-aware SFT with adaptive rotations (ICML 2025; https://arxiv.org/abs/2502.09003).
# Method and reconstructions: src/icml25/studies/roste/README.md.
# smoke/default: prepare (generated data) -> pretrain (one tiny decoder per alpha) -> preprocess (rotation search
# per alpha and seed) -> train (one job per trained arm and seed chunk) -> evaluate (claims.json) -> report.
# paper: prepare (the dataset's manifest files; the model resolved once and fetched into the HF cache at that commit,
# raw/paper/hub_model.json) -> pretrain (tokenise; the hub model is the SFT start) -> preprocess (rotation search)
# -> train (GPU jobs) -> evaluate -> report (roste/paper_stages.py).

import icml25.studies.roste as _roste_pkg
from icml25.core.download import read_manifest as _roste_read_manifest
from icml25.studies.roste.config import (
    CONTROL_ARMS as _ROSTE_CONTROL,
    PTQ_ARMS as _ROSTE_PTQ,
)

_ROSTE = cfg("roste")
_ROSTE_PAPER = SCALE == "paper"
_ROSTE_GPUS = _ROSTE["paper"]["gpus"] if _ROSTE_PAPER else 0
_ROSTE_TRAINED = [a for a in _ROSTE["arms"] if a not in _ROSTE_PTQ]


# arm -> its alpha as a file tag ("30", "1"): control arms train at control_alpha, the others at alpha
_ROSTE_ARM_ALPHA = {
    a: f"{float(_ROSTE['control_alpha'] if a in _ROSTE_CONTROL else _ROSTE['alpha']):g}"
    for a in _ROSTE["arms"]
}
_ROSTE_ALPHAS = sorted(set(_ROSTE_ARM_ALPHA.values()))
_ROSTE_ROT = res("roste", "processed", "rotcfg_a{alpha}_seed{seed}.json")
_ROSTE_MANIFEST = _roste_read_manifest(
    Path(_roste_pkg.__file__).with_name("manifest.csv")
)
_ROSTE_DATA = (
    [
        res("roste", "raw", "paper", f"{n}.parquet")
        for n in _ROSTE_MANIFEST
        if n.startswith(f"{_ROSTE['paper']['dataset']}_")
    ]
    if _ROSTE_PAPER
    else [res("roste", "raw", "data.pt")]
)
# paper: prepare's record of the hub model it resolved (core.hub: the models.csv commit, an UNPINNED row's hub
# commit under trust_unpinned, or paper.local_dir's digest); pretrain copies it into the start record.
_ROSTE_HUB = [res("roste", "raw", "paper", "hub_model.json")] if _ROSTE_PAPER else []
# paper: the hub model is the SFT start (no pretraining here); one "alpha" slot keeps the file layout.
_ROSTE_PRE = res("roste", "models", "pretrain_a{alpha}.pt")


rule roste__prepare:
    output:
        _ROSTE_DATA,
        _ROSTE_HUB,
    log:
        logf("roste", "prepare"),
    benchmark:
        bench("roste", "prepare")
    conda:
        "../../envs/roste.yaml" if not _ROSTE_PAPER else "../../envs/roste-paper.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _ROSTE_PAPER else 1000,
        runtime=240 if _ROSTE_PAPER else 10,
        gpu=gpus("roste", "prepare"),  # loads the model onto paper.device to check its layout
    params:
        **stage_params("roste", "prepare"),
    shell:
        stage_cmd("roste", "prepare") + " --out {output} > {log} 2>&1"


rule roste__pretrain:
    input:
        _ROSTE_DATA,
        _ROSTE_HUB,
    output:
        _ROSTE_PRE,
    log:
        logf("roste", "pretrain_a{alpha}"),
    benchmark:
        bench("roste", "pretrain_a{alpha}")
    wildcard_constraints:
        alpha=r"[0-9.e+-]+",
    conda:
        "../../envs/roste.yaml" if not _ROSTE_PAPER else "../../envs/roste-paper.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _ROSTE_PAPER else 2000,
        runtime=120 if _ROSTE_PAPER else 20,
        gpu=gpus("roste", "pretrain"),
    params:
        **stage_params("roste", "pretrain"),
    shell:
        stage_cmd("roste", "pretrain")
        + " --set alpha={wildcards.alpha} --in {input} --out {output} > {log} 2>&1"


rule roste__preprocess:
    input:
        data=_ROSTE_DATA,
        model=_ROSTE_PRE,
    output:
        expand(_ROSTE_ROT, alpha="{alpha}", seed=_ROSTE["seeds"]),
    log:
        logf("roste", "preprocess_a{alpha}"),
    benchmark:
        bench("roste", "preprocess_a{alpha}")
    wildcard_constraints:
        alpha=r"[0-9.e+-]+",
    conda:
        "../../envs/roste.yaml" if not _ROSTE_PAPER else "../../envs/roste-paper.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _ROSTE_PAPER else 2000,
        runtime=240 if _ROSTE_PAPER else 20,
        gpu=gpus("roste", "preprocess"),
    params:
        **stage_params("roste", "preprocess"),
    shell:
        stage_cmd("roste", "preprocess")
        + " --set alpha={wildcards.alpha} --in {input.data} {input.model} --out {output} > {log} 2>&1"


rule roste__train:
    input:
        lambda w: [
            *_ROSTE_DATA,
            _ROSTE_PRE.format(alpha=_ROSTE_ARM_ALPHA[w.arm]),
            *(
                expand(
                    _ROSTE_ROT,
                    alpha=_ROSTE_ARM_ALPHA[w.arm],
                    seed=seed_chunks("roste")[int(w.chunk)],
                )
                if w.arm.startswith("roste")
                else []
            ),
        ],
    output:
        res("roste", "models", "{arm}", "chunk{chunk}.pt"),
    log:
        logf("roste", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("roste", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/roste.yaml" if not _ROSTE_PAPER else "../../envs/roste-paper.yaml"
    threads: 1
    resources:
        mem_mb=512000 if _ROSTE_PAPER else 2000,
        runtime=1440 if _ROSTE_PAPER else 30,
        gpu=gpus("roste", "train", _ROSTE["paper"]["gpus"]),
    params:
        **stage_params("roste", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("roste")[int(w.chunk)])),
    shell:
        stage_cmd("roste", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input} --out {output} > {log} 2>&1"


rule roste__evaluate:
    input:
        data=_ROSTE_DATA,
        pretrained=expand(_ROSTE_PRE, alpha=_ROSTE_ALPHAS),
        rotcfg=expand(
            _ROSTE_ROT,
            alpha=sorted(
                {_ROSTE_ARM_ALPHA[a] for a in _ROSTE["arms"] if a.startswith("roste")}
            ),
            seed=_ROSTE["seeds"],
        ),
        models=expand(
            res("roste", "models", "{arm}", "chunk{chunk}.pt"),
            arm=_ROSTE_TRAINED,
            chunk=seed_chunks("roste"),
        ),
    output:
        claims=res("roste", "claims.json"),
        metrics=res("roste", "metrics", "eval.json"),
    log:
        logf("roste", "evaluate"),
    benchmark:
        bench("roste", "evaluate")
    conda:
        "../../envs/roste.yaml" if not _ROSTE_PAPER else "../../envs/roste-paper.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _ROSTE_PAPER else 2000,
        runtime=480 if _ROSTE_PAPER else 20,
        gpu=gpus("roste", "evaluate", _ROSTE["paper"]["gpus"]),
    params:
        **stage_params("roste", "evaluate"),
    shell:
        stage_cmd("roste", "evaluate")
        + " --in {input.data} {input.pretrained} {input.rotcfg} {input.models}"
        " --out {output.claims} {output.metrics} > {log} 2>&1"


rule roste__report:
    input:
        metrics=rules.roste__evaluate.output.metrics,
    output:
        e_w=report(
            res("roste", "figures", "e_w.png"),
            caption="../report/roste/e_w.rst",
            category="roste",
        ),
        loss=report(
            res("roste", "figures", "test_loss.png"),
            caption="../report/roste/test_loss.rst",
            category="roste",
        ),
        md=res("roste", "report.md"),
    log:
        logf("roste", "report"),
    benchmark:
        bench("roste", "report")
    conda:
        "../../envs/roste.yaml" if not _ROSTE_PAPER else "../../envs/roste-paper.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("roste", "report"),
    shell:
        stage_cmd("roste", "report")
        + " --in {input.metrics} --out {output.e_w} {output.loss} {output.md} > {log} 2>&1"


rule roste__all:
    input:
        rules.roste__evaluate.output.claims,
        rules.roste__report.output.e_w,
