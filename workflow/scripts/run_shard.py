from fedsparse.pipeline import job
from fedsparse.shard import run_shard

with job(snakemake.log[0], snakemake.threads):  # noqa: F821 (snakemake is injected by Snakemake)
    run_shard(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.shard,  # noqa: F821
        data_root=snakemake.params.data_root,  # noqa: F821
        traces_out=snakemake.output.traces,  # noqa: F821
        runs_out=snakemake.output.runs,  # noqa: F821
    )
