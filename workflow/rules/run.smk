rule run_shard:
    input:
        lambda w: L.dataset(PLAN.shard_dataset(w.shard)),
    output:
        traces=L.shard_traces("{shard}"),
        runs=L.shard_runs("{shard}"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.shard_log("{shard}"),
    benchmark:
        L.shard_benchmark("{shard}")  # wall time and peak memory of the job
    params:
        # the shard's run ids: when a sweep edit changes them, the shard reruns
        run_ids=lambda w: [r.run_id for r in PLAN.shards[w.shard]],
    threads: 1
    # costliest shards first: a short tail instead of one long shard running alone at the end
    priority: lambda w: PLAN.shard_priority(w.shard)
    resources:
        # cluster time limit and memory from the shard's runs and its data set's size (in a
        # cluster job's own Snakemake, from the plan file: without importing the algorithms)
        runtime=lambda w, input: PLAN.shard_resources(w.shard, input[0])["runtime"],
        mem_mb=lambda w, input: PLAN.shard_resources(w.shard, input[0])["mem_mb"],
    script:
        "../scripts/run_shard.py"
