# pid: PiD, pixelwise decomposition residuals for AI-generated image detection (ICML 2025).
# Method and reconstructions: src/icml25/studies/pid/README.md.
# download (real photos from the scikit-image / scikit-learn wheels; paper: GenImage archives from the manifest,
# verified) -> [paper: unpack, one CPU job per archive, a SLURM array] -> preprocess (crops, split, autoencoder
# generators A/B/C and their fakes; paper: the GenImage file index) -> train (one job per arm and seed chunk;
# paper: ResNet-50 on a GPU) -> evaluate (claims.json) -> report (figures).

import csv as _pid_csv

from icml25.studies.pid.stages import raw_names as _pid_raw_names

_PID = "pid"
_PID_CFG = cfg(_PID)
_PID_PAPER = _PID_CFG["data"]["dataset"] == "genimage"
if _PID_PAPER:
    with open("src/icml25/studies/pid/manifest.csv", newline="") as _fh:
        _PID_ARCHIVES = [r["name"] for r in _pid_csv.DictReader(_fh)]
    _PID_RAW = [res(_PID, "raw", "genimage", n) for n in _PID_ARCHIVES]
    _PID_PRE_IN = [
        res(_PID, "interim", "genimage", n.rsplit(".", 1)[0]) for n in _PID_ARCHIVES
    ]
else:
    _PID_RAW = [
        res(_PID, "raw", "real", n)
        for n in _pid_raw_names(
            [*_PID_CFG["data"]["train_images"], *_PID_CFG["data"]["test_images"]]
        )
    ]
    _PID_PRE_IN = _PID_RAW
# paper scale: the GenImage file index (preprocess) instead of the autoencoders, and train reads the unpacked files
_PID_AUX = (
    res(_PID, "processed", "genimage_index.npz")
    if _PID_PAPER
    else res(_PID, "interim", "ae.pt")
)


rule pid__download:
    output:
        raw=_PID_RAW,
    log:
        logf(_PID, "download"),
    benchmark:
        bench(_PID, "download")
    conda:
        "../../envs/pid.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=600 if _PID_PAPER else 10,
    params:
        **stage_params(_PID, "download"),
    shell:
        stage_cmd(_PID, "download") + " --out {output.raw} > {log} 2>&1"


# Paper scale: one CPU job per GenImage archive (a SLURM array): sha256 re-checked, CRCs tested, no member
# extracted outside interim/genimage/<archive stem>/, renamed into place only when complete.
rule pid__unpack:
    input:
        archive=res(_PID, "raw", "genimage", "{archive}.zip"),
    output:
        unpacked=directory(res(_PID, "interim", "genimage", "{archive}")),
    log:
        logf(_PID, "unpack_{archive}"),
    benchmark:
        bench(_PID, "unpack_{archive}")
    wildcard_constraints:
        archive="[A-Za-z0-9_]+",
    conda:
        "../../envs/pid.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=240,
    params:
        **stage_params(_PID, "unpack"),
    shell:
        stage_cmd(_PID, "unpack")
        + " --in {input.archive} --out {output.unpacked} > {log} 2>&1"


rule pid__preprocess:
    input:
        raw=_PID_PRE_IN,
    output:
        crops=res(_PID, "processed", "crops.npz"),
        aux=_PID_AUX,
    log:
        logf(_PID, "preprocess"),
    benchmark:
        bench(_PID, "preprocess")
    conda:
        "../../envs/pid.yaml"
    threads: 1
    resources:
        mem_mb=8000 if _PID_PAPER else 3000,  # paper: the file index of ~2.7M paths
        runtime=120 if _PID_PAPER else 15,
    params:
        **stage_params(_PID, "preprocess"),
    shell:
        stage_cmd(_PID, "preprocess")
        + " --in {input.raw} --out {output.crops} {output.aux} > {log} 2>&1"


rule pid__train:
    input:
        data=(
            rules.pid__preprocess.output.aux
            if _PID_PAPER
            else rules.pid__preprocess.output.crops
        ),
        unpacked=_PID_PRE_IN if _PID_PAPER else [],
    output:
        summary=res(_PID, "models", "{arm}", "chunk{chunk}.json"),
        model=res(_PID, "models", "{arm}", "chunk{chunk}.pt"),
    log:
        logf(_PID, "train_{arm}_chunk{chunk}"),
    benchmark:
        bench(_PID, "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
    conda:
        "../../envs/pid.yaml"
    threads: max(_PID_CFG["detector"]["threads"], _PID_CFG["detector"]["workers"])
    resources:
        mem_mb=64000 if _PID_PAPER else 3000,
        runtime=(  # minutes; paper: ~1 A100-h per ResNet-50 run (README), 3 h allowed per seed
            180 * (_PID_CFG["seeds_per_job"] or len(_PID_CFG["seeds"]))
            if _PID_PAPER
            else 30
        ),
        gpu=1 if _PID_PAPER else 0,
    params:
        **stage_params(_PID, "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks(_PID)[int(w.chunk)])),
    shell:
        stage_cmd(_PID, "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.data}"
        " --out {output.summary} {output.model} > {log} 2>&1"


rule pid__evaluate:
    input:
        summaries=expand(
            res(_PID, "models", "{arm}", "chunk{chunk}.json"),
            arm=_PID_CFG["arms"],
            chunk=seed_chunks(_PID),
        ),
        crops=rules.pid__preprocess.output.crops,
    output:
        claims=res(_PID, "claims.json"),
        metrics=res(_PID, "metrics", "eval.json"),
    log:
        logf(_PID, "evaluate"),
    benchmark:
        bench(_PID, "evaluate")
    conda:
        "../../envs/pid.yaml"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=15,
    params:
        **stage_params(_PID, "evaluate"),
    shell:
        stage_cmd(_PID, "evaluate")
        + " --in {input.summaries} {input.crops} --out {output.claims} {output.metrics} > {log} 2>&1"


rule pid__report:
    input:
        crops=rules.pid__preprocess.output.crops,
        metrics=rules.pid__evaluate.output.metrics,
    output:
        examples=report(
            res(_PID, "figures", "residual_examples.png"),
            caption="../report/pid/residual_examples.rst",
            category="pid",
        ),
        accuracy=report(
            res(_PID, "figures", "acc_by_generator.png"),
            caption="../report/pid/acc_by_generator.rst",
            category="pid",
        ),
    log:
        logf(_PID, "report"),
    benchmark:
        bench(_PID, "report")
    conda:
        "../../envs/pid.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params(_PID, "report"),
    shell:
        stage_cmd(_PID, "report")
        + " --in {input.crops} {input.metrics} --out {output.examples} {output.accuracy} > {log} 2>&1"


rule pid__all:
    input:
        rules.pid__evaluate.output.claims,
        rules.pid__report.output.examples,
