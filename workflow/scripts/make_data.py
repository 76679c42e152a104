from fedsparse.pipeline import job, make_data

with job(snakemake.log[0]):  # noqa: F821 (snakemake is injected by Snakemake)
    make_data(
        snakemake.config,  # noqa: F821
        snakemake.wildcards.dataset,  # noqa: F821
        snakemake.output[0],  # noqa: F821
        spec=snakemake.params.spec,  # noqa: F821 (the plan's entry: no planning here)
    )
