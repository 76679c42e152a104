"""The Python side of the Snakemake workflow (the rules and scripts in the repository's
``workflow/`` folder call only these): the jobs' steps, the shard job, and what the sweep's
own Snakemake process prints and cleans up.

The modules: :mod:`.steps` (the workflow's steps as plain functions: data, aggregate, report,
logging), :mod:`.shard_runner` (one shard job: its runs, resumable run by run, into the run
store), :mod:`.progress` (the sweep's progress line, counted in runs), :mod:`.console` (the
lines of the Snakemake console a person reads) and :mod:`.snakemake_lock` (stale locks of a
killed sweep).

Light: importing the package imports none of them.
"""
