# coastalbench: CoastalBench (ICML 2025) — ROMS ingestion + ViT emulator; paper code and data:
# https://github.com/spatialdatasciencegroup/CoastalBench; method: src/icml25/studies/coastalbench/README.md.
# smoke/default: download (mini-ROMS simulation) -> preprocess (statistics, shards, ingestion checks)
#   -> train (one job per arm and seed chunk) -> evaluate (claims.json) -> report (figures).
# paper: download + preprocess per month (SLURM array) -> stats_reduce -> shard per month -> train (GPU) -> ...

import datetime as _cb_dt

_CB = "coastalbench"
_CB_CFG = cfg(_CB)
_CB_PAPER = _CB_CFG["data"] == "remote"
_CB_TRAINED = [a for a in _CB_CFG["arms"] if a in ("vit", "vit_no_boundary")]


_CB_START = _cb_dt.date.fromisoformat(_CB_CFG["sim"]["start_date"])
_CB_DAYS = [
    (_CB_START + _cb_dt.timedelta(days=k)).strftime("%Y%m%d")
    for k in range(_CB_CFG["sim"]["days"])
]
_CB_Y0, _CB_M0 = map(int, _CB_CFG["remote"]["first_month"].split("-"))
_CB_Y1, _CB_M1 = map(int, _CB_CFG["remote"]["last_month"].split("-"))
_CB_MONTHS = [
    f"{y:04d}-{m:02d}"
    for y in range(_CB_Y0, _CB_Y1 + 1)
    for m in range(1, 13)
    if (_CB_Y0, _CB_M0) <= (y, m) <= (_CB_Y1, _CB_M1)
]
# What train/evaluate read besides channels.json and grid.npz: the day shards (offline) or the month indexes
# (paper); listing the shards makes a change of scale rerun the simulation and preprocessing.
_CB_SHARDS = (
    expand(res(_CB, "processed", "shards", "{month}.json"), month=_CB_MONTHS)
    if _CB_PAPER
    else expand(res(_CB, "processed", "shards", "{day}.npy"), day=_CB_DAYS)
)


# Download and preprocess are one job each offline (the simulation is sequential in time) and one job per month
# (wildcard `month`, a SLURM array) at paper scale; stats_reduce and shard exist only at paper scale.
_CB_RAW = ["raw", "{month}"] if _CB_PAPER else ["raw"]
_CB_W = "_{month}" if _CB_PAPER else ""
_CB_SET = " --set month={wildcards.month}" if _CB_PAPER else ""
_CB_PRE_OUT = (
    [res(_CB, "processed", "partial", "{month}.json")]
    if _CB_PAPER
    else [
        res(_CB, "processed", "channels.json"),
        res(_CB, "processed", "stats.json"),
        res(_CB, "processed", "grid.npz"),
        res(_CB, "processed", "ingest_checks.json"),
        *_CB_SHARDS,
    ]
)


rule coastalbench__download:
    output:
        manifest=res(_CB, *_CB_RAW, "files.csv" if _CB_PAPER else "manifest.csv"),
        preview=directory(res(_CB, *_CB_RAW, "preview")),
        his=(
            []
            if _CB_PAPER
            else expand(res(_CB, *_CB_RAW, "ocean_his_{day}.nc"), day=_CB_DAYS)
        ),
    log:
        logf(_CB, f"download{_CB_W}"),
    benchmark:
        bench(_CB, f"download{_CB_W}")
    wildcard_constraints:
        month=r"\d{4}-\d{2}",
    conda:
        "../../envs/coastalbench.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=720 if _CB_PAPER else 30,
    params:
        **stage_params(_CB, "download"),
    shell:
        stage_cmd(_CB, "download")
        + _CB_SET
        + " --out {output.manifest} {output.preview} {output.his} > {log} 2>&1"


rule coastalbench__preprocess:
    input:
        manifest=rules.coastalbench__download.output.manifest,
        preview=rules.coastalbench__download.output.preview,
        his=rules.coastalbench__download.output.his,
    output:
        _CB_PRE_OUT,
    log:
        logf(_CB, f"preprocess{_CB_W}"),
    benchmark:
        bench(_CB, f"preprocess{_CB_W}")
    wildcard_constraints:
        month=r"\d{4}-\d{2}",
    conda:
        "../../envs/coastalbench.yaml"
    threads: 1
    resources:
        mem_mb=4000 if _CB_PAPER else 3000,
        runtime=600 if _CB_PAPER else 30,
    params:
        **stage_params(_CB, "preprocess"),
    shell:
        stage_cmd(_CB, "preprocess")
        + _CB_SET
        + " --in {input.manifest} {input.preview} {input.his} --out {output} > {log} 2>&1"


