"""The objective the algorithms minimise: a model, its loss on federated data, and how a
round steps and scores it. Below the algorithms: their contract calls a :class:`Problem`.

The modules: :mod:`.model` (what a parameter vector means: its kind, layout and starting
point), :mod:`.problem` (a model and loss bound to federated data: the kernels' model bundle,
work spaces, local steps and minibatch gradients) and :mod:`.evaluation` (the objective and
the metrics of models, which the problem holds).

Light: importing the package imports none of them (they load the kernels).
"""
