import sys

from snakemake.logging import logger
from snakemake.utils import min_version

from fedsparse.errors import FedsparseError
from fedsparse.layout import Layout
from fedsparse.pipeline.console import SweepConsole
from fedsparse.pipeline.progress import sweep_progress
from fedsparse.pipeline.snakemake_lock import resume_after_kill
from fedsparse.sweep import plan_or_exit, retype_config
from fedsparse.sweep.cost_learning import ShardRuntimes
from fedsparse.sweep.plan_file import plan_from_file, write_plan_file
from fedsparse.sweep.sharding import input_names, record_inputs

min_version("8.10")

# --config seeds=[0,1,2] and 1e-3 in a config file: numbers, as a user means them
retype_config(config, workflow.config_settings.config)
# Every path in the results folder (--config results=DIR; default results/<sweep>) comes from L. The
# scripts find the same folders from the config (Layout.of_sweep): as params, Snakemake would
# record them, and a results folder of an earlier version would rerun every finished job.
L = Layout.of_sweep(config)
# The main process plans the sweep, checking every value (one line naming the key, exit 1,
# nothing written; the schema in ../schemas documents the shape for editors), and writes the
# plan file (onstart; each shard job reads its runs from it instead of planning the sweep
# again); a cluster job's own Snakemake reads the plan from that file instead,
# in milliseconds whatever the sweep's size.
PLAN = (workflow.remote_exec and plan_from_file(L.plan_file, config)) or plan_or_exit(
    config, workflow.overwrite_configfiles or workflow.configfiles
)
# A sweep killed with kill -9 resumes with a plain `snakemake`: in the main process (exec mode
# default, not a job's own Snakemake), before Snakemake locks the folder (.snakemake/ of the
# working folder), remove a lock a killed run left behind, never one a live Snakemake may hold,
# and record this process as the lock's owner (fedsparse.pipeline.snakemake_lock).
if workflow.exec_mode.name.upper() == "DEFAULT":
    resume_after_kill(".snakemake", L.root, logger.warning)

SHARDS = list(PLAN.shards)
# the shard jobs' time limits, learning from the sweep's finished runs in the process that
# submits them (a cluster job's own Snakemake has its limit already)
try:
    SHARD_RUNTIMES = ShardRuntimes(PLAN, L, learn=not workflow.remote_exec)
except FedsparseError as exc:
    sys.exit(f"fedsparse: {exc}")
# the console a person reads: the sweep's own lines, errors and failed jobs' log tails
CONSOLE = SweepConsole(PLAN.name, L, logger)
# every shard's output files, named by the digest of their runs (run.smk); read from the plan
# file's metadata in a cluster job's own Snakemake
SHARD_TRACES = [L.shard_traces(s, PLAN.shard_digest(s)) for s in SHARDS]
SHARD_RUNS = [L.shard_runs(s, PLAN.shard_digest(s)) for s in SHARDS]
# the sweep's progress line in runs (started in onstart, so only where jobs are run)
PROGRESS = sweep_progress(PLAN, config, L.root, CONSOLE.say)
# method optuna: one study per data set x algorithm (rules in tune.smk); none for grids
STUDIES = list(PLAN.studies)
STUDY_TRACES = [L.study_traces(s, part) for s in STUDIES for part in ("trials", "holdout")]
STUDY_RUNS = [L.study_runs(s, part) for s in STUDIES for part in ("trials", "holdout")]
STUDY_MARKERS = [L.study_marker(s, PLAN.studies[s].digest) for s in STUDIES]
# what the runs table holds: its inputs by their names in the results folder (shard files carry
# their digests), recorded where the aggregate reads it when they changed: here in an existing
# results folder, by the process that plans (a cluster job's own Snakemake has the same plan);
# in a new one (a dry run or --lint writes nothing) when the aggregate's inputs are asked for
# (aggregate_record)
AGGREGATE_INPUTS = input_names(L.root, SHARD_TRACES + SHARD_RUNS + STUDY_TRACES + STUDY_RUNS)
if not workflow.remote_exec and L.root.is_dir():
    record_inputs(L.aggregate_inputs, AGGREGATE_INPUTS)


