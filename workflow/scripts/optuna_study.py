from fedsparse.pipeline import setup_logging
from fedsparse.tune import create_study

setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
create_study(
    snakemake.config,  # noqa: F821
    snakemake.wildcards.study,  # noqa: F821
    results_dir=snakemake.params.results,  # noqa: F821
    marker=snakemake.output[0],  # noqa: F821
)