if _CB_PAPER:

    rule coastalbench__stats_reduce:
        input:
            first=res(_CB, "raw", _CB_MONTHS[0], "files.csv"),
            partials=expand(
                res(_CB, "processed", "partial", "{month}.json"), month=_CB_MONTHS
            ),
        output:
            stats=res(_CB, "processed", "stats.json"),
            channels=res(_CB, "processed", "channels.json"),
            grid=res(_CB, "processed", "grid.npz"),
            checks=res(_CB, "processed", "ingest_checks.json"),
        log:
            logf(_CB, "stats_reduce"),
        benchmark:
            bench(_CB, "stats_reduce")
        conda:
            "../../envs/coastalbench.yaml"
        threads: 1
        resources:
            mem_mb=8000,
            runtime=120,
        params:
            **stage_params(_CB, "stats_reduce"),
        shell:
            stage_cmd(_CB, "stats_reduce") + " --in {input.first} {input.partials}"
            " --out {output.stats} {output.channels} {output.grid} {output.checks} > {log} 2>&1"

    rule coastalbench__shard:
        input:
            files=res(_CB, "raw", "{month}", "files.csv"),
            stats=res(_CB, "processed", "stats.json"),
        output:
            res(_CB, "processed", "shards", "{month}.json"),
        log:
            logf(_CB, "shard_{month}"),
        benchmark:
            bench(_CB, "shard_{month}")
        wildcard_constraints:
            month=r"\d{4}-\d{2}",
        conda:
            "../../envs/coastalbench.yaml"
        threads: 1
        resources:
            mem_mb=4000,
            runtime=600,
        params:
            **stage_params(_CB, "shard"),
        shell:
            stage_cmd(_CB, "shard")
            + " --set month={wildcards.month} --in {input.files} {input.stats} --out {output} > {log} 2>&1"


rule coastalbench__train:
    input:
        channels=res(_CB, "processed", "channels.json"),
        grid=res(_CB, "processed", "grid.npz"),
        index=_CB_SHARDS,
    output:
        res(_CB, "models", "{arm}_chunk{chunk}.json"),
    log:
        logf(_CB, "train_{arm}_chunk{chunk}"),
    benchmark:
        bench(_CB, "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="vit|vit_no_boundary",
        chunk=r"\d+",
    conda:
        "../../envs/coastalbench.yaml"
    threads: _CB_CFG["train"]["threads"]
    resources:
        mem_mb=64000 if _CB_PAPER else 3000,
        runtime=2880 if _CB_PAPER else 30,
        gpu=gpus("coastalbench", "train"),
    params:
        **stage_params(_CB, "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks(_CB)[int(w.chunk)])),
    shell:
        stage_cmd(_CB, "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.channels} {input.grid} {input.index}"
        " --out {output} > {log} 2>&1"


rule coastalbench__evaluate:
    input:
        channels=res(_CB, "processed", "channels.json"),
        grid=res(_CB, "processed", "grid.npz"),
        checks=res(_CB, "processed", "ingest_checks.json"),
        models=expand(
            res(_CB, "models", "{arm}_chunk{chunk}.json"),
            arm=_CB_TRAINED,
            chunk=seed_chunks(_CB),
        ),
        index=_CB_SHARDS,
    output:
        claims=res(_CB, "claims.json"),
        metrics=res(_CB, "metrics", "eval.json"),
        example=res(_CB, "metrics", "example.npz"),
    log:
        logf(_CB, "evaluate"),
    benchmark:
        bench(_CB, "evaluate")
    conda:
        "../../envs/coastalbench.yaml"
    threads: 2
    resources:
        mem_mb=16000 if _CB_PAPER else 3000,
        runtime=600 if _CB_PAPER else 20,
        gpu=gpus("coastalbench", "evaluate"),
    params:
        **stage_params(_CB, "evaluate"),
    shell:
        stage_cmd(_CB, "evaluate")
        + " --in {input.channels} {input.grid} {input.checks} {input.models} {input.index}"
        " --out {output.claims} {output.metrics} {output.example} > {log} 2>&1"


rule coastalbench__report:
    input:
        metrics=rules.coastalbench__evaluate.output.metrics,
        claims=rules.coastalbench__evaluate.output.claims,
        example=rules.coastalbench__evaluate.output.example,
    output:
        rmse=report(
            res(_CB, "figures", "rmse_vs_lead.png"),
            caption="../report/coastalbench/rmse_vs_lead.rst",
            category="coastalbench",
        ),
        map=report(
            res(_CB, "figures", "prediction_map.png"),
            caption="../report/coastalbench/prediction_map.rst",
            category="coastalbench",
        ),
        md=res(_CB, "report.md"),
    log:
        logf(_CB, "report"),
    benchmark:
        bench(_CB, "report")
    conda:
        "../../envs/coastalbench.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params(_CB, "report"),
    shell:
        stage_cmd(_CB, "report")
        + " --in {input.metrics} {input.claims} {input.example}"
        " --out {output.rmse} {output.map} {output.md} > {log} 2>&1"


rule coastalbench__all:
    input:
        rules.coastalbench__evaluate.output.claims,
        rules.coastalbench__report.output.rmse,
        rules.coastalbench__report.output.map,
