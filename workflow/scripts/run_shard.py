from fedsparse.layout import Layout
from fedsparse.pipeline.shard_runner import run_shard
from fedsparse.pipeline.steps import job

L = Layout.of_sweep(snakemake.config)
with job(snakemake.log[0], snakemake.threads):
    run_shard(
        snakemake.config,
        snakemake.wildcards.shard,
        data_root=L.data,
        traces_out=snakemake.output.traces,
        runs_out=snakemake.output.runs,
        plan_file=L.plan_file,
        store=L.store,
    )
