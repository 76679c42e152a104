from pathlib import Path

from fedsparse.pipeline import job
from fedsparse.report import build_report

with job(snakemake.log[0]):
    build_report(snakemake.params.results, Path(snakemake.output.html).parent)
