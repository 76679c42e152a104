# A data set's folder is named by the digest of its spec (data/<name>.<digest>, recorded in its
# meta.json): an edited spec asks for a folder the results lack, so it is built again with or
# without Snakemake's records, into a folder of its own (the old build is left whole); the
# link data/<name> then points at it (fedsparse.pipeline.steps.make_data).
rule make_data:
    output:
        directory(L.dataset_build("{dataset}", "{digest}")),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.data_log("{dataset}", "{digest}"),
    benchmark:
        L.data_benchmark("{dataset}", "{digest}")
    params:
        spec=data_spec,
    script:
        "../scripts/make_data.py"
