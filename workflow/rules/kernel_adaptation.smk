# kernel_adaptation: from kernels to features, multi-scale adaptive feature learning (Rubin et al.; ICML 2025;
# https://arxiv.org/abs/2502.03210). Method and reconstructions: src/icml25/studies/kernel_adaptation/README.md.
# download (generators: nothing; paper: MNIST from OpenML) -> preprocess (every task x seed pair's data)
# -> train (one job per arm and seed chunk; the rescaling arms read the adaptive / Langevin outputs)
# -> evaluate (claims.json) -> report (eps, r, u against chi). GPUs only for the paper-scale Langevin ensembles.

from icml25.studies.kernel_adaptation.config import (
    SWEEP_KINDS as KA_SWEEP_KINDS,
    TASK_FILES as KA_TASK_FILES,
    UPSTREAM as KA_UPSTREAM,
)

KA_FILES = sorted(
    {f for t in cfg("kernel_adaptation")["tasks"] for f in KA_TASK_FILES.get(t, ())}
)
KA_PAPER = SCALE == "paper"
# the paper's width sweep (n_sweep.widths; paper scale): one job per kind and seed chunk, every width and task
KA_SWEEP = list(KA_SWEEP_KINDS) if cfg("kernel_adaptation")["n_sweep"]["widths"] else []


rule kernel_adaptation__download:
    output:
        sources=res("kernel_adaptation", "raw", "sources.json"),
        files=[res("kernel_adaptation", "raw", name) for name in KA_FILES],
    log:
        logf("kernel_adaptation", "download"),
    benchmark:
        bench("kernel_adaptation", "download")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=60 if KA_FILES else 10,
    params:
        **stage_params("kernel_adaptation", "download"),
    shell:
        stage_cmd("kernel_adaptation", "download")
        + " --out {output.sources} {output.files} > {log} 2>&1"


rule kernel_adaptation__preprocess:
    input:
        sources=rules.kernel_adaptation__download.output.sources,
        files=rules.kernel_adaptation__download.output.files,
    output:
        tasks=res("kernel_adaptation", "interim", "tasks.npz"),
    log:
        logf("kernel_adaptation", "preprocess"),
    benchmark:
        bench("kernel_adaptation", "preprocess")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=16000 if KA_PAPER else 1000,
        runtime=60 if KA_PAPER else 10,
    params:
        **stage_params("kernel_adaptation", "preprocess"),
    shell:
        stage_cmd("kernel_adaptation", "preprocess")
        + " --in {input.sources} {input.files} --out {output.tasks} > {log} 2>&1"


