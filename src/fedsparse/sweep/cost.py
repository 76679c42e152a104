"""What a run costs, from the work it does: core-seconds, memory and disk.

A run's seconds are its rounds' work plus its evaluations', charged against a machine's
rates (:class:`fedsparse.sweep.machine.Rates`):

- **local steps** of the clients that compute in a round (the algorithm's
  :class:`RunWork`: steps a client takes, clients that take them). A linear model's step
  reads its minibatch rows (value and index for sparse rows) and does a multiply-add per
  stored value and class twice (margin and gradient): the slower of the read and the
  arithmetic. A network's step is, layer by layer, three matrix products (forward, the
  weights' gradient, the input's gradient; two for the first layer) of the minibatch (times
  a convolution's output positions) against the layer's weights, each the slower of its
  FLOPs at the matrix-product rate and its bytes (weights, activations) at the memory
  bandwidth, so that small batches are charged what streaming the weights costs; and two
  passes over the parameters at the memory bandwidth (the gradient written, then applied);
- **passes over the model** a client makes in a round beyond its gradients (H_τ, residuals,
  prox terms: the algorithm's ``passes``), and the server's average of the clients' models,
  at the memory bandwidth;
- **per-parameter work** that is neither: a client's top-k selections over the model
  (``selections``, integer work on every parameter) and passes that take a tanh of every
  parameter (``tanh_passes``, a smooth-l1 prox term);
- **evaluations** (``rounds / eval_every + 1`` of them): a forward pass over the training
  and test rows, ``evaluations`` times for algorithms that also score personal models. A
  linear model's exact evaluation reads the columns of the model's support only (τ for
  hard thresholding), a sparse one reads every stored value;
- a run's fixed cost (trace assembly, Parquet write, summary), and a job's start-up.

A run of a cohort (:mod:`fedsparse.training.cohorts`) adds :data:`COHORT_MEMBER_SHARE` of its cost
alone, a network's evaluations in full; a time sibling only its trace. Memory is a job's base,
its data in memory (image rows as float64), and the largest computation's state (parameter
vectors per client, times its cohort's members); disk is the data folders and the traces.

Estimates are core-seconds: the network kernels step clients in parallel on a job's cores, so
a job's wall time is shorter where it has cores of its own. The plan packs shards and orders
jobs at :data:`fedsparse.sweep.machine.NOMINAL` rates (a plan is the same on every host); what a
sweep costs here, its time limits and its progress use the host's measured rates, and the
time limits also the sweep's own finished runs (:mod:`fedsparse.sweep.cost_learning`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..data.kinds import facts, kind_of
from ..defaults import sweep_default
from ..results.numerics import model_path
from ..work import RunWork, models_scored_together
from .machine import NOMINAL, Rates

RUN_OVERHEAD_S = 0.05  # trace assembly, Parquet write, summary
# What a member of a cohort's rounds (and a linear model's evaluations) add to the cohort's
# time, as a share of the same alone: its rows come from cache rather than memory
# (docs/performance.md, cohorts). A network's evaluations cost what they cost alone.
COHORT_MEMBER_SHARE = 0.6
# Efficiency of the kernels against the machine's rates (fitted on benchmarks/cost_model.py's
# cases, docs/performance.md): a linear step's arithmetic is vector multiply-adds, not matrix
# products; a network's products reach about half the matrix-product peak (small, thin
# layers, activations and their derivatives between products).
LINEAR_FLOP_EFFICIENCY = 0.2
NETWORK_EFFICIENCY = 0.8  # dense layers' products in a local step
EVAL_EFFICIENCY = 0.7  # an evaluation's products over blocks of 256 rows, activations between
CONV_EFFICIENCY = 0.45  # a convolution's products (im2col, narrow channels)
# A linear model on dense data is scored with up to 15 others (work.models_scored_together):
# the columns they use (a model of tau non-zeros a class: their supports' union, about twice
# one support) are read once for all of them, then their margins, in tiles of models from
# cache, run at about half the DGEMM rate: the read and the products add up (fitted in
# docs/performance.md, the cost model).
SUPPORT_UNION = 2.0
MARGIN_EFFICIENCY = 0.45
# Minibatch rows are picked at random: each starts a new stream from memory, which one core
# reads at about half its streaming rate
GATHER_SHARE = 0.5
SAMPLE_LOSS_S = 8e-9  # a loss (exp, log1p) per sample and output of an evaluation, summed
NETWORK_STEP_S = 2e-6  # a network step's fixed cost per layer (kernel calls, buffers)
PROBE_CALL_S = 2e-5  # a one-row gradient called from Python (an online controller's probe)
OFFER_S = 5e-8  # an offered element: selected, sent, scattered into the aggregate, chosen
# Per-parameter work that is neither a product nor a stream from memory, and a network step's
# own passes; fitted on benchmarks/cost_model.py --split (docs/performance.md, the cost model):
# a top-k selection over the model is integer work on every parameter (its magnitude binned,
# then compared with the k-th's bin), about 2.2 ns a parameter where the bandwidth would
# charge 0.5; a smooth-l1 prox step takes a tanh of every parameter, about 10 ns each.
SELECT_S = 2.5e-9  # a parameter's share of a client's top-k selection
# A weight read or moved at a scattered coordinate of the model: a step on sparse data reads
# each stored value's weight for the score, writes its gradient and moves the weight; with
# ridge or a selection, a client on its active coordinates (work.RunWork.active_set) moves
# each of them every step (fitted on benchmarks/cost_model.py's sparse case).
SCATTERED_S = 6.5e-9
TANH_S = 1.0e-8  # a parameter's tanh (sFedHP's smooth-l1 term, every proximal step)
# a network step writes its gradient, a model-sized vector, and applies it (to the model, the
# residual or the proximal step): two passes over the parameters at the memory bandwidth
NETWORK_STEP_PASSES = 2.0
RUNTIME_SAFETY = 3.0  # time limits: estimate x this, so a model within 2x fits on a first try
MIN_RUNTIME_MIN = 10
BASE_MEM_MB = 1024  # Python, numba, pyarrow and per-run buffers
MEM_SAFETY = 1.25
TRACE_ROW_BYTES = 120  # a trace row, compressed, in the run store and in traces/ (twice)
# A sparse registry set not yet downloaded: its stored values are unknown; estimated at this
# many a row (the estimate says so)
ASSUMED_NNZ_PER_ROW = 100


@dataclass(frozen=True)
class DataShape:
    """What the estimates need to know about a data set."""

    rows: int
    cols: int
    nnz: int  # stored values of the training matrix (rows * cols when dense)
    sparse: bool
    clients: int
    n_classes: int
    disk_bytes: int  # all arrays of the data folder (rows, columns copy, test split)
    test_rows: int = 0
    assumed: str = ""  # what the shape guesses (empty: known from the data or its spec)

    @property
    def row_bytes(self) -> float:
        """Bytes a kernel reads per training row (value + index for CSR)."""
        if self.sparse:
            return self.nnz / max(self.rows, 1) * 12
        return self.cols * 8.0

    @property
    def row_values(self) -> float:
        """Stored values per training row."""
        return self.nnz / max(self.rows, 1)


def data_shape(data_dir: str | Path) -> DataShape:
    """Read a prepared data folder's shape without loading its arrays."""
    data_dir = Path(data_dir)
    meta = json.loads((data_dir / "meta.json").read_text())
    rows, cols = meta["shape"]
    if meta["sparse"]:
        nnz = int(np.load(data_dir / "X_data.npy", mmap_mode="r").shape[0])
    else:
        nnz = rows * cols
    clients = int(np.load(data_dir / "client_ptr.npy", mmap_mode="r").shape[0]) - 1
    disk = sum(f.stat().st_size for f in data_dir.glob("*.npy"))
    test = data_dir / "y_test.npy"
    test_rows = int(np.load(test, mmap_mode="r").shape[0]) if test.is_file() else 0
    return DataShape(rows, cols, nnz, meta["sparse"], clients, meta["n_classes"], disk, test_rows)


