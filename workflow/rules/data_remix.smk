# data_remix: Data Remixing for balanced multimodal learning (https://arxiv.org/abs/2506.11550).
# Method and reconstructions: src/icml25/studies/data_remix/README.md.
# download (MNIST-5k and 8x8 digits from their wheels; paper: the CREMA-D / Kinetics-Sounds split lists) ->
# preprocess (synth-AV generated, digit pairs built, every seed; paper: spectrograms and frames of the hand-placed
# clips, one npz per dataset) -> train (one job per arm and seed chunk: training + linear probes)
# -> evaluate (claims.json) -> report (routing and accuracy figures).

from icml25.studies.data_remix.data import (
    DATASET_FILES as _DR_DATASET_FILES,
    RAW_NAMES as _DR_RAW_NAMES,
)

_DR = cfg("data_remix")
# GPUs only at paper scale (two ResNet-18 encoders per model).
_DR_PAPER = SCALE == "paper"
_DR_RAW = [
    res("data_remix", "raw", _DR_RAW_NAMES[name])
    for ds in _DR["datasets"]
    for name in _DR_DATASET_FILES[ds]
]
_DR_RECORDS = expand(
    res("data_remix", "models", "{arm}", "chunk{chunk}.json"),
    arm=_DR["arms"],
    chunk=seed_chunks("data_remix"),
)


rule data_remix__download:
    output:
        _DR_RAW,
    log:
        logf("data_remix", "download"),
    benchmark:
        bench("data_remix", "download")
    conda:
        "../../envs/data_remix.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60 if _DR_PAPER else 10,
    params:
        **stage_params("data_remix", "download"),
    shell:
        stage_cmd("data_remix", "download") + " --out {output} > {log} 2>&1"


rule data_remix__preprocess:
    input:
        _DR_RAW,
    output:
        [res("data_remix", "processed", f"{ds}.npz") for ds in _DR["datasets"]],
    log:
        logf("data_remix", "preprocess"),
    benchmark:
        bench("data_remix", "preprocess")
    conda:
        "../../envs/data_remix.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _DR_PAPER else 2000,  # Kinetics-Sounds: ~15 GB of spectrograms and uint8 frames
        runtime=480 if _DR_PAPER else 10,
    params:
        **stage_params("data_remix", "preprocess"),
    shell:
        stage_cmd("data_remix", "preprocess")
        + " --in {input} --out {output} > {log} 2>&1"


rule data_remix__train:
    input:
        rules.data_remix__preprocess.output,
    output:
        model=res("data_remix", "models", "{arm}", "chunk{chunk}.pt"),
        records=res("data_remix", "models", "{arm}", "chunk{chunk}.json"),
        assign=res("data_remix", "models", "{arm}", "chunk{chunk}.npz"),
    log:
        logf("data_remix", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("data_remix", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/data_remix.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _DR_PAPER else 2000,  # the processed npz of both datasets is held in memory
        runtime=900 if _DR_PAPER else 20,
        gpu=_DR["gpus"] if _DR_PAPER else 0,
    params:
        **stage_params("data_remix", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("data_remix")[int(w.chunk)])),
    shell:
        stage_cmd("data_remix", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input}"
        " --out {output.model} {output.records} {output.assign} > {log} 2>&1"


rule data_remix__evaluate:
    input:
        records=_DR_RECORDS,
    output:
        claims=res("data_remix", "claims.json"),
        metrics=res("data_remix", "metrics", "eval.json"),
    log:
        logf("data_remix", "evaluate"),
    benchmark:
        bench("data_remix", "evaluate")
    conda:
        "../../envs/data_remix.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        **stage_params("data_remix", "evaluate"),
    shell:
        stage_cmd("data_remix", "evaluate")
        + " --in {input.records} --out {output.claims} {output.metrics} > {log} 2>&1"


rule data_remix__report:
    input:
        metrics=rules.data_remix__evaluate.output.metrics,
    output:
        routing=report(
            res("data_remix", "figures", "routing.png"),
            caption="../report/data_remix/routing.rst",
            category="data_remix",
        ),
        accuracy=report(
            res("data_remix", "figures", "accuracy.png"),
            caption="../report/data_remix/accuracy.rst",
            category="data_remix",
        ),
        md=res("data_remix", "report.md"),
    log:
        logf("data_remix", "report"),
    benchmark:
        bench("data_remix", "report")
    conda:
        "../../envs/data_remix.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("data_remix", "report"),
    shell:
        stage_cmd("data_remix", "report")
        + " --in {input.metrics} --out {output.routing} {output.accuracy} {output.md} > {log} 2>&1"


rule data_remix__all:
    input:
        rules.data_remix__evaluate.output.claims,
        rules.data_remix__report.output.routing,
        rules.data_remix__report.output.accuracy,
