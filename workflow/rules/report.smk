rule report:
    input:
        traces=f"{RESULTS}/traces",
        runs=f"{RESULTS}/runs.parquet",
    output:
        html=report(
            f"{RESULTS}/report/index.html",
            caption="../report/report.rst",
            category="Comparison report",
        ),
        figures=report(
            directory(f"{RESULTS}/report/figures"),
            patterns=["{name}.png"],
            caption="../report/objective.rst",
            category="Figures",
        ),
        tables=directory(f"{RESULTS}/report/tables"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        f"{RESULTS}/logs/report.log",
    benchmark:
        f"{RESULTS}/benchmarks/report.tsv"
    params:
        results=lambda w, input: os.path.dirname(input.runs),
    script:
        "../scripts/report.py"