def synthetic_shape(data: dict[str, Any]) -> DataShape:
    """The shape of a normalised ``kind: synthetic`` data spec (before it is generated)."""
    rows = data["clients"] * data["samples_per_client"]
    cols = data["dim"]
    # X, its column-major copy and y
    return DataShape(rows, cols, rows * cols, False, data["clients"], 0, 2 * rows * cols * 8)


def spec_shape(data: dict[str, Any], partition: Any = "natural") -> DataShape | None:
    """A data set's shape from its spec alone, before it is built: synthetic data from its
    generator's parameters, registry sets from the registry (rows, features, classes) and
    the partition (clients); None where only the built data can tell."""
    kind = kind_of(data)
    if kind.generated:
        return synthetic_shape(data)
    known = facts(data, partition)
    if known is None or not data.get("source"):
        return None
    held = kind.registry_rows(data)
    if held is None:
        return None
    rows, test_rows = _partitioned_rows(held.train, held.test, known.n_classes, partition)
    if held.values_per_row is None:  # dense rows
        cols = known.n_features
        # uint8 images on disk, float64 in a job; the column copy is a linear model's
        disk = (rows + test_rows) * cols * 9
        return DataShape(
            rows, cols, rows * cols, False, known.n_clients, known.n_classes, disk, test_rows
        )
    per_row = min(held.values_per_row or ASSUMED_NNZ_PER_ROW, known.n_features)
    nnz = round(rows * per_row)
    note = (
        ""
        if held.values_per_row
        else f"stored values assumed {ASSUMED_NNZ_PER_ROW} a row until {data['source']} is built"
    )
    return DataShape(
        rows,
        known.n_features,
        nnz,
        True,
        known.n_clients,
        known.n_classes,
        2 * nnz * 12,
        test_rows,
        assumed=note,
    )


