from fedsparse.pipeline import job
from fedsparse.tune import export_study

with job(snakemake.log[0]):  # noqa: F821 (snakemake is injected by Snakemake)
    export_study(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.study,  # noqa: F821
        results_dir=snakemake.params.results,  # noqa: F821
        traces_out=snakemake.output.traces,  # noqa: F821
        runs_out=snakemake.output.runs,  # noqa: F821
    )
