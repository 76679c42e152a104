from fedsparse.pipeline import job
from fedsparse.tune import create_study

with job(snakemake.log[0]):  # noqa: F821 (snakemake is injected by Snakemake)
    create_study(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.study,  # noqa: F821
        results_dir=snakemake.params.results,  # noqa: F821
        marker=snakemake.output[0],  # noqa: F821
    )
