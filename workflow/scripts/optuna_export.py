from fedsparse.layout import Layout
from fedsparse.pipeline.steps import job
from fedsparse.tune.export import export_study

L = Layout.of_sweep(snakemake.config)
with job(snakemake.log[0]):
    export_study(
        snakemake.config,
        snakemake.wildcards.study,
        results_dir=L.root,
        traces_out=snakemake.output.traces,
        runs_out=snakemake.output.runs,
    )
