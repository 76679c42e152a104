rule aggregate:
    input:
        traces=SHARD_TRACES + STUDY_TRACES,
        runs=SHARD_RUNS + STUDY_RUNS,
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