def _partitioned_rows(rows: int, test_rows: int, classes: int, partition: Any) -> tuple[int, int]:
    """Training and test rows after a partition that draws its own (label_cycle: so many
    images a label, in total or a client's) or moves a fraction of the rows to the test split."""
    if not isinstance(partition, dict):
        return rows, test_rows
    if partition.get("kind") == "label_cycle":
        if partition.get("scope") == "total":
            labels = classes
        else:
            labels = partition["clients"] * partition["labels_per_client"]
        return labels * partition["train_per_label"], labels * partition["test_per_label"]
    fraction = partition.get("test_fraction") or 0.0
    moved = round(rows * fraction)
    return rows - moved, test_rows + moved


def known_shape(
    data_spec: dict[str, Any], data_dir: str | Path | None, partition: Any = "natural"
) -> DataShape | None:
    """The shape of a prepared data folder, else of the spec (:func:`spec_shape`)."""
    if data_dir and (Path(data_dir) / "meta.json").is_file():
        return data_shape(data_dir)
    return spec_shape(data_spec, partition)


def run_work(config: dict[str, Any]) -> RunWork:
    """A run's :class:`RunWork`, from its algorithm's ``work`` hook (an algorithm not
    registered here: its ``local_steps``, dense, every client)."""
    from ..algorithms import ALGORITHMS  # not at import: the plan's readers need no kernels

    params = config["params"]
    cls = ALGORITHMS.get(config.get("algorithm", ""))
    if cls is None:
        return RunWork(int(params.get("local_steps", 1)), None)
    return cls.work(params)


def steps_per_round(config: dict[str, Any]) -> int:
    """Minibatch gradients one client of a run computes per round, by its algorithm."""
    return run_work(config).steps


class Layers(NamedTuple):
    """A model's matrix products per sample: for each layer with parameters, (positions,
    out, in): a dense layer's positions are 1, a convolution's its output's pixels."""

    products: tuple[tuple[int, int, int], ...]
    n_params: int
    itemsize: int  # 8 (float64) or 4 (float32)

    @property
    def macs(self) -> int:
        """Multiply-adds of one sample's forward pass."""
        return sum(p * o * i for p, o, i in self.products)


_LAYERS: dict[tuple, Layers] = {}


