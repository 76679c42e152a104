from fedsparse.pipeline import job
from fedsparse.tune import run_holdout

with job(snakemake.log[0], snakemake.threads):  # noqa: F821 (snakemake is injected by Snakemake)
    run_holdout(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.study,  # noqa: F821
        data_root=snakemake.params.data_root,  # noqa: F821
        results_dir=snakemake.params.results,  # noqa: F821
        traces_out=snakemake.output.traces,  # noqa: F821
        runs_out=snakemake.output.runs,  # noqa: F821
    )
