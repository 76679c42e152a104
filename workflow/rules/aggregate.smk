rule aggregate:
    input:
        traces=[L.shard_traces(s) for s in SHARDS] + STUDY_TRACES,
        runs=[L.shard_runs(s) for s in SHARDS] + STUDY_RUNS,
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
