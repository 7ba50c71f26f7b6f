# human_baselines: human baselines in model evaluations (position paper, ICML 2025). Spec:
# ../shared/specs/human_baselines.md. download (real workbook via core.download with data_source=remote, the
# synthetic one offline) -> preprocess (wide + long tables) -> train (table_iii, rigor_score: one job each;
# power_sim: one job per seed chunk) -> evaluate (claims.json) -> report (figures, report.md).


from icml25.studies.human_baselines.smk import model_paths, seed_args

HB_MODELS = model_paths(
    cfg("human_baselines")["arms"],
    seed_chunks("human_baselines"),
    res("human_baselines", "models"),
)


rule human_baselines__download:
    output:
        workbook=res("human_baselines", "raw", "workbook.xlsx"),
        source=res("human_baselines", "raw", "source.json"),
    log:
        logf("human_baselines", "download"),
    benchmark:
        bench("human_baselines", "download")
    conda:
        "../../envs/human_baselines.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("human_baselines", "download"),
    shell:
        stage_cmd("human_baselines", "download")
        + " --out {output.workbook} {output.source} > {log} 2>&1"


rule human_baselines__preprocess:
    input:
        workbook=rules.human_baselines__download.output.workbook,
        source=rules.human_baselines__download.output.source,
    output:
        wide=res("human_baselines", "interim", "wide.parquet"),
        long=res("human_baselines", "processed", "long.parquet"),
    log:
        logf("human_baselines", "preprocess"),
    benchmark:
        bench("human_baselines", "preprocess")
    conda:
        "../../envs/human_baselines.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("human_baselines", "preprocess"),
    shell:
        stage_cmd("human_baselines", "preprocess")
        + " --in {input.workbook} {input.source} --out {output.wide} {output.long} > {log} 2>&1"


rule human_baselines__train:
    input:
        wide=rules.human_baselines__preprocess.output.wide,
        long=rules.human_baselines__preprocess.output.long,
    output:
        res("human_baselines", "models", "{arm}", "chunk{chunk}.csv"),
    log:
        logf("human_baselines", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("human_baselines", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="table_iii|rigor_score|power_sim",
        chunk=r"\d+",
    conda:
        "../../envs/human_baselines.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=lambda wc: 240 if SCALE == "paper" else 30,
    params:
        **stage_params("human_baselines", "train"),
        seeds=lambda w: seed_args(w.arm, w.chunk, seed_chunks("human_baselines")),
    shell:
        stage_cmd("human_baselines", "train")
        + " --arm {wildcards.arm} {params.seeds} --in {input.wide} {input.long} --out {output} > {log} 2>&1"


rule human_baselines__evaluate:
    input:
        workbook=rules.human_baselines__download.output.workbook,
        source=rules.human_baselines__download.output.source,
        long=rules.human_baselines__preprocess.output.long,
        models=HB_MODELS,
    output:
        claims=res("human_baselines", "claims.json"),
        metrics=res("human_baselines", "metrics", "eval.json"),
        table=res("human_baselines", "metrics", "table_iii.csv"),
    log:
        logf("human_baselines", "evaluate"),
    benchmark:
        bench("human_baselines", "evaluate")
    conda:
        "../../envs/human_baselines.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("human_baselines", "evaluate"),
    shell:
        stage_cmd("human_baselines", "evaluate")
        + " --in {input.workbook} {input.source} {input.long} {input.models}"
        " --out {output.claims} {output.metrics} {output.table} > {log} 2>&1"


rule human_baselines__report:
    input:
        metrics=rules.human_baselines__evaluate.output.metrics,
        table=rules.human_baselines__evaluate.output.table,
        models=model_paths(
            cfg("human_baselines")["arms"],
            seed_chunks("human_baselines"),
            res("human_baselines", "models"),
            exclude=["table_iii"],
        ),
    output:
        checklist=report(
            res("human_baselines", "figures", "checklist_share.png"),
            caption="../report/human_baselines/checklist_share.rst",
            category="human_baselines",
        ),
        power=report(
            res("human_baselines", "figures", "power_vs_baseliners.png"),
            caption="../report/human_baselines/power_vs_baseliners.rst",
            category="human_baselines",
        ),
        rigor=report(
            res("human_baselines", "figures", "rigor_by_year.png"),
            caption="../report/human_baselines/rigor_by_year.rst",
            category="human_baselines",
        ),
        md=res("human_baselines", "report.md"),
    log:
        logf("human_baselines", "report"),
    benchmark:
        bench("human_baselines", "report")
    conda:
        "../../envs/human_baselines.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("human_baselines", "report"),
    shell:
        stage_cmd("human_baselines", "report")
        + " --in {input.metrics} {input.table} {input.models}"
        " --out {output.checklist} {output.power} {output.rigor} {output.md} > {log} 2>&1"


rule human_baselines__all:
    input:
        rules.human_baselines__evaluate.output.claims,
        rules.human_baselines__report.output.md,
