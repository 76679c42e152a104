from fedsparse.layout import Layout
from fedsparse.pipeline.steps import job
from fedsparse.tune.worker import run_worker

L = Layout.of_sweep(snakemake.config)
with job(snakemake.log[0], snakemake.threads):
    run_worker(
        snakemake.config,
        snakemake.wildcards.study,
        data_root=L.data,
        results_dir=L.root,
        done=snakemake.output[0],
    )
