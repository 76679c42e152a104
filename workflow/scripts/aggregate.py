from fedsparse.aggregate import aggregate
from fedsparse.pipeline import job

with job(snakemake.log[0]):  # noqa: F821 (snakemake is injected by Snakemake)
    aggregate(
        snakemake.input.traces,  # noqa: F821
        snakemake.input.runs,  # noqa: F821
        traces_dir=snakemake.output.traces,  # noqa: F821
        runs_path=snakemake.output.runs,  # noqa: F821
    )
