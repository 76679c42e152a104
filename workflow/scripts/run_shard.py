from fedsparse.pipeline import job
from fedsparse.shard import run_shard

with job(snakemake.log[0], snakemake.threads):
    run_shard(
        snakemake.config,
        snakemake.wildcards.shard,
        data_root=snakemake.params.data_root,
        traces_out=snakemake.output.traces,
        runs_out=snakemake.output.runs,
    )
