# A shard's files are named by its digest, of the runs they hold (Plan.shard_digest): a sweep
# edit that changes a shard's runs asks for files the folder lacks, so the shard reruns whether
# or not Snakemake's records (.snakemake/) are there, and a shard whose runs are unchanged does
# not; its job computes only the runs the store lacks (fedsparse.pipeline.shard_runner). The sweep's
# target (rule all) asks for every shard's files itself: Snakemake, finding the aggregate's
# outputs present and no record of its inputs, would take missing shard files for intermediates.
rule run_shard:
    input:
        shard_data,
    output:
        traces=L.shard_traces("{shard}", "{digest}"),
        runs=L.shard_runs("{shard}", "{digest}"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.shard_log("{shard}", "{digest}"),
    benchmark:
        L.shard_benchmark("{shard}", "{digest}")  # wall time and peak memory of the job
    threads: 1
    # costliest shards first: a short tail instead of one long shard running alone at the end
    priority: lambda w: PLAN.shard_priority(w.shard)
    resources:
        # cluster time limit and memory from the shard's runs and its data set's size (in a
        # cluster job's own Snakemake, from the plan file: without importing the algorithms);
        # the time limit scaled by what the sweep's finished runs measured against their
        # estimates, and times the attempt: a shard killed at its limit is retried
        # (profiles/slurm retries) with a longer one, computing only the runs the store lacks
        # (fedsparse.sweep.cost_learning)
        runtime=lambda w, input, attempt: SHARD_RUNTIMES(w.shard, input[0], attempt),
        mem_mb=lambda w, input: PLAN.shard_resources(w.shard, input[0])["mem_mb"],
    script:
        "../scripts/run_shard.py"
