# sard: adversarially robust two-stage learning to defer (SARD; https://arxiv.org/abs/2502.01027).
# Method and reconstructions: src/icml25/studies/sard/README.md.
# download (scikit-learn wheel files, or the paper archives) -> preprocess (splits, agents, costs per seed)
# -> train (one job per trained arm and seed chunk: rejector + held-out attacks) -> evaluate (claims.json)
# -> report (deferral loss vs eps figure).

from icml25.studies.sard.config import trained_arms as _sard_trained_arms
from icml25.studies.sard.data import (
    DATASET_FILES as _SARD_DATASET_FILES,
    RAW_NAMES as _SARD_RAW_NAMES,
)

_SARD = cfg("sard")
# GPUs only at paper scale (preprocess trains the ResNet-18 main models g; train the ResNet-18 rejectors).
_SARD_PAPER = SCALE == "paper"
_SARD_RAW = [
    res("sard", "raw", _SARD_RAW_NAMES[name])
    for ds in _SARD["datasets"]
    for name in _SARD_DATASET_FILES[ds]
]
_SARD_CHUNKS = expand(
    res("sard", "models", "{arm}", "chunk{chunk}.{ext}"),
    arm=_sard_trained_arms(_SARD["arms"]),
    chunk=seed_chunks("sard"),
    ext=["json", "npz"],
)


rule sard__download:
    output:
        _SARD_RAW,
    log:
        logf("sard", "download"),
    benchmark:
        bench("sard", "download")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=120 if _SARD_PAPER else 10,
    params:
        **stage_params("sard", "download"),
    shell:
        stage_cmd("sard", "download") + " --out {output} > {log} 2>&1"


rule sard__preprocess:
    input:
        rules.sard__download.output,
    output:
        [res("sard", "processed", f"{ds}.npz") for ds in _SARD["datasets"]],
    log:
        logf("sard", "preprocess"),
    benchmark:
        bench("sard", "preprocess")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=16000 if _SARD_PAPER else 2000,
        runtime=240 if _SARD_PAPER else 10,
        gpu=gpus("sard", "preprocess", _SARD["paper"]["gpus"]),
    params:
        **stage_params("sard", "preprocess"),
    shell:
        stage_cmd("sard", "preprocess") + " --in {input} --out {output} > {log} 2>&1"


rule sard__train:
    input:
        rules.sard__preprocess.output,
    output:
        model=res("sard", "models", "{arm}", "chunk{chunk}.pt"),
        records=res("sard", "models", "{arm}", "chunk{chunk}.json"),
        points=res("sard", "models", "{arm}", "chunk{chunk}.npz"),
    log:
        logf("sard", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("sard", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=16000 if _SARD_PAPER else 2000,
        runtime=720 if _SARD_PAPER else 20,
        gpu=gpus("sard", "train", _SARD["paper"]["gpus"]),
    params:
        **stage_params("sard", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("sard")[int(w.chunk)])),
    shell:
        stage_cmd("sard", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input}"
        " --out {output.model} {output.records} {output.points} > {log} 2>&1"


rule sard__evaluate:
    input:
        chunks=_SARD_CHUNKS,
    output:
        claims=res("sard", "claims.json"),
        metrics=res("sard", "metrics", "eval.json"),
    log:
        logf("sard", "evaluate"),
    benchmark:
        bench("sard", "evaluate")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        **stage_params("sard", "evaluate"),
    shell:
        stage_cmd("sard", "evaluate")
        + " --in {input.chunks} --out {output.claims} {output.metrics} > {log} 2>&1"


rule sard__report:
    input:
        metrics=rules.sard__evaluate.output.metrics,
    output:
        figure=report(
            res("sard", "figures", "def_loss_vs_eps.png"),
            caption="../report/sard/def_loss_vs_eps.rst",
            category="sard",
        ),
        md=res("sard", "report.md"),
    log:
        logf("sard", "report"),
    benchmark:
        bench("sard", "report")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("sard", "report"),
    shell:
        stage_cmd("sard", "report")
        + " --in {input.metrics} --out {output.figure} {output.md} > {log} 2>&1"


rule sard__all:
    input:
        rules.sard__evaluate.output.claims,
        rules.sard__report.output.figure,
