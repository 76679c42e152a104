from fedsparse.pipeline import job
from fedsparse.tune import run_worker

with job(snakemake.log[0], snakemake.threads):
    run_worker(
        snakemake.config,
        snakemake.wildcards.study,
        data_root=snakemake.params.data_root,
        results_dir=snakemake.params.results,
        done=snakemake.output[0],
    )
