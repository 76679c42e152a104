from fedsparse.layout import Layout
from fedsparse.pipeline.steps import job
from fedsparse.report import build_report

L = Layout.of_sweep(snakemake.config)
with job(snakemake.log[0]):
    build_report(L.root, L.report)