def layers(model: dict[str, Any], n_features: int, n_outputs: int) -> Layers:
    """The products of a normalised model config on data of this width."""
    key = (json.dumps(model, sort_keys=True, default=str), n_features, n_outputs)
    found = _LAYERS.get(key)
    if found is None:
        from ..objective.model import Network

        net = Network.from_config(model, n_features, n_outputs)
        if net.kind == "cnn":
            products = tuple(
                (lay.outs[0] * lay.outs[1], *lay.params) for lay in net.cnn if lay.params
            )
        else:
            products = tuple((1, o, i) for o, i in net.layers)
        found = _LAYERS[key] = Layers(products, net.n_params, 4 if net.dtype == "float32" else 8)
    return found


def n_outputs(config: dict[str, Any], shape: DataShape) -> int:
    """Outputs of the model: a softmax's classes, else one."""
    return max(shape.n_classes, 2) if config["model"].get("loss") == "softmax" else 1


def _product_seconds(
    m: float,
    n: int,
    k: int,
    itemsize: int,
    rates: Rates,
    conv: bool = False,
    dense_efficiency: float = NETWORK_EFFICIENCY,
) -> float:
    """One (m x k) @ (k x n) product of a network: the slower of its FLOPs and its bytes."""
    flops = 2.0 * m * n * k
    efficiency = CONV_EFFICIENCY if conv else dense_efficiency
    gemm = efficiency * (rates.sgemm if itemsize == 4 else rates.dgemm)
    moved = (n * k + m * (n + k)) * itemsize
    return max(flops / gemm, moved / rates.bandwidth)


def step_seconds(config: dict[str, Any], shape: DataShape, rows: float, rates: Rates) -> float:
    """One local step of one client on ``rows`` minibatch rows (fewer than a client's rows:
    picked at random, read at :data:`GATHER_SHARE` of the bandwidth)."""
    outputs = n_outputs(config, shape)
    if config["model"].get("kind", "linear") == "linear":
        gathered = rows < shape.rows / max(shape.clients, 1)
        read = rows * shape.row_bytes / (rates.bandwidth * (GATHER_SHARE if gathered else 1.0))
        flops = 4.0 * rows * shape.row_values * outputs
        seconds = max(read, flops / (LINEAR_FLOP_EFFICIENCY * rates.dgemm))
        if shape.sparse:  # each stored value's weight read, gradient written, weight moved
            seconds += 3 * rows * shape.row_values * SCATTERED_S
        return seconds
    net = layers(config["model"], shape.cols, outputs)
    seconds = NETWORK_STEP_PASSES * net.n_params * net.itemsize / rates.bandwidth
    for n, (positions, out, fan_in) in enumerate(net.products):
        one = _product_seconds(rows * positions, out, fan_in, net.itemsize, rates, positions > 1)
        seconds += (3 if n else 2) * one + NETWORK_STEP_S
    return seconds


def evaluation_seconds(
    config: dict[str, Any], shape: DataShape, work: RunWork, rates: Rates
) -> float:
    """One evaluation: the objective over the training rows and the test rows' accuracy."""
    outputs = n_outputs(config, shape)
    rows = shape.rows + shape.test_rows
    losses = rows * outputs * SAMPLE_LOSS_S
    if config["model"].get("kind", "linear") == "linear":
        if shape.sparse:  # every stored value, once a class, from the model's columns
            read = rows * shape.row_bytes * outputs / rates.bandwidth
            rate = NETWORK_EFFICIENCY if work.support is None else LINEAR_FLOP_EFFICIENCY
            flops = 2.0 * rows * shape.row_values * outputs / (rate * rates.dgemm)
            forward = max(read, flops)
        else:  # the columns the models scored together use, read once; then each one's margins
            tau = shape.cols if work.support is None else min(work.support, shape.cols)
            columns = tau if work.support is None else min(SUPPORT_UNION * tau, shape.cols)
            batched = model_path(config["model"]) == "linear"
            together = models_scored_together(outputs, shape.rows, shape.cols, batched)
            read = rows * columns * 8.0 / together / rates.bandwidth
            forward = read + 2.0 * rows * tau * outputs / (MARGIN_EFFICIENCY * rates.dgemm)
    else:
        net = layers(config["model"], shape.cols, outputs)
        block = 256.0  # the evaluation's rows per forward block
        blocks = rows / block
        forward = sum(
            blocks * _product_seconds(block * p, o, i, net.itemsize, rates, p > 1, EVAL_EFFICIENCY)
            for p, o, i in net.products
        )
    return work.evaluations * (forward + losses)


