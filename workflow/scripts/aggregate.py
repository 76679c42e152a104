from fedsparse.layout import Layout
from fedsparse.pipeline.steps import aggregate_shards, job
from fedsparse.sweep.sharding import input_names, record_inputs

L = Layout.of_sweep(snakemake.config)
with job(snakemake.log[0]):
    # the inputs recorded first: the runs table, written after, is newer than the record
    inputs = [*snakemake.input.traces, *snakemake.input.runs]
    record_inputs(L.aggregate_inputs, input_names(L.root, inputs))
    aggregate_shards(
        snakemake.input.traces,
        snakemake.input.runs,
        traces_dir=snakemake.output.traces,
        runs_path=snakemake.output.runs,
    )
