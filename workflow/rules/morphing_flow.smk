# morphing_flow: Morphing-Flow for fat-tailed forecasting (ICML 2025; no official code, MoF-style reconstruction).
# Method, reconstructions and scales: src/icml25/studies/morphing_flow/README.md.
# download (synth generated, msft from the pmdarima wheel, ETT and the Autoformer bundle fetched at paper scale)
# -> preprocess (split, scale)
# -> train (one job per arm and seed chunk; GPU at paper scale) -> evaluate (claims.json) -> report (figures).

from icml25.studies.morphing_flow.config import REMOTE_DATASETS as MF_REMOTE_DATASETS

_MF = "morphing_flow"
_MF_CFG = cfg(_MF)
_MF_PAPER = SCALE == "paper"
_MF_DATASETS = _MF_CFG["datasets"]
# the download record (raw/manifest.csv) goes to evaluate when remote files are read: claims.json then says which
# revision and sha256 of each was used, and whether the hash was pinned or trusted on the first download
_MF_REMOTE = any(name in MF_REMOTE_DATASETS for name in _MF_DATASETS)


rule morphing_flow__download:
    output:
        raw=expand(res(_MF, "raw", "{name}.csv"), name=_MF_DATASETS),
        manifest=res(_MF, "raw", "manifest.csv"),
    log:
        logf(_MF, "download"),
    benchmark:
        bench(_MF, "download")
    conda:
        "../../envs/morphing_flow.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=60 if _MF_PAPER else 10,
    params:
        **stage_params(_MF, "download"),
    shell:
        stage_cmd(_MF, "download")
        + " --out {output.raw} {output.manifest} > {log} 2>&1"


rule morphing_flow__preprocess:
    input:
        raw=rules.morphing_flow__download.output.raw,
    output:
        processed=expand(res(_MF, "processed", "{name}.npz"), name=_MF_DATASETS),
        scaler=res(_MF, "processed", "scaler.json"),
    log:
        logf(_MF, "preprocess"),
    benchmark:
        bench(_MF, "preprocess")
    conda:
        "../../envs/morphing_flow.yaml"
    threads: 1
    resources:
        mem_mb=16000 if _MF_PAPER else 2000,
        runtime=30 if _MF_PAPER else 10,
    params:
        **stage_params(_MF, "preprocess"),
    shell:
        stage_cmd(_MF, "preprocess")
        + " --in {input.raw} --out {output.processed} {output.scaler} > {log} 2>&1"


rule morphing_flow__train:
    input:
        processed=rules.morphing_flow__preprocess.output.processed,
    output:
        model=res(_MF, "models", "{arm}", "chunk{chunk}.pt"),
        records=res(_MF, "models", "{arm}", "chunk{chunk}.json"),
    log:
        logf(_MF, "train_{arm}_chunk{chunk}"),
    benchmark:
        bench(_MF, "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
    conda:
        "../../envs/morphing_flow.yaml"
    threads: _MF_CFG["train"]["threads"]
    resources:
        mem_mb=96000 if _MF_PAPER else 2000,  # Traffic's materialised windows at H = 720: ~55 GB
        runtime=2880 if _MF_PAPER else 30,
        gpu=gpus("morphing_flow", "train"),
    params:
        **stage_params(_MF, "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks(_MF)[int(w.chunk)])),
    shell:
        stage_cmd(_MF, "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.processed}"
        " --out {output.model} {output.records} > {log} 2>&1"


_MF_RECORDS = expand(
    res(_MF, "models", "{arm}", "chunk{chunk}.json"),
    arm=_MF_CFG["arms"],
    chunk=seed_chunks(_MF),
)


rule morphing_flow__evaluate:
    input:
        records=_MF_RECORDS,
        downloads=[rules.morphing_flow__download.output.manifest] if _MF_REMOTE else [],
    output:
        claims=res(_MF, "claims.json"),
        metrics=res(_MF, "metrics", "eval.json"),
    log:
        logf(_MF, "evaluate"),
    benchmark:
        bench(_MF, "evaluate")
    conda:
        "../../envs/morphing_flow.yaml"
    threads: 1
    resources:
        mem_mb=8000 if _MF_PAPER else 2000,
        runtime=60 if _MF_PAPER else 10,
    params:
        **stage_params(_MF, "evaluate"),
    shell:
        stage_cmd(_MF, "evaluate")
        + (
            " --in {input.records} {input.downloads}"
            if _MF_REMOTE
            else " --in {input.records}"
        )
        + " --out {output.claims} {output.metrics} > {log} 2>&1"


rule morphing_flow__report:
    input:
        metrics=rules.morphing_flow__evaluate.output.metrics,
        records=_MF_RECORDS,
    output:
        kurtosis=report(
            res(_MF, "figures", "kurtosis.png"),
            caption="../report/morphing_flow/kurtosis.rst",
            category=_MF,
        ),
        flow=report(
            res(_MF, "figures", "flow_curves.png"),
            caption="../report/morphing_flow/flow_curves.rst",
            category=_MF,
        ),
        forecasts=report(
            res(_MF, "figures", "forecasts.png"),
            caption="../report/morphing_flow/forecasts.rst",
            category=_MF,
        ),
        md=res(_MF, "report.md"),
    log:
        logf(_MF, "report"),
    benchmark:
        bench(_MF, "report")
    conda:
        "../../envs/morphing_flow.yaml"
    threads: 1
    resources:
        mem_mb=4000 if _MF_PAPER else 2000,
        runtime=20 if _MF_PAPER else 10,
    params:
        **stage_params(_MF, "report"),
    shell:
        stage_cmd(_MF, "report") + " --in {input.metrics} {input.records}"
        " --out {output.kurtosis} {output.flow} {output.forecasts} {output.md} > {log} 2>&1"


rule morphing_flow__all:
    input:
        rules.morphing_flow__evaluate.output.claims,
        rules.morphing_flow__report.output.kurtosis,