def n_params(config: dict[str, Any], shape: DataShape) -> int:
    """The model's parameter count on this data."""
    model = config["model"]
    if model.get("kind", "linear") == "linear":  # the common case, without building it
        return n_outputs(config, shape) * (shape.cols + bool(model.get("bias", False)))
    return layers(model, shape.cols, n_outputs(config, shape)).n_params


def active_coordinates(
    config: dict[str, Any], shape: DataShape, work: RunWork, rows_per_step: float
) -> float:
    """The weights a client of a linear model on sparse data works on in a step, on average
    over its round (``RunWork.active_set``, :mod:`fedsparse.kernels.sparse_rounds`): its
    broadcast support and the features of the rows it has drawn so far, each class's, at
    most the model; a client that selects after every step keeps its support and the features
    of the step's rows."""
    support = shape.cols if work.support is None else min(work.support, shape.cols)
    steps_touched = 1.0 if work.selections else (work.steps + 1) / 2
    touched = steps_touched * rows_per_step * shape.row_values
    return n_outputs(config, shape) * min(shape.cols, support + touched)


TERMS = ("steps", "passes", "selections", "tanh", "offers", "probes", "evaluations", "overhead")


def run_terms(
    config: dict[str, Any],
    shape: DataShape,
    work: RunWork | None = None,
    rates: Rates = NOMINAL,
    *,
    member: bool = False,
) -> dict[str, float]:
    """A run's estimated core-seconds by term (:data:`TERMS`), its job's start-up aside:
    ``steps`` (the computing clients' local steps), ``passes`` (their passes over the model
    at the memory bandwidth, and their share of the server's mean), ``selections`` (their
    top-k selections over the model), ``tanh`` (their passes taking a tanh of every
    parameter), ``offers``, ``probes``, ``evaluations`` and ``overhead``
    (:data:`RUN_OVERHEAD_S`). :func:`run_seconds` is their sum.

    Parameters
    ----------
    config
        The run's normalised config.
    shape
        Its data set's shape (:func:`known_shape`).
    work
        Its :func:`run_work`, where known already.
    rates
        The machine's rates.
    member
        Whether it joins a cohort after the cohort's first run (:func:`run_seconds`).

    Returns
    -------
    dict
        Core-seconds per term, every term of :data:`TERMS` present (0 where none).
    """
    params = config["params"]
    work = run_work(config) if work is None else work
    batch = params.get("batch_size")
    client_rows = shape.rows / max(shape.clients, 1)
    if batch is None or params.get("batch_growth", 1.0) != 1.0:
        rows_per_step = client_rows  # full batch, or growing towards it: bound by the client
    else:
        rows_per_step = min(batch, client_rows)
    clients = shape.clients if work.clients is None else min(work.clients, shape.clients)
    parameters = n_params(config, shape)
    model_bytes = 8.0 * parameters
    step = step_seconds(config, shape, rows_per_step, rates)
    selected = parameters  # the weights a selection goes over
    linear_kernels = model_path(config["model"]) == "linear"
    if work.active_set and shape.sparse and linear_kernels:  # kernels.sparse_rounds
        selected = active_coordinates(config, shape, work, rows_per_step)
        if config["model"].get("l2") or work.selections:
            step += selected * SCATTERED_S  # each step moves all of them
    per_client = {
        "steps": work.steps * step,
        # its passes and its share of the mean
        "passes": (work.passes + 1) * model_bytes / rates.bandwidth,
        "selections": work.selections * selected * SELECT_S,
        "tanh": work.tanh_passes * parameters * TANH_S,
        "offers": work.offered_share * parameters * OFFER_S,
        "probes": 0.0,
    }
    if work.probes:  # each a one-row step whose gradient fills a model-sized buffer
        probe = step_seconds(config, shape, 1, rates) + model_bytes / rates.bandwidth
        per_client["probes"] = work.probes * (probe + PROBE_CALL_S)
    evaluations = math.ceil(config["rounds"] / sweep_default(config, "eval_every")) + 1
    share = COHORT_MEMBER_SHARE if member else 1.0
    terms = {name: config["rounds"] * clients * s * share for name, s in per_client.items()}
    scoring = evaluations * evaluation_seconds(config, shape, work, rates)
    if member and config["model"].get("kind", "linear") == "linear":
        scoring *= COHORT_MEMBER_SHARE  # a network's scoring is products of its own model
    terms["evaluations"] = scoring
    terms["overhead"] = RUN_OVERHEAD_S
    return terms


