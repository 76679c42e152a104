from pathlib import Path

from fedsparse.pipeline import setup_logging
from fedsparse.report import build_report

setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
build_report(snakemake.params.results, Path(snakemake.output.html).parent)  # noqa: F821
