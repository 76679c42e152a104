# method: optuna — per study: create it, run n_workers workers until it holds exactly
# n_trials finished trials, export the trials, re-run the best configuration on fresh seeds.
# (No study in a grid sweep: these rules are then never needed.)


rule optuna_study:
    output:
        L.study_marker("{study}"),
    conda:
        "../envs/fedsparse.yaml"
    log:
        L.study_log("{study}", "study"),
    params:
        # a change of search space, metric or budget re-creates (or extends) the study
        settings=lambda w: {
            **PLAN.studies[w.study].identity(),
            "n_trials": PLAN.studies[w.study].settings.n_trials,
        },
    script:
        "../scripts/optuna_study.py"


rule optuna_worker:
    input:
        data=lambda w: L.dataset(PLAN.studies[w.study].dataset),
        study=L.study_marker("{study}"),
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
        data=lambda w: L.dataset(PLAN.studies[w.study].dataset),
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
