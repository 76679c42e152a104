"""One run: a run config normalised and hashed into its run id, and the run (or a cohort of
runs sharing their passes over the data) computed to a trace. ``fedsparse.run`` is
:func:`fedsparse.training.experiment.run`.

The modules: :mod:`.config` (a run config read, validated, filled with defaults and hashed),
:mod:`.experiment` (data + model + algorithm + hyperparameters + seed to a trace) and
:mod:`.cohorts` (which runs may be fused, and how many).

Light: importing the package imports none of them (the planner reads :mod:`.config` and
:mod:`.cohorts` without the kernels; :mod:`.experiment` loads them).
"""
