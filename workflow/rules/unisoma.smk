# unisoma: explicit transformer solver for multi-solid systems (Unisoma, ICML 2025;
# https://github.com/therontau0054/Unisoma). Method and reconstructions: src/icml25/studies/unisoma/README.md.
# smoke/default: download (simulated bilateral stamping, official pickle schema) -> preprocess (restricted load
# -> npz, normalisers) -> train (one job per arm and seed chunk) -> evaluate (claims.json) -> report.
# paper: the official pickles of manifest.csv placed by hand (paper.manual_dir; sha256 UNPINNED, pinned at first
# use with trust_unpinned) -> preprocess per dataset -> train per experiment x seed chunk (every arm, a GPU each)
# -> evaluate (one claim per experiment) -> report.

_UNI = cfg("unisoma")
_UNI_PAPER = SCALE == "paper"
_UNI_SPLITS = ["train", "eval", "test"]
_UNI_RAW = res("unisoma", "raw", "{dataset}_dataset_{split}.pkl")
_UNI_EXPERIMENTS = list(_UNI["paper"]["experiments"]) if _UNI_PAPER else []
_UNI_DATASETS = (
    list(dict.fromkeys(e.split("/")[0] for e in _UNI_EXPERIMENTS))
    if _UNI_PAPER
    else ["bilateral_stamping"]
)
_UNI_INTERIM = res("unisoma", "interim", "{dataset}", "{split}.npz")
_UNI_NORM = res("unisoma", "processed", "{dataset}", "normalisers.npz")
_UNI_MODEL = (
    res("unisoma", "models", "{dataset}", "{task}", "chunk{chunk}.pt")
    if _UNI_PAPER
    else res("unisoma", "models", "{arm}", "chunk{chunk}.pt")
)


rule unisoma__download:
    output:
        expand(_UNI_RAW, dataset=_UNI_DATASETS, split=_UNI_SPLITS),
    log:
        logf("unisoma", "download"),
    benchmark:
        bench("unisoma", "download")
    conda:
        "../../envs/unisoma.yaml"
    threads: 1
    resources:
        mem_mb=16000 if _UNI_PAPER else 2000,
        runtime=240 if _UNI_PAPER else 15,
    params:
        **stage_params("unisoma", "download"),
    shell:
        stage_cmd("unisoma", "download") + " --out {output} > {log} 2>&1"


rule unisoma__preprocess:
    input:
        expand(_UNI_RAW, split=_UNI_SPLITS, allow_missing=True),
    output:
        expand(_UNI_INTERIM, split=_UNI_SPLITS, allow_missing=True),
        _UNI_NORM,
    log:
        logf("unisoma", "preprocess_{dataset}"),
    benchmark:
        bench("unisoma", "preprocess_{dataset}")
    wildcard_constraints:
        dataset="[a-z_]+",
    conda:
        "../../envs/unisoma.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _UNI_PAPER else 2000,
        runtime=120 if _UNI_PAPER else 10,
    params:
        **stage_params("unisoma", "preprocess"),
    shell:
        stage_cmd("unisoma", "preprocess") + " --in {input} --out {output} > {log} 2>&1"


rule unisoma__train:
    input:
        lambda w: [
            *expand(
                _UNI_INTERIM,
                dataset=w.get("dataset", "bilateral_stamping"),
                split=_UNI_SPLITS,
            ),
            _UNI_NORM.format(dataset=w.get("dataset", "bilateral_stamping")),
        ],
    output:
        _UNI_MODEL,
    log:
        logf(
            "unisoma",
            (
                "train_{dataset}_{task}_chunk{chunk}"
                if _UNI_PAPER
                else "train_{arm}_chunk{chunk}"
            ),
        ),
    benchmark:
        bench(
            "unisoma",
            (
                "train_{dataset}_{task}_chunk{chunk}"
                if _UNI_PAPER
                else "train_{arm}_chunk{chunk}"
            ),
        )
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
        dataset="[a-z_]+",
        task="[a-z_]+",
    conda:
        "../../envs/unisoma.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _UNI_PAPER else 2000,
        runtime=int(_UNI["paper"]["gpu_hours"] * 60) if _UNI_PAPER else 30,
        gpu=gpus("unisoma", "train"),  # 1 when paper.device is cuda (core.device)
    params:
        **stage_params("unisoma", "train"),
        args=lambda w: (
            "--set experiment={}/{} --seeds {}".format(
                w.dataset,
                w.task,
                " ".join(map(str, seed_chunks("unisoma")[int(w.chunk)])),
            )
            if _UNI_PAPER
            else "--arm {} --seeds {}".format(
                w.arm, " ".join(map(str, seed_chunks("unisoma")[int(w.chunk)]))
            )
        ),
    shell:
        stage_cmd("unisoma", "train")
        + " {params.args} --in {input} --out {output} > {log} 2>&1"


_UNI_MODELS = (
    [
        _UNI_MODEL.format(dataset=dataset, task=task, chunk=c)
        for dataset, task in (e.split("/") for e in _UNI_EXPERIMENTS)
        for c in seed_chunks("unisoma")
    ]
    if _UNI_PAPER
    else expand(_UNI_MODEL, arm=_UNI["arms"], chunk=seed_chunks("unisoma"))
)


rule unisoma__evaluate:
    input:
        raw=expand(_UNI_RAW, dataset=_UNI_DATASETS, split=_UNI_SPLITS),
        interim=expand(_UNI_INTERIM, dataset=_UNI_DATASETS, split=_UNI_SPLITS),
        norm=expand(_UNI_NORM, dataset=_UNI_DATASETS),
        models=_UNI_MODELS,
    output:
        claims=res("unisoma", "claims.json"),
        metrics=res("unisoma", "metrics", "eval.json"),
    log:
        logf("unisoma", "evaluate"),
    benchmark:
        bench("unisoma", "evaluate")
    conda:
        "../../envs/unisoma.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _UNI_PAPER else 2000,
        runtime=240 if _UNI_PAPER else 15,
        gpu=gpus("unisoma", "evaluate"),
    params:
        **stage_params("unisoma", "evaluate"),
    shell:
        stage_cmd("unisoma", "evaluate")
        + " --in {input.raw} {input.interim} {input.norm} {input.models}"
        " --out {output.claims} {output.metrics} > {log} 2>&1"


rule unisoma__report:
    input:
        metrics=rules.unisoma__evaluate.output.metrics,
    output:
        maps=report(
            res("unisoma", "figures", "error_maps.png"),
            caption="../report/unisoma/error_maps.rst",
            category="unisoma",
        ),
        md=res("unisoma", "report.md"),
    log:
        logf("unisoma", "report"),
    benchmark:
        bench("unisoma", "report")
    conda:
        "../../envs/unisoma.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("unisoma", "report"),
    shell:
        stage_cmd("unisoma", "report")
        + " --in {input.metrics} --out {output.maps} {output.md} > {log} 2>&1"


rule unisoma__all:
    input:
        rules.unisoma__evaluate.output.claims,
        rules.unisoma__report.output.maps,
