"""icml25: reproductions of ICML 2025 papers as Snakemake studies."""
