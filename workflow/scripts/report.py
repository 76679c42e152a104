from fedsparse.layout import Layout
from fedsparse.pipeline import job
from fedsparse.report import build_report

L = Layout.of_sweep(snakemake.config)  # noqa: F821 (snakemake is injected by Snakemake)
with job(snakemake.log[0]):  # noqa: F821
    build_report(L.root, L.report)
