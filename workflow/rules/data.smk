rule make_data:
    output:
        directory(L.dataset("{dataset}")),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.data_log("{dataset}"),
    benchmark:
        L.data_benchmark("{dataset}")
    params:
        spec=lambda w: PLAN.datasets[w.dataset],
    script:
        "../scripts/make_data.py"
