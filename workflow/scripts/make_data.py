from fedsparse.pipeline.steps import job, make_data

with job(snakemake.log[0]):
    make_data(
        snakemake.config,
        snakemake.wildcards.dataset,
        snakemake.output[0],
        spec=snakemake.params.spec,  # the plan's entry: no planning here
    )
