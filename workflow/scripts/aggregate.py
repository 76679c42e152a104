from fedsparse.aggregate import aggregate
from fedsparse.pipeline import job

with job(snakemake.log[0]):
    aggregate(
        snakemake.input.traces,
        snakemake.input.runs,
        traces_dir=snakemake.output.traces,
        runs_path=snakemake.output.runs,
    )
