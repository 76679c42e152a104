from fedsparse.layout import Layout
from fedsparse.pipeline.steps import job
from fedsparse.tune.storage import create_study

L = Layout.of_sweep(snakemake.config)
with job(snakemake.log[0]):
    create_study(
        snakemake.config,
        snakemake.wildcards.study,
        results_dir=L.root,
        marker=snakemake.output[0],
    )