def run_seconds(
    config: dict[str, Any],
    shape: DataShape,
    work: RunWork | None = None,
    rates: Rates = NOMINAL,
    *,
    member: bool = False,
) -> float:
    """Estimated core-seconds of one run, its job's start-up aside (the sum of
    :func:`run_terms`).

    Parameters
    ----------
    config
        The run's normalised config.
    shape
        Its data set's shape (:func:`known_shape`).
    work
        Its :func:`run_work`, where known already.
    rates
        The machine's rates.
    member
        Whether it joins a cohort after the cohort's first run: its rounds then cost
        :data:`COHORT_MEMBER_SHARE` of theirs alone (its minibatch rows come from cache); so
        do a linear model's evaluations (the cohort's pass reads each row once for all its
        members), while a network's cost what they cost alone (matrix products of its own
        model: arithmetic, not reads).

    Returns
    -------
    float
        Core-seconds, at least :data:`RUN_OVERHEAD_S`.
    """
    return sum(run_terms(config, shape, work, rates, member=member).values())


def run_costs(
    configs: list[dict[str, Any]],
    shape: DataShape,
    work: list[RunWork] | None = None,
    siblings: list[bool] | None = None,
    cohorts: list[bool] | None = None,
    rates: Rates = NOMINAL,
) -> list[float]:
    """Estimated seconds each of ``configs`` adds to a job running them one after another
    (``work``: each one's :func:`run_work`, where known already; ``siblings``: which runs
    share the computation of the run before them, and cost only their trace's writing;
    ``cohorts``: which join the cohort of the runs before them, and cost
    :func:`run_seconds` as a member)."""
    work = [None] * len(configs) if work is None else work
    siblings = [False] * len(configs) if siblings is None else siblings
    cohorts = [False] * len(configs) if cohorts is None else cohorts
    # A planned configuration's seeds share its params mapping (sweep._plan_sweep), and cost
    # the same: each is estimated once, not once per seed. The key holds the mapping's id
    # while the mapping is alive (this call), with the other fields the estimate reads.
    known: dict[tuple, float] = {}
    out = []
    for c, w, sibling, member in zip(configs, work, siblings, cohorts, strict=True):
        if sibling:
            out.append(RUN_OVERHEAD_S)
            continue
        key = (id(c["params"]), c["rounds"], c.get("eval_every"), c.get("algorithm"), w, member)
        seconds = known.get(key)
        if seconds is None:
            seconds = known[key] = run_seconds(c, shape, w, rates, member=member)
        out.append(seconds)
    return out


def shard_seconds(
    configs: list[dict[str, Any]],
    shape: DataShape,
    work: list[RunWork] | None = None,
    siblings: list[bool] | None = None,
    cohorts: list[bool] | None = None,
    rates: Rates = NOMINAL,
) -> float:
    """Estimated seconds of one job running ``configs`` one after another: its start-up and
    :func:`run_costs`."""
    return rates.startup_s + sum(run_costs(configs, shape, work, siblings, cohorts, rates))


def run_state_bytes(config: dict[str, Any], shape: DataShape, work: RunWork) -> float:
    """Memory one computation holds beyond its data: parameter vectors per client."""
    return work.states * shape.clients * 8.0 * n_params(config, shape)


