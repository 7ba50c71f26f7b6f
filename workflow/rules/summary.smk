# The cross-study claims table and its MLflow record. Every selected study's claims.json (and its figures,
# through <slug>__all) feeds results/<scale>/claims.md, claims.csv and claims.html; the HTML table opens the
# Snakemake report (`snakemake --report`): it is the report's front page (workflow/report/workflow.rst) and the
# "Claims" result.


report: "../report/workflow.rst"


rule summary__claims:
    input:
        claims=[res(slug, "claims.json") for slug in SELECTED],
        studies=[getattr(rules, f"{slug}__all").input for slug in SELECTED],
    output:
        md=f"{SCALE_DIR}/claims.md",
        csv=f"{SCALE_DIR}/claims.csv",
        html=report(
            f"{SCALE_DIR}/claims.html",
            caption="../report/summary/claims.rst",
            category="Claims",
            labels={"table": "claims and checks"},
        ),
        figure=report(
            f"{SCALE_DIR}/claims_overview.png",
            caption="../report/summary/overview.rst",
            category="Claims",
            labels={"figure": "studies x claims"},
        ),
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
        f"python -m icml25.core.cli summary --in {{input.claims}} --md {{output.md}} --csv {{output.csv}}"
        f" --html {{output.html}} --figure {{output.figure}} --results {RESULTS} > {{log}} 2>&1"
