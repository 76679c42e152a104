# method: optuna — per study: create it, run n_workers workers until it holds exactly
# n_trials finished trials, export the trials, re-run the best configuration on fresh seeds.
# (No study in a grid sweep: these rules are then never needed.)


# A study's marker is named by its digest (space, sampler, metric, runs, pruner, budget,
# held-out seeds): an edit asks for a marker the folder lacks, with or without .snakemake/, so
# the study is checked again (an edited space or sampler stops with one line naming the
# study; a larger budget extends it) and its workers, export and holdout run again.
rule optuna_study:
    output:
        L.study_marker("{study}", "{digest}"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.study_log("{study}", "study.{digest}"),
    params:
        settings=study_settings,
    script:
        "../scripts/optuna_study.py"


rule optuna_worker:
    input:
        data=lambda w: data_build(PLAN.studies[w.study].dataset),
        study=lambda w: L.study_marker(w.study, PLAN.studies[w.study].digest),
    output:
        L.worker_done("{study}", "{worker}"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.study_log("{study}", "worker-{worker}"),
    threads: 1
    resources:
        runtime=lambda w, input: PLAN.worker_resources(w.study, input.data)["runtime"],
        mem_mb=lambda w, input: PLAN.worker_resources(w.study, input.data)["mem_mb"],
    script:
        "../scripts/optuna_worker.py"


rule optuna_export:
    input:
        lambda w: [
            L.worker_done(w.study, worker)
            for worker in range(PLAN.studies[w.study].settings.n_workers)
        ],
    output:
        traces=L.study_traces("{study}", "trials"),
        runs=L.study_runs("{study}", "trials"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.study_log("{study}", "export"),
    script:
        "../scripts/optuna_export.py"


rule optuna_holdout:
    input:
        data=lambda w: data_build(PLAN.studies[w.study].dataset),
        trials=L.study_runs("{study}", "trials"),
    output:
        traces=L.study_traces("{study}", "holdout"),
        runs=L.study_runs("{study}", "holdout"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.study_log("{study}", "holdout"),
    params:
        holdout_seeds=lambda w: PLAN.studies[w.study].settings.holdout_seeds,
    threads: 1
    script:
        "../scripts/optuna_holdout.py"
