import os

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version, validate

from fedsparse.errors import ConfigError
from fedsparse.sweep import plan_sweep

min_version("8.10")

validate(config, schema="../schemas/sweep.schema.yaml")

RESULTS = config.get("results", "results")
try:
    PLAN = plan_sweep(config)
except ConfigError as exc:
    raise WorkflowError(f"invalid sweep config: {exc}")

SHARDS = list(PLAN.shards)
# method optuna: one study per data set x algorithm (rules in optuna.smk); none for grids
STUDIES = list(PLAN.studies)
OPTUNA_TRACES = [
    f"{RESULTS}/optuna/{s}/{part}.parquet" for s in STUDIES for part in ("trials", "holdout")
]
OPTUNA_RUNS = [
    f"{RESULTS}/optuna/{s}/{part}.runs.parquet" for s in STUDIES for part in ("trials", "holdout")
]


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    shard=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    study=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    worker=r"\d+",
