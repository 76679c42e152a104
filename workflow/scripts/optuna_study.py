from fedsparse.layout import Layout
from fedsparse.pipeline import job
from fedsparse.tune.storage import create_study

L = Layout.of_sweep(snakemake.config)  # noqa: F821 (snakemake is injected by Snakemake)
with job(snakemake.log[0]):  # noqa: F821
    create_study(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.study,  # noqa: F821
        results_dir=L.root,
        marker=snakemake.output[0],  # noqa: F821
    )
