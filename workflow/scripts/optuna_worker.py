from fedsparse.layout import Layout
from fedsparse.pipeline import job
from fedsparse.tune.worker import run_worker

L = Layout.of_sweep(snakemake.config)  # noqa: F821 (snakemake is injected by Snakemake)
with job(snakemake.log[0], snakemake.threads):  # noqa: F821
    run_worker(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.study,  # noqa: F821
        data_root=L.data,
        results_dir=L.root,
        done=snakemake.output[0],  # noqa: F821
    )
