from fedsparse.layout import Layout
from fedsparse.pipeline import job
from fedsparse.tune.export import export_study

L = Layout.of_sweep(snakemake.config)  # noqa: F821 (snakemake is injected by Snakemake)
with job(snakemake.log[0]):  # noqa: F821
    export_study(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.study,  # noqa: F821
        results_dir=L.root,
        traces_out=snakemake.output.traces,  # noqa: F821
        runs_out=snakemake.output.runs,  # noqa: F821
    )
