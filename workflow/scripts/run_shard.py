from fedsparse.layout import Layout
from fedsparse.pipeline import job
from fedsparse.shard import run_shard

L = Layout.of_sweep(snakemake.config)  # noqa: F821 (snakemake is injected by Snakemake)
with job(snakemake.log[0], snakemake.threads):  # noqa: F821
    run_shard(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.shard,  # noqa: F821
        data_root=L.data,
        traces_out=snakemake.output.traces,  # noqa: F821
        runs_out=snakemake.output.runs,  # noqa: F821
        plan_file=L.plan_file,
        store=L.store,
    )
