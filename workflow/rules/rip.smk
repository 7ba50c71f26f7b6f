# rip: R.I.P. prompt filtering by preference-pair scores (ICML 2025; https://arxiv.org/abs/2501.18578).
# Method and reconstructions: src/icml25/studies/rip/README.md.
# prepare (world + seed model) | download (paper: WildChat, released RIP sets) -> preprocess (pair scoring:
# processed/pairs.parquet) -> train (one job per arm and seed chunk: filter + DPO) -> evaluate (claims.json,
# metrics, figure).

import icml25.studies.rip as _rip_pkg
from icml25.core.download import read_manifest as _rip_read_manifest

_RIP = cfg("rip")
_RIP_WORLD = _RIP["source"] == "world"
# torch runs one thread per job (2 shared cores: more threads spin-wait and slow everything down).
# GPUs only at paper scale: vLLM sampling + ArmoRM scoring, TRL DPO on 8 GPUs, and the evaluation (vLLM answers of
# 22 policies + the local judge).
_RIP_GPUS = _RIP["paper"]["gpus"] if SCALE == "paper" else 0
_RIP_MANIFEST = _rip_read_manifest(Path(_rip_pkg.__file__).with_name("manifest.csv"))
_RIP_RAW = [
    (
        res("rip", "raw", "released", f"{name}.jsonl")
        if name.startswith("rip_")
        else res("rip", "raw", "wildchat", f"{name}.parquet")
    )
    for name in _RIP_MANIFEST
]


# val/test prompts: generated (world) or held out of WildChat by preprocess (paper).
_RIP_VAL = res("rip", "raw" if _RIP_WORLD else "processed", "val.parquet")
_RIP_TEST = res("rip", "raw" if _RIP_WORLD else "processed", "test.parquet")
_RIP_SEED = [res("rip", "models", "seed.pt")] if _RIP_WORLD else []
# Trained weights of a train job: a .pt of state dicts (world) or HF model folders (paper).
_RIP_WEIGHTS = (
    res("rip", "models", "{arm}", "chunk{chunk}.pt")
    if _RIP_WORLD
    else directory(res("rip", "models", "{arm}", "chunk{chunk}_hf"))
)
_RIP_RECORDS = expand(
    res("rip", "models", "{arm}", "chunk{chunk}.json"),
    arm=_RIP["arms"],
    chunk=seed_chunks("rip"),
)
# The trained weights the evaluation reads beside each record: .pt files (world) or HF model folders (paper).
_RIP_PT = [p[: -len(".json")] + (".pt" if _RIP_WORLD else "_hf") for p in _RIP_RECORDS]


rule rip__prepare:
    output:
        sft=res("rip", "raw", "sft.parquet"),
        pool=res("rip", "raw", "pool.parquet"),
        val=res("rip", "raw", "val.parquet"),
        test=res("rip", "raw", "test.parquet"),
        seed=res("rip", "models", "seed.pt"),
    log:
        logf("rip", "prepare"),
    benchmark:
        bench("rip", "prepare")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        **stage_params("rip", "prepare"),
    shell:
        stage_cmd("rip", "prepare")
        + " --set threads={threads} --out {output.sft} {output.pool} {output.val} {output.test}"
        " {output.seed} > {log} 2>&1"


rule rip__download:
    output:
        _RIP_RAW,
    log:
        logf("rip", "download"),
    benchmark:
        bench("rip", "download")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=240,
    params:
        **stage_params("rip", "download"),
    shell:
        stage_cmd("rip", "download") + " --out {output} > {log} 2>&1"


rule rip__preprocess:
    input:
        raw=(
            [rules.rip__prepare.output.pool, rules.rip__prepare.output.seed]
            if _RIP_WORLD
            else [p for p in _RIP_RAW if p.endswith(".parquet")]
        ),
        external=[_RIP["pairs_table"]] if _RIP["pairs_table"] else [],
    output:
        pairs=res("rip", "processed", "pairs.parquet"),
        splits=(
            []
            if _RIP_WORLD
            else [
                res("rip", "processed", "val.parquet"),
                res("rip", "processed", "test.parquet"),
            ]
        ),
    log:
        logf("rip", "preprocess"),
    benchmark:
        bench("rip", "preprocess")
    conda:
        "../../envs/core.yaml" if _RIP_WORLD else "../../envs/rip-paper.yaml"
    threads: 1
    resources:
        mem_mb=4000 if _RIP_WORLD else 64000,
        runtime=30 if _RIP_WORLD else 4800,
        gpu=_RIP_GPUS,
    params:
        **stage_params("rip", "preprocess"),
    shell:
        stage_cmd("rip", "preprocess")
        + " --set threads={threads} --in {input.raw} --out {output.pairs} {output.splits} > {log} 2>&1"


rule rip__train:
    input:
        pairs=rules.rip__preprocess.output.pairs,
        val=_RIP_VAL,
        seed=_RIP_SEED,
    output:
        record=res("rip", "models", "{arm}", "chunk{chunk}.json"),
        weights=_RIP_WEIGHTS,
    log:
        logf("rip", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("rip", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/core.yaml" if _RIP_WORLD else "../../envs/rip-paper.yaml"
    threads: 1
    resources:
        mem_mb=2000 if _RIP_WORLD else 256000,
        runtime=30 if _RIP_WORLD else 2880,
        gpu=_RIP_GPUS,
    params:
        **stage_params("rip", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("rip")[int(w.chunk)])),
    shell:
        stage_cmd("rip", "train")
        + " --set threads={threads} --arm {wildcards.arm} --seeds {params.seeds}"
        " --in {input.pairs} {input.val} {input.seed} --out {output.record} {output.weights}"
        " > {log} 2>&1"


rule rip__evaluate:
    input:
        pairs=rules.rip__preprocess.output.pairs,
        test=_RIP_TEST,
        seed=_RIP_SEED,
        records=_RIP_RECORDS,
        weights=_RIP_PT,
    output:
        claims=res("rip", "claims.json"),
        metrics=res("rip", "metrics", "eval.json"),
        figure=report(
            res("rip", "figures", "reward_by_arm.png"),
            caption="../report/rip/reward_by_arm.rst",
            category="rip",
        ),
        md=res("rip", "report.md"),
        per_seed=expand(
            res("rip", "metrics", "{arm}_seed{seed}.json"),
            arm=_RIP["arms"],
            seed=_RIP["seeds"],
        ),
    log:
        logf("rip", "evaluate"),
    benchmark:
        bench("rip", "evaluate")
    conda:
        "../../envs/core.yaml" if _RIP_WORLD else "../../envs/rip-paper.yaml"
    threads: 1
    resources:
        mem_mb=2000 if _RIP_WORLD else 128000,
        runtime=30 if _RIP_WORLD else 1440,
        gpu=_RIP_GPUS,
    params:
        **stage_params("rip", "evaluate"),
    shell:
        stage_cmd("rip", "evaluate")
        + " --set threads={threads} --in {input.pairs} {input.test} {input.seed} {input.records}"
        " --out {output.claims} {output.metrics} {output.figure} {output.md} {output.per_seed} > {log} 2>&1"


rule rip__all:
    input:
        rules.rip__evaluate.output.claims,
        rules.rip__evaluate.output.figure,
