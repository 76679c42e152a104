from fedsparse.pipeline import job
from fedsparse.tune import export_study

with job(snakemake.log[0]):
    export_study(
        snakemake.config,
        snakemake.wildcards.study,
        results_dir=snakemake.params.results,
        traces_out=snakemake.output.traces,
        runs_out=snakemake.output.runs,
    )
