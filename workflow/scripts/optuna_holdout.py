from fedsparse.pipeline import job
from fedsparse.tune import run_holdout

with job(snakemake.log[0], snakemake.threads):
    run_holdout(
        snakemake.config,
        snakemake.wildcards.study,
        data_root=snakemake.params.data_root,
        results_dir=snakemake.params.results,
        traces_out=snakemake.output.traces,
        runs_out=snakemake.output.runs,
    )
