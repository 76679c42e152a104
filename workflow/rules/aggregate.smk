rule aggregate:
    input:
        traces=expand(f"{RESULTS}/shards/{{shard}}.parquet", shard=SHARDS) + OPTUNA_TRACES,
        runs=expand(f"{RESULTS}/shards/{{shard}}.runs.parquet", shard=SHARDS) + OPTUNA_RUNS,
    output:
        traces=directory(f"{RESULTS}/traces"),
        runs=f"{RESULTS}/runs.parquet",
    conda:
        "../envs/fedsparse.yaml"
    log:
        f"{RESULTS}/logs/aggregate.log",
    benchmark:
        f"{RESULTS}/benchmarks/aggregate.tsv"
    script:
        "../scripts/aggregate.py"
