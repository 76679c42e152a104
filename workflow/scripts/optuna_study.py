from fedsparse.pipeline import job
from fedsparse.tune import create_study

with job(snakemake.log[0]):
    create_study(
        snakemake.config,
        snakemake.wildcards.study,
        results_dir=snakemake.params.results,
        marker=snakemake.output[0],
    )
