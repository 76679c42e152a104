from fedsparse.pipeline import job, make_data

with job(snakemake.log[0]):  # noqa: F821 (snakemake is injected by Snakemake)
    make_data(snakemake.config, snakemake.wildcards.dataset, snakemake.output[0])  # noqa: F821
