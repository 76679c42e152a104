from fedsparse.layout import Layout
from fedsparse.pipeline import job
from fedsparse.tune.export import run_holdout

L = Layout.of_sweep(snakemake.config)  # noqa: F821 (snakemake is injected by Snakemake)
with job(snakemake.log[0], snakemake.threads):  # noqa: F821
    run_holdout(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.study,  # noqa: F821
        data_root=L.data,
        results_dir=L.root,
        traces_out=snakemake.output.traces,  # noqa: F821
        runs_out=snakemake.output.runs,  # noqa: F821
    )
