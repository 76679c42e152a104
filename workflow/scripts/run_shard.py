from fedsparse.pipeline import set_threads, setup_logging
from fedsparse.shard import run_shard

setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
set_threads(snakemake.threads)  # noqa: F821
run_shard(
    snakemake.config,  # noqa: F821
    snakemake.wildcards.shard,  # noqa: F821
    data_root=snakemake.params.data_root,  # noqa: F821
    traces_out=snakemake.output.traces,  # noqa: F821
    runs_out=snakemake.output.runs,  # noqa: F821
)
