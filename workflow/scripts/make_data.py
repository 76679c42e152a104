from fedsparse.pipeline import make_data, setup_logging

setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
make_data(snakemake.config, snakemake.wildcards.dataset, snakemake.output[0])  # noqa: F821
