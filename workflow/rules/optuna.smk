# method: optuna — per study: create it, run n_workers workers until it holds exactly
# n_trials finished trials, export the trials, re-run the best configuration on fresh seeds.
# (No study in a grid sweep: these rules are then never needed.)


rule optuna_study:
    output:
        f"{RESULTS}/optuna/{{study}}/study.json",
    conda:
        "../envs/fedsparse.yaml"
    log:
        f"{RESULTS}/logs/optuna/{{study}}/study.log",
    params:
        # a change of search space, metric or budget re-creates (or extends) the study
        settings=lambda w: {
            **PLAN.studies[w.study].identity(),
            "n_trials": PLAN.studies[w.study].settings.n_trials,
        },
        # RESULTS: three levels above RESULTS/optuna/<study>/<file>
        results=lambda w, output: os.path.dirname(os.path.dirname(os.path.dirname(output[0]))),
    script:
        "../scripts/optuna_study.py"


rule optuna_worker:
    input:
        data=lambda w: f"{RESULTS}/data/{PLAN.studies[w.study].dataset}",
        study=f"{RESULTS}/optuna/{{study}}/study.json",
    output:
        f"{RESULTS}/optuna/{{study}}/worker-{{worker}}.done",
    conda:
        "../envs/fedsparse.yaml"
    log:
        f"{RESULTS}/logs/optuna/{{study}}/worker-{{worker}}.log",
    params:
        data_root=lambda w, input: os.path.dirname(input.data),
        # RESULTS: three levels above RESULTS/optuna/<study>/<file>
        results=lambda w, output: os.path.dirname(os.path.dirname(os.path.dirname(output[0]))),
    threads: 1
    resources:
        runtime=lambda w, input: PLAN.worker_resources(w.study, input.data)["runtime"],
        mem_mb=lambda w, input: PLAN.worker_resources(w.study, input.data)["mem_mb"],
    script:
        "../scripts/optuna_worker.py"


rule optuna_export:
    input:
        lambda w: expand(
            f"{RESULTS}/optuna/{w.study}/worker-{{worker}}.done",
            worker=range(PLAN.studies[w.study].settings.n_workers),
        ),
    output:
        traces=f"{RESULTS}/optuna/{{study}}/trials.parquet",
        runs=f"{RESULTS}/optuna/{{study}}/trials.runs.parquet",
    conda:
        "../envs/fedsparse.yaml"
    log:
        f"{RESULTS}/logs/optuna/{{study}}/export.log",
    params:
        # RESULTS: three levels above RESULTS/optuna/<study>/<file>
        results=lambda w, output: os.path.dirname(os.path.dirname(os.path.dirname(output[0]))),
    script:
        "../scripts/optuna_export.py"


rule optuna_holdout:
    input:
        data=lambda w: f"{RESULTS}/data/{PLAN.studies[w.study].dataset}",
        trials=f"{RESULTS}/optuna/{{study}}/trials.runs.parquet",
    output:
        traces=f"{RESULTS}/optuna/{{study}}/holdout.parquet",
        runs=f"{RESULTS}/optuna/{{study}}/holdout.runs.parquet",
    conda:
        "../envs/fedsparse.yaml"
    log:
        f"{RESULTS}/logs/optuna/{{study}}/holdout.log",
    params:
        data_root=lambda w, input: os.path.dirname(input.data),
        holdout_seeds=lambda w: PLAN.studies[w.study].settings.holdout_seeds,
        # RESULTS: three levels above RESULTS/optuna/<study>/<file>
        results=lambda w, output: os.path.dirname(os.path.dirname(os.path.dirname(output[0]))),
    threads: 1
    script:
        "../scripts/optuna_holdout.py"