rule kernel_adaptation__train:
    input:
        tasks=rules.kernel_adaptation__preprocess.output.tasks,
        # the rescaling arms are fitted to the adaptive / Langevin train means of their chunk
        upstream=lambda w: (
            [
                res(
                    "kernel_adaptation",
                    "models",
                    KA_UPSTREAM[w.arm],
                    f"chunk{w.chunk}.npz",
                )
            ]
            if w.arm in KA_UPSTREAM
            else []
        ),
    output:
        res("kernel_adaptation", "models", "{arm}", "chunk{chunk}.npz"),
    log:
        logf("kernel_adaptation", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("kernel_adaptation", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="nngp|rescaling|rescaling_langevin|adaptive_tree|langevin",
        chunk=r"\d+",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        # paper: 64 chains x 1e5 steps per chi on a GPU (Langevin); the adaptive anneal at D = 784 on CPU
        mem_mb=lambda w: 16000 if KA_PAPER else 2000,
        runtime=lambda w: (1440 if w.arm == "langevin" else 480) if KA_PAPER else 30,
        gpu=lambda w: gpus("kernel_adaptation", "train") if w.arm == "langevin" else 0,
    params:
        **stage_params("kernel_adaptation", "train"),
        seeds=lambda w: " ".join(
            map(str, seed_chunks("kernel_adaptation")[int(w.chunk)])
        ),
    shell:
        stage_cmd("kernel_adaptation", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input} --out {output} > {log} 2>&1"


rule kernel_adaptation__sweep:
    input:
        tasks=rules.kernel_adaptation__preprocess.output.tasks,
    output:
        res("kernel_adaptation", "models", "sweep_{kind}", "chunk{chunk}.npz"),
    log:
        logf("kernel_adaptation", "sweep_{kind}_chunk{chunk}"),
    benchmark:
        bench("kernel_adaptation", "sweep_{kind}_chunk{chunk}")
    wildcard_constraints:
        kind="adaptive_tree|langevin",
        chunk=r"\d+",
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        # paper: Langevin ensembles of widths up to N = 2000 on a GPU; the anneals (D = 784 for mnist03) on CPU
        mem_mb=16000 if KA_PAPER else 2000,
        runtime=lambda w: 1440 if KA_PAPER else 30,
        gpu=lambda w: gpus("kernel_adaptation", "sweep") if w.kind == "langevin" else 0,
    params:
        **stage_params("kernel_adaptation", "sweep"),
        seeds=lambda w: " ".join(
            map(str, seed_chunks("kernel_adaptation")[int(w.chunk)])
        ),
    shell:
        stage_cmd("kernel_adaptation", "sweep")
        + " --arm {wildcards.kind} --seeds {params.seeds} --in {input.tasks} --out {output} > {log} 2>&1"


rule kernel_adaptation__evaluate:
    input:
        models=expand(
            res("kernel_adaptation", "models", "{arm}", "chunk{chunk}.npz"),
            arm=cfg("kernel_adaptation")["arms"],
            chunk=seed_chunks("kernel_adaptation"),
        ),
        sweep=expand(
            res("kernel_adaptation", "models", "sweep_{kind}", "chunk{chunk}.npz"),
            kind=KA_SWEEP,
            chunk=seed_chunks("kernel_adaptation"),
        ),
    output:
        claims=res("kernel_adaptation", "claims.json"),
        metrics=res("kernel_adaptation", "metrics", "eval.json"),
    log:
        logf("kernel_adaptation", "evaluate"),
    benchmark:
        bench("kernel_adaptation", "evaluate")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=4000 if KA_PAPER else 2000,
        runtime=20,
    params:
        **stage_params("kernel_adaptation", "evaluate"),
    shell:
        stage_cmd("kernel_adaptation", "evaluate")
        + " --in {input.models} {input.sweep} --out {output.claims} {output.metrics} > {log} 2>&1"


rule kernel_adaptation__report:
    input:
        metrics=rules.kernel_adaptation__evaluate.output.metrics,
        claims=rules.kernel_adaptation__evaluate.output.claims,
    output:
        eps=report(
            res("kernel_adaptation", "figures", "eps_vs_chi.png"),
            caption="../report/kernel_adaptation/eps_vs_chi.rst",
            category="kernel_adaptation",
        ),
        r=report(
            res("kernel_adaptation", "figures", "r_vs_chi.png"),
            caption="../report/kernel_adaptation/r_vs_chi.rst",
            category="kernel_adaptation",
        ),
        u=report(
            res("kernel_adaptation", "figures", "u_vs_chi.png"),
            caption="../report/kernel_adaptation/u_vs_chi.rst",
            category="kernel_adaptation",
        ),
        md=res("kernel_adaptation", "report.md"),
    log:
        logf("kernel_adaptation", "report"),
    benchmark:
        bench("kernel_adaptation", "report")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("kernel_adaptation", "report"),
    shell:
        stage_cmd("kernel_adaptation", "report")
        + " --in {input.metrics} {input.claims}"
        " --out {output.eps} {output.r} {output.u} {output.md} > {log} 2>&1"


rule kernel_adaptation__all:
    input:
        rules.kernel_adaptation__evaluate.output.claims,
        rules.kernel_adaptation__report.output.eps,
