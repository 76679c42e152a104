# fedsparse: sweeps of federated sparse learning algorithms.
#   snakemake --cores all                          # the default sweep (config/config.yaml)
#   snakemake --cores all --configfile config/quick.yaml
# Results go to results/<sweep>/, by the config's sweep name (override with --config results=DIR).

# The default sweep, unless --configfile names another: Snakemake would otherwise
# merge the two files and mix their data sets.
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


# On a cluster (profiles/slurm) these run in the Snakemake process itself: each is
# seconds of work, not worth a job and its queueing.
localrules:
    all,
    aggregate,
    report,
    optuna_study,
    optuna_export,


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        L.runs,
        L.report_html,
        # every shard's files, named by the digest of their runs: one missing reruns its shard,
        # then the aggregate and the report, with or without .snakemake/ (workflow/rules/run.smk)
        SHARD_TRACES,
        SHARD_RUNS,
        # every study's marker, named by the digest of its settings (workflow/rules/tune.smk),
        # for the same reason: an edited study's workers, export and holdout run again
        STUDY_MARKERS,
    default_target: True