onstart:
    # When jobs are about to run (not in a dry run), in the Snakemake process only (not in a
    # cluster job's own Snakemake); an unchanged plan is not rewritten, and a job that finds
    # no valid plan file plans the sweep itself (fedsparse.pipeline.shard_runner).
    if not workflow.remote_exec:
        CONSOLE.start(PROGRESS, log)
    if SHARDS and not workflow.remote_exec:
        write_plan_file(PLAN, config, L.plan_file)
        # runs done of the plan's, with a rate and the time left, every progress_every s
        PROGRESS.start_thread()


onsuccess:
    # the last lines: where the report is, how many runs diverged
    CONSOLE.finished(PROGRESS)


onerror:
    CONSOLE.stopped(PROGRESS)


def aggregate_record(wildcards):
    """The record of the aggregate's inputs (AGGREGATE_INPUTS), always one of them: one that
    appeared on a later run would change the input set Snakemake records, and rerun the
    aggregate of a finished sweep. A new results folder has none: it is written here, when the
    Snakemake process that is about to run jobs builds the DAG; a dry run, a summary or a
    cluster job's own Snakemake writes nothing (and, no rule making it, does not ask for it).

    Not a rule's output: such a job ran only in a process that planned before the folder
    existed. Of two Snakemake processes on one results folder, one then ran a job the other
    did not (a run directive's job is a whole Snakemake start, ~15 s), so they drifted apart, and
    the one behind reran jobs the other had finished: Snakemake deletes a job's outputs before
    it runs it, and the other's aggregate found a shard's file gone."""
    path = L.aggregate_inputs
    if path.is_file():
        return path
    if workflow.executor_plugin is None or workflow.dryrun or workflow.remote_exec:
        return []
    record_inputs(path, AGGREGATE_INPUTS)
    return path


def shard_data(wildcards):
    """The data set of a shard, by the digest of its spec; files of another digest than the
    plan's are refused (asked for by name: they would be named for runs they do not hold)."""
    digest = PLAN.shard_digest(wildcards.shard)
    if wildcards.digest != digest:
        raise ValueError(
            f"shard {wildcards.shard}: its runs in this plan have digest {digest}, "
            f"not {wildcards.digest}"
        )
    return data_build(PLAN.shard_dataset(wildcards.shard))


def data_build(dataset):
    """A data set's folder, named by the digest of its spec (fedsparse.data.identity): an
    edited spec is a missing input, whether or not .snakemake/ records the old one."""
    return L.dataset_build(dataset, PLAN.data_digest(dataset))


def data_spec(wildcards):
    """The plan's entry of the data set a make_data job builds; a folder of another digest
    than the plan's is refused (it would be named for a spec it does not hold)."""
    digest = PLAN.data_digest(wildcards.dataset)
    if wildcards.digest != digest:
        raise ValueError(
            f"data set {wildcards.dataset}: its spec in this plan has digest {digest}, "
            f"not {wildcards.digest}"
        )
    # its per-data-set grid is no part of the data (a params change would rebuild it)
    return {k: v for k, v in PLAN.datasets[wildcards.dataset].items() if k != "grid"}


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    shard=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    digest=r"[0-9a-f]{12}",  # layout.SHARD_DIGEST_CHARS
    study=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    worker=r"\d+",


def study_settings(wildcards):
    """What a study's marker is named for; a marker of another digest than the plan's is
    refused (it would be named for settings the study does not have)."""
    spec = PLAN.studies[wildcards.study]
    if wildcards.digest != spec.digest:
        raise ValueError(
            f"study {wildcards.study}: its settings in this plan have digest {spec.digest}, "
            f"not {wildcards.digest}"
        )
    return {**spec.identity(), "n_trials": spec.settings.n_trials}
