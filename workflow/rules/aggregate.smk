# The runs table and traces have fixed names. The aggregate also reads the names of its inputs
# in the plan (common.smk: AGGREGATE_INPUTS), a file rewritten whenever they change: a sweep
# edit that adds, drops or changes a shard or a study makes it newer than the runs table, so
# Snakemake aggregates again, with or without .snakemake/, whatever target it is given.
rule aggregate:
    input:
        traces=SHARD_TRACES + STUDY_TRACES,
        runs=SHARD_RUNS + STUDY_RUNS,
        inputs=aggregate_record,
    output:
        traces=directory(L.traces),
        runs=L.runs,
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.log("aggregate"),
    benchmark:
        L.benchmark("aggregate")
    script:
        "../scripts/aggregate.py"