def data_memory_bytes(config: dict[str, Any], shape: DataShape) -> float:
    """A data set in a job's memory: its memory-mapped arrays (charged once their pages are
    touched) and, for a network on dense rows, rows of the network's dtype beside them (a
    float32 network's are a float32 copy, :meth:`FederatedData.in_dtype`)."""
    if config["model"].get("kind", "linear") != "linear" and not shape.sparse:
        value_bytes = 4.0 if config["model"].get("dtype") == "float32" else 8.0
        return value_bytes * (shape.rows + shape.test_rows) * shape.cols + shape.disk_bytes
    return float(shape.disk_bytes)


def job_memory_bytes(
    configs: list[dict[str, Any]],
    shape: DataShape,
    work: list[RunWork] | None = None,
    joins: list[bool] | None = None,
) -> float:
    """Peak memory of a job running ``configs`` (``joins``: which compute with the run
    before them: their states add up)."""
    if not configs:
        return BASE_MEM_MB * 2**20
    work = [None] * len(configs) if work is None else work
    joins = [False] * len(configs) if joins is None else joins
    known: dict[tuple, float] = {}
    peak = group = 0.0
    for c, w, join in zip(configs, work, joins, strict=True):
        key = (id(c["params"]), c.get("algorithm"), w)
        state = known.get(key)
        if state is None:
            state = known[key] = run_state_bytes(c, shape, run_work(c) if w is None else w)
        group = group + state if join else state
        peak = max(peak, group)
    data = data_memory_bytes(configs[0], shape)
    return BASE_MEM_MB * 2**20 + MEM_SAFETY * (data + peak)


def run_disk_bytes(config: dict[str, Any]) -> float:
    """A run's trace on disk (the run store's copy and the aggregated one)."""
    evaluations = math.ceil(config["rounds"] / sweep_default(config, "eval_every")) + 1
    return 2.0 * TRACE_ROW_BYTES * evaluations


def shard_runtime_minutes(
    configs: list[dict[str, Any]],
    shape: DataShape,
    work: list[RunWork] | None = None,
    siblings: list[bool] | None = None,
    cohorts: list[bool] | None = None,
    rates: Rates = NOMINAL,
) -> int:
    """A SLURM time limit (minutes) for one job running ``configs`` one after another."""
    seconds = shard_seconds(configs, shape, work, siblings, cohorts, rates)
    return max(MIN_RUNTIME_MIN, math.ceil(RUNTIME_SAFETY * seconds / 60))


def job_mem_mb(
    shape: DataShape,
    configs: list[dict[str, Any]] | None = None,
    work: list[RunWork] | None = None,
    joins: list[bool] | None = None,
) -> int:
    """Memory (MB) for a job working on one data set (and running ``configs``)."""
    if not configs:
        return math.ceil(BASE_MEM_MB + MEM_SAFETY * shape.disk_bytes / 2**20)
    return math.ceil(job_memory_bytes(configs, shape, work, joins) / 2**20)


def job_resources(
    configs: list[dict[str, Any]],
    data_spec: dict[str, Any],
    data_dir: str | Path,
    work: list[RunWork] | None = None,
    siblings: list[bool] | None = None,
    cohorts: list[bool] | None = None,
    partition: Any = "natural",
    rates: Rates = NOMINAL,
) -> dict[str, int]:
    """``runtime`` (minutes) and ``mem_mb`` for a job running ``configs`` on one data set
    (a data set whose shape only its build can tell: as the largest the registry knows)."""
    shape = known_shape(data_spec, data_dir, partition)
    if shape is None:
        return {"runtime": UNKNOWN_RUNTIME_MIN, "mem_mb": UNKNOWN_MEM_MB}
    runtime = shard_runtime_minutes(configs, shape, work, siblings, cohorts, rates)
    siblings = [False] * len(configs) if siblings is None else siblings
    cohorts = [False] * len(configs) if cohorts is None else cohorts
    joins = [a or b for a, b in zip(siblings, cohorts, strict=True)]
    return {"runtime": runtime, "mem_mb": job_mem_mb(shape, configs, work, joins)}


# A data set that only its build can size (a local file or folder; LEAF's writers): its jobs
# ask for this until the data exists, when Snakemake evaluates their resources again.
UNKNOWN_RUNTIME_MIN = 240
UNKNOWN_MEM_MB = 8192
