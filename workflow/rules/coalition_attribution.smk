# coalition_attribution: attributions of input variables in a coalition (Zheng, Deng, Zhang; ICML 2025;
# https://arxiv.org/abs/2309.13411). Method and reconstructions: src/icml25/studies/coalition_attribution/README.md.
# download (toy: nothing; paper: the real-data files of the manifest) -> preprocess (toy functions, coalitions)
# -> train (one job per arm and seed chunk; mlp_adam reuses the mlp games) -> evaluate (claims.json)
# -> report (Table 4 figure). Paper scale adds one GPU job per real-data experiment (train_real: SST-2 with BERT-large
# and LLaMA, MNIST with VGG-11, CIFAR-10 with ResNet-20), whose games evaluate checks; Go is an untested entry.

from icml25.studies.coalition_attribution.config import REAL_FILES as CA_REAL_FILES

CA_REAL = list(cfg("coalition_attribution")["real"]["experiments"])
CA_FILES = sorted({f for e in CA_REAL for f in CA_REAL_FILES[e]})


rule coalition_attribution__download:
    output:
        sources=res("coalition_attribution", "raw", "sources.json"),
        files=[res("coalition_attribution", "raw", name) for name in CA_FILES],
    log:
        logf("coalition_attribution", "download"),
    benchmark:
        bench("coalition_attribution", "download")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=120 if CA_FILES else 10,
    params:
        **stage_params("coalition_attribution", "download"),
    shell:
        stage_cmd("coalition_attribution", "download")
        + " --out {output.sources} {output.files} > {log} 2>&1"


rule coalition_attribution__preprocess:
    input:
        sources=rules.coalition_attribution__download.output.sources,
    output:
        functions=res("coalition_attribution", "interim", "functions.json"),
        coalitions=res("coalition_attribution", "interim", "coalitions.json"),
    log:
        logf("coalition_attribution", "preprocess"),
    benchmark:
        bench("coalition_attribution", "preprocess")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("coalition_attribution", "preprocess"),
    shell:
        stage_cmd("coalition_attribution", "preprocess")
        + " --out {output.functions} {output.coalitions} > {log} 2>&1"


rule coalition_attribution__train:
    input:
        functions=rules.coalition_attribution__preprocess.output.functions,
        coalitions=rules.coalition_attribution__preprocess.output.coalitions,
        # mlp_adam reuses the mlp arm's games of its chunk (the same trained networks)
        games=lambda w: (
            [res("coalition_attribution", "models", "mlp", f"chunk{w.chunk}.npz")]
            if w.arm == "mlp_adam"
            else []
        ),
    output:
        res("coalition_attribution", "models", "{arm}", "chunk{chunk}.npz"),
    log:
        logf("coalition_attribution", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("coalition_attribution", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="oracle|mlp|mlp_adam",
        chunk=r"\d+",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        # paper: n = 10 (LP about 10 s per game), the paper's MLP for 3000 epochs; CPU is enough for the toy
        mem_mb=8000 if SCALE == "paper" else 2000,
        runtime=720 if SCALE == "paper" else 30,
    params:
        **stage_params("coalition_attribution", "train"),
        seeds=lambda w: " ".join(
            map(str, seed_chunks("coalition_attribution")[int(w.chunk)])
        ),
    shell:
        stage_cmd("coalition_attribution", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input} --out {output} > {log} 2>&1"


rule coalition_attribution__train_real:
    input:
        lambda w: [
            res("coalition_attribution", "raw", f) for f in CA_REAL_FILES[w.experiment]
        ],
    output:
        res("coalition_attribution", "models", "real", "{experiment}.json"),
    log:
        logf("coalition_attribution", "train_real_{experiment}"),
    benchmark:
        bench("coalition_attribution", "train_real_{experiment}")
    wildcard_constraints:
        experiment="[a-z0-9_]+",
    conda:
        "../../envs/coalition_attribution.yaml"
    threads: cfg("coalition_attribution")["real"]["threads"]
    resources:
        mem_mb=64000,
        runtime=480,
        gpu=gpus(
            "coalition_attribution",
            "train_real",
            cfg("coalition_attribution")["real"]["gpus"],
        ),
    params:
        **stage_params("coalition_attribution", "train_real"),
    shell:
        stage_cmd("coalition_attribution", "train_real")
        + " --arm {wildcards.experiment} --in {input} --out {output} > {log} 2>&1"


rule coalition_attribution__evaluate:
    input:
        models=expand(
            res("coalition_attribution", "models", "{arm}", "chunk{chunk}.npz"),
            arm=cfg("coalition_attribution")["arms"],
            chunk=seed_chunks("coalition_attribution"),
        ),
        real=[
            res("coalition_attribution", "models", "real", f"{e}.json")
            for e in CA_REAL
        ],
    output:
        claims=res("coalition_attribution", "claims.json"),
        metrics=res("coalition_attribution", "metrics", "eval.json"),
        coalitions=res("coalition_attribution", "metrics", "coalitions.csv"),
    log:
        logf("coalition_attribution", "evaluate"),
    benchmark:
        bench("coalition_attribution", "evaluate")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    params:
        **stage_params("coalition_attribution", "evaluate"),
    shell:
        stage_cmd("coalition_attribution", "evaluate")
        + " --in {input.models} {input.real}"
        " --out {output.claims} {output.metrics} {output.coalitions} > {log} 2>&1"


rule coalition_attribution__report:
    input:
        metrics=rules.coalition_attribution__evaluate.output.metrics,
        claims=rules.coalition_attribution__evaluate.output.claims,
    output:
        table4=report(
            res("coalition_attribution", "figures", "table4_compare.png"),
            caption="../report/coalition_attribution/table4_compare.rst",
            category="coalition_attribution",
        ),
        md=res("coalition_attribution", "report.md"),
    log:
        logf("coalition_attribution", "report"),
    benchmark:
        bench("coalition_attribution", "report")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("coalition_attribution", "report"),
    shell:
        stage_cmd("coalition_attribution", "report")
        + " --in {input.metrics} {input.claims} --out {output.table4} {output.md} > {log} 2>&1"


rule coalition_attribution__all:
    input:
        rules.coalition_attribution__evaluate.output.claims,
        rules.coalition_attribution__report.output.table4,
        [res("coalition_attribution", "models", "real", f"{e}.json") for e in CA_REAL],
