# adaptive_adversary: learnability with adaptive adversaries (Lechner, Bie, Kamath; ICML 2025;
# https://arxiv.org/abs/2509.05137). OWN ILLUSTRATION of the paper's separation, not its proof.
# Method and reconstructions: src/icml25/studies/adaptive_adversary/README.md.
# prepare (generator settings) -> preprocess (closed forms per cell) -> train (one job per adversary and seed
# chunk: the simulated trials) -> evaluate (claims.json) -> report (figures). CPU only at every scale.


rule adaptive_adversary__prepare:
    output:
        manifest=res("adaptive_adversary", "raw", "manifest.json"),
    log:
        logf("adaptive_adversary", "prepare"),
    benchmark:
        bench("adaptive_adversary", "prepare")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("adaptive_adversary", "prepare"),
    shell:
        stage_cmd("adaptive_adversary", "prepare")
        + " --out {output.manifest} > {log} 2>&1"


rule adaptive_adversary__preprocess:
    input:
        manifest=rules.adaptive_adversary__prepare.output.manifest,
    output:
        cells=res("adaptive_adversary", "interim", "cells.csv"),
    log:
        logf("adaptive_adversary", "preprocess"),
    benchmark:
        bench("adaptive_adversary", "preprocess")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("adaptive_adversary", "preprocess"),
    shell:
        stage_cmd("adaptive_adversary", "preprocess")
        + " --in {input.manifest} --out {output.cells} > {log} 2>&1"


rule adaptive_adversary__train:
    input:
        cells=rules.adaptive_adversary__preprocess.output.cells,
    output:
        res("adaptive_adversary", "processed", "{arm}", "trials_chunk{chunk}.parquet"),
    log:
        logf("adaptive_adversary", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("adaptive_adversary", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        # paper: 918 cells x 10^4 trials = 9.2e6 rows per job, vectorised over trials (cost independent of m):
        # about 25 s of CPU and 5.2 GB peak RSS measured (benchmarks/adaptive_adversary_trials.py); CPU only
        mem_mb=8000 if SCALE == "paper" else 2000,
        runtime=60 if SCALE == "paper" else 30,
    params:
        **stage_params("adaptive_adversary", "train"),
        seeds=lambda w: " ".join(
            map(str, seed_chunks("adaptive_adversary")[int(w.chunk)])
        ),
    shell:
        stage_cmd("adaptive_adversary", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.cells} --out {output} > {log} 2>&1"


rule adaptive_adversary__evaluate:
    input:
        cells=rules.adaptive_adversary__preprocess.output.cells,
        trials=expand(
            res(
                "adaptive_adversary",
                "processed",
                "{arm}",
                "trials_chunk{chunk}.parquet",
            ),
            arm=cfg("adaptive_adversary")["arms"],
            chunk=seed_chunks("adaptive_adversary"),
        ),
    output:
        claims=res("adaptive_adversary", "claims.json"),
        metrics=res("adaptive_adversary", "metrics", "eval.json"),
        cells=res("adaptive_adversary", "metrics", "cells.csv"),
    log:
        logf("adaptive_adversary", "evaluate"),
    benchmark:
        bench("adaptive_adversary", "evaluate")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=64000 if SCALE == "paper" else 2000,
        runtime=240 if SCALE == "paper" else 20,
    params:
        **stage_params("adaptive_adversary", "evaluate"),
    shell:
        stage_cmd("adaptive_adversary", "evaluate")
        + " --in {input.cells} {input.trials}"
        " --out {output.claims} {output.metrics} {output.cells} > {log} 2>&1"


rule adaptive_adversary__report:
    input:
        cells=rules.adaptive_adversary__evaluate.output.cells,
        claims=rules.adaptive_adversary__evaluate.output.claims,
    output:
        error_vs_m=report(
            res("adaptive_adversary", "figures", "error_vs_m.png"),
            caption="../report/adaptive_adversary/error_vs_m.rst",
            category="adaptive_adversary",
        ),
        phase=report(
            res("adaptive_adversary", "figures", "phase_eta_over_c.png"),
            caption="../report/adaptive_adversary/phase_eta_over_c.rst",
            category="adaptive_adversary",
        ),
        md=res("adaptive_adversary", "report.md"),
    log:
        logf("adaptive_adversary", "report"),
    benchmark:
        bench("adaptive_adversary", "report")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("adaptive_adversary", "report"),
    shell:
        stage_cmd("adaptive_adversary", "report")
        + " --in {input.cells} {input.claims}"
        " --out {output.error_vs_m} {output.phase} {output.md} > {log} 2>&1"


rule adaptive_adversary__all:
    input:
        rules.adaptive_adversary__evaluate.output.claims,
        rules.adaptive_adversary__report.output.phase,
