# The runs table and traces have fixed names; the marker beside the shard files is named by the
# digest of the aggregate's inputs (common.smk: AGGREGATE_DIGEST), so a sweep edit that drops a
# shard or a study (the others unchanged) aggregates again, with or without .snakemake/.
rule aggregate:
    input:
        traces=SHARD_TRACES + STUDY_TRACES,
        runs=SHARD_RUNS + STUDY_RUNS,
    output:
        traces=directory(L.traces),
        runs=L.runs,
        marker=L.aggregate_marker(AGGREGATE_DIGEST),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.log("aggregate"),
    benchmark:
        L.benchmark("aggregate")
    script:
        "../scripts/aggregate.py"
