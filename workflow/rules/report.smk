rule report:
    input:
        traces=L.traces,
        runs=L.runs,
    output:
        html=report(
            L.report_html,
            caption="../report/report.rst",
            category="Comparison report",
        ),
        figures=report(
            directory(L.report_figures),
            patterns=["{name}.png"],
            caption="../report/objective.rst",
            category="Figures",
        ),
        tables=directory(L.report_tables),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.log("report"),
    benchmark:
        L.benchmark("report")
    script:
        "../scripts/report.py"
