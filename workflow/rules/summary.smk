# The cross-study claims table and its MLflow record. Every selected study's claims.json (and its figures,
# through <slug>__all) feeds results/<scale>/claims.md and results/<scale>/claims.csv.


rule summary__claims:
    input:
        claims=[res(slug, "claims.json") for slug in SELECTED],
        studies=[getattr(rules, f"{slug}__all").input for slug in SELECTED],
    output:
        md=f"{SCALE_DIR}/claims.md",
        csv=f"{SCALE_DIR}/claims.csv",
    log:
        f"{SCALE_DIR}/logs/summary.log",
    benchmark:
        f"{SCALE_DIR}/benchmarks/summary.tsv"
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "python -m icml25.core.cli summary --in {input.claims} --md {output.md} --csv {output.csv} --results "
        + RESULTS
        + " > {log} 2>&1"
