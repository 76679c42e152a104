from fedsparse.layout import Layout
from fedsparse.pipeline.steps import job
from fedsparse.tune.export import run_holdout

L = Layout.of_sweep(snakemake.config)
with job(snakemake.log[0], snakemake.threads):
    run_holdout(
        snakemake.config,
        snakemake.wildcards.study,
        data_root=L.data,
        results_dir=L.root,
        traces_out=snakemake.output.traces,
        runs_out=snakemake.output.runs,
    )
