import os

from snakemake.logging import logger
from snakemake.utils import min_version

from fedsparse.defaults import sweep_default
from fedsparse.progress import sweep_progress
from fedsparse.sweep import (
    plan_file_path,
    plan_from_file,
    plan_or_exit,
    retype_config,
    write_plan_file,
)

min_version("8.10")

# --config seeds=[0,1,2] and 1e-3 in a config file: numbers, as a user means them
retype_config(config, workflow.config_settings.config)
RESULTS = sweep_default(config, "results")
# Each shard job reads its runs from this file instead of planning the sweep again.
PLAN_FILE = plan_file_path(f"{RESULTS}/shards")
# The main process plans the sweep, checking every value (one line naming the key, exit 1,
# nothing written; the schema in ../schemas documents the shape for editors), and writes the
# plan file (onstart); a cluster job's own Snakemake reads the plan from that file instead,
# in milliseconds whatever the sweep's size.
PLAN = (workflow.remote_exec and plan_from_file(PLAN_FILE, config)) or plan_or_exit(
    config, workflow.overwrite_configfiles or workflow.configfiles
)

SHARDS = list(PLAN.shards)
# the sweep's progress line in runs (started in onstart, so only where jobs are run)
PROGRESS = sweep_progress(PLAN, config, RESULTS, logger.info)
# method optuna: one study per data set x algorithm (rules in optuna.smk); none for grids
STUDIES = list(PLAN.studies)
OPTUNA_TRACES = [
    f"{RESULTS}/optuna/{s}/{part}.parquet" for s in STUDIES for part in ("trials", "holdout")
]
OPTUNA_RUNS = [
    f"{RESULTS}/optuna/{s}/{part}.runs.parquet" for s in STUDIES for part in ("trials", "holdout")
]


onstart:
    # When jobs are about to run (not in a dry run), in the Snakemake process only (not in a
    # cluster job's own Snakemake); an unchanged plan is not rewritten, and a job that finds
    # no valid plan file plans the sweep itself (fedsparse.shard).
    if SHARDS and not workflow.remote_exec:
        write_plan_file(PLAN, config, PLAN_FILE)
        # runs done of the plan's, with a rate and the time left, every progress_every s
        PROGRESS.start_thread()


onsuccess:
    PROGRESS.stop()


onerror:
    PROGRESS.stop()


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    shard=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    study=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    worker=r"\d+",
