rule make_data:
    output:
        directory(f"{RESULTS}/data/{{dataset}}"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        f"{RESULTS}/logs/data/{{dataset}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/data/{{dataset}}.tsv"
    params:
        spec=lambda w: PLAN.datasets[w.dataset],
    script:
        "../scripts/make_data.py"
