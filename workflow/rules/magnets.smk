# magnets: Masked Generative Nested Transformers with Decode Time Scaling (ICML 2025;
# https://arxiv.org/abs/2502.00382). Method and reconstructions: src/icml25/studies/magnets/README.md.
# prepare (MNIST-5k split | paper: manifest download) -> preprocess (VQ tokenizer, evaluator CNN | paper: MaskGIT
# VQGAN tokens of ImageNet-256, FID reference statistics) -> train (nested generator, one job per seed chunk) ->
# evaluate (decoding arms, checks, claims.json; paper: FID) -> report (figures).

import icml25.studies.magnets as _mg_pkg
from icml25.core.download import read_manifest as _mg_read_manifest

_MG = cfg("magnets")
_MG_PAPER = _MG["data"] == "paper"
# GPUs when paper.device is cuda (after the top-level device switch; core.device): the paper scale's MaskGIT-size
# transformer on ImageNet-256 and FID use them; smoke/default code runs on one core whatever the switch says, and
# the rehearsal sets device cpu.
_MG_RAW = (
    [
        res("magnets", "raw", "paper", name)
        for name in _mg_read_manifest(Path(_mg_pkg.__file__).with_name("manifest.csv"))
    ]
    if _MG_PAPER
    else [
        res("magnets", "raw", "mnist_train.npz"),
        res("magnets", "raw", "mnist_test.npz"),
    ]
)


# preprocess outputs: default = k-means tokenizer, MNIST tokens, evaluator CNN; paper = the converted VQGAN, ImageNet
# tokens (train, val) with labels, FID reference statistics (mean/covariance of real validation images, floor).
_MG_PRE = (
    dict(
        tokenizer=res("magnets", "processed", "vqgan.pt"),
        tokens_train=res("magnets", "processed", "tokens_train.npz"),
        tokens_test=res("magnets", "processed", "tokens_val.npz"),
        evaluator=res("magnets", "processed", "fid_reference.npz"),
    )
    if _MG_PAPER
    else dict(
        tokenizer=res("magnets", "processed", "tokenizer.npz"),
        tokens_train=res("magnets", "processed", "tokens_train.npy"),
        tokens_test=res("magnets", "processed", "tokens_test.npy"),
        evaluator=res("magnets", "processed", "evaluator.pt"),
    )
)


rule magnets__prepare:
    output:
        raw=_MG_RAW,
    log:
        logf("magnets", "prepare"),
    benchmark:
        bench("magnets", "prepare")
    conda:
        "../../envs/magnets.yaml"
    threads: 1
    resources:
        mem_mb=4000 if _MG_PAPER else 1500,
        runtime=720 if _MG_PAPER else 10,
    params:
        **stage_params("magnets", "prepare"),
    shell:
        stage_cmd("magnets", "prepare") + " --out {output.raw} > {log} 2>&1"


rule magnets__preprocess:
    input:
        raw=rules.magnets__prepare.output.raw,
    output:
        **_MG_PRE,
    log:
        logf("magnets", "preprocess"),
    benchmark:
        bench("magnets", "preprocess")
    conda:
        "../../envs/magnets.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _MG_PAPER else 2000,
        runtime=1440 if _MG_PAPER else 20,
        gpu=gpus("magnets", "preprocess", _MG["paper"]["gpus"]),
    params:
        **stage_params("magnets", "preprocess"),
    shell:
        stage_cmd("magnets", "preprocess")
        + " --in {input.raw} --out {output.tokenizer} {output.tokens_train}"
        " {output.tokens_test} {output.evaluator} > {log} 2>&1"


rule magnets__train:
    input:
        tokens=rules.magnets__preprocess.output.tokens_train,
        raw=[] if _MG_PAPER else _MG_RAW[0],  # MNIST labels; the paper's tokens_train.npz holds its labels
    output:
        res("magnets", "models", "{arm}", "chunk{chunk}.pt"),
    log:
        logf("magnets", "train_{arm}_chunk{chunk}"),
    benchmark:
        bench("magnets", "train_{arm}_chunk{chunk}")
    wildcard_constraints:
        arm="[a-z_]+",
        chunk=r"\d+",
    conda:
        "../../envs/magnets.yaml"
    threads: 1
    resources:
        # paper: ~1-2k accelerator-hours for the MaskGIT-size nested transformer on ImageNet-256
        mem_mb=128000 if _MG_PAPER else 2000,
        runtime=10080 if _MG_PAPER else 30,
        gpu=gpus("magnets", "train", _MG["paper"]["gpus"]),
    params:
        **stage_params("magnets", "train"),
        seeds=lambda w: " ".join(map(str, seed_chunks("magnets")[int(w.chunk)])),
    shell:
        stage_cmd("magnets", "train")
        + " --arm {wildcards.arm} --seeds {params.seeds} --in {input.tokens} {input.raw}"
        " --out {output} > {log} 2>&1"


rule magnets__evaluate:
    input:
        tokenizer=rules.magnets__preprocess.output.tokenizer,
        evaluator=rules.magnets__preprocess.output.evaluator,
        test=_MG_RAW[-1],
        models=expand(
            res("magnets", "models", "{arm}", "chunk{chunk}.pt"),
            arm=_MG["arms"],
            chunk=seed_chunks("magnets"),
        ),
    output:
        claims=res("magnets", "claims.json"),
        metrics=res("magnets", "metrics", "eval.json"),
        arms=res("magnets", "metrics", "arms.csv"),
        samples=res("magnets", "metrics", "samples.npz"),
    log:
        logf("magnets", "evaluate"),
    benchmark:
        bench("magnets", "evaluate")
    conda:
        "../../envs/magnets.yaml"
    threads: 1
    resources:
        mem_mb=64000 if _MG_PAPER else 3000,
        runtime=2880 if _MG_PAPER else 30,
        gpu=gpus("magnets", "evaluate", _MG["paper"]["gpus"]),
    params:
        **stage_params("magnets", "evaluate"),
    shell:
        stage_cmd("magnets", "evaluate")
        + " --in {input.tokenizer} {input.evaluator} {input.test} {input.models}"
        " --out {output.claims} {output.metrics} {output.arms} {output.samples} > {log} 2>&1"


rule magnets__report:
    input:
        arms=rules.magnets__evaluate.output.arms,
        samples=rules.magnets__evaluate.output.samples,
        claims=rules.magnets__evaluate.output.claims,
    output:
        fd_flops=report(
            res("magnets", "figures", "fd_flops.png"),
            caption="../report/magnets/fd_flops.rst",
            category="magnets",
        ),
        samples=report(
            res("magnets", "figures", "samples.png"),
            caption="../report/magnets/samples.rst",
            category="magnets",
        ),
        md=res("magnets", "report.md"),
    log:
        logf("magnets", "report"),
    benchmark:
        bench("magnets", "report")
    conda:
        "../../envs/magnets.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        **stage_params("magnets", "report"),
    shell:
        stage_cmd("magnets", "report")
        + " --in {input.arms} {input.samples} {input.claims}"
        " --out {output.fd_flops} {output.samples} {output.md} > {log} 2>&1"


rule magnets__all:
    input:
        rules.magnets__evaluate.output.claims,
        rules.magnets__report.output.fd_flops,
