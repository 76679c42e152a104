from fedsparse.pipeline import set_threads, setup_logging
from fedsparse.tune import run_worker

setup_logging(snakemake.log[0])  # noqa: F821 (injected by Snakemake)
set_threads(snakemake.threads)  # noqa: F821
run_worker(
    snakemake.config,  # noqa: F821
    snakemake.wildcards.study,  # noqa: F821
    data_root=snakemake.params.data_root,  # noqa: F821
    results_dir=snakemake.params.results,  # noqa: F821
    done=snakemake.output[0],  # noqa: F821
)
