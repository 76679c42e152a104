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


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    shard=r"[A-Za-z0-9][A-Za-z0-9._-]*",
