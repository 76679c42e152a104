"""Cluster job sizing: resource estimates, shard packing of huge sweeps, one process per shard."""

from __future__ import annotations

import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from conftest import SMALL_LINEAR

from fedsparse.errors import ConfigError
from fedsparse.pipeline.steps import make_data
from fedsparse.sweep import cost, plan_sweep
from fedsparse.sweep.machine import NOMINAL, Rates

LIN = dict(SMALL_LINEAR)


def sweep(**extra) -> dict:
    """A toy sweep whose runs compute alone: these tests cut runs into shards by count and
    by cost; test_cohorts.py plans cohorts."""
    return {
        "sweep": "cost",
        "fuse": False,
        "rounds": 10,
        "seeds": [0, 1],
        "datasets": {"lin": {"data": dict(LIN)}},
        "algorithms": {"fedht": {}, "distiht": {"local_steps": [1]}},
        "grid": {"stepsize": [0.01, 0.001], "local_steps": [2, 4], "sparsity": [10]},
        **extra,
    }


def test_shape_of_a_generated_data_folder_matches_the_spec(tmp_path):
    cfg = sweep()
    make_data(cfg, "lin", tmp_path / "lin")
    spec = plan_sweep(cfg).datasets["lin"]["data"]
    on_disk = cost.data_shape(tmp_path / "lin")
    predicted = cost.synthetic_shape(spec)
    assert (on_disk.rows, on_disk.cols, on_disk.nnz, on_disk.clients, on_disk.sparse) == (
        120,
        40,
        120 * 40,
        6,
        False,
    )
    assert (predicted.rows, predicted.cols, predicted.nnz, predicted.clients) == (120, 40, 4800, 6)
    # the folder holds X, its column copy and small vectors: a bit above the prediction
    assert predicted.disk_bytes <= on_disk.disk_bytes < 1.5 * predicted.disk_bytes + 20_000


# Round numbers, so that each charge can be written out: 1 GB/s, and products so fast that
# a linear step is its read
SIMPLE = Rates(dgemm=1e15, sgemm=2e15, bandwidth=1e9, startup_s=0.0)


def test_a_linear_run_is_charged_its_minibatch_rows_its_support_and_its_evaluations():
    shape = cost.DataShape(
        rows=1000, cols=200, nnz=200_000, sparse=False, clients=10, n_classes=0, disk_bytes=0
    )
    params = {"stepsize": 0.1, "sparsity": 20, "local_steps": 3, "batch_size": 5}
    model = {"loss": "least_squares"}
    config = {"algorithm": "fedht", "params": params, "rounds": 4, "eval_every": 2, "model": model}
    # batch rows x row bytes, picked at random: at a share of the bandwidth
    step = 5 * 200 * 8 / (1e9 * cost.GATHER_SHARE)
    mean = 200 * 8 / 1e9  # a client's share of the server's average of the models
    losses = 1000 * cost.SAMPLE_LOSS_S
    # the union of 16 models' tau columns read once (16 margins of 1,000 rows fit in 32 MB),
    # then each model's products
    union = cost.SUPPORT_UNION * 20 * 1000 * 8 / 16 / 1e9
    products = 2 * 1000 * 20 / (cost.MARGIN_EFFICIENCY * 1e15)
    evaluation = union + products + losses
    rounds = 4 * 10 * (3 * step + mean)  # rounds x clients
    expected = rounds + 3 * evaluation + cost.RUN_OVERHEAD_S  # evaluated: rounds 0, 2, 4
    assert cost.run_seconds(config, shape, rates=SIMPLE) == pytest.approx(expected)
    dense = {**config, "algorithm": "fedavg"}  # a dense model: every column
    # every column read once for the 16, then each model's products
    columns = 1000 * 200 * 8 / 16 / 1e9
    evaluation_dense = columns + 2 * 1000 * 200 / (cost.MARGIN_EFFICIENCY * 1e15) + losses
    assert cost.run_seconds(dense, shape, rates=SIMPLE) == pytest.approx(
        rounds + 3 * evaluation_dense + cost.RUN_OVERHEAD_S
    )
    full = {**config, "params": {**params, "batch_size": None}}  # a client's 100 rows a step
    streamed = 100 * 200 * 8 / 1e9  # all of a client's rows, in order: at the bandwidth
    assert cost.run_seconds(full, shape, rates=SIMPLE) == pytest.approx(
        4 * 10 * (3 * streamed + mean) + 3 * evaluation + cost.RUN_OVERHEAD_S
    )
    csr = cost.DataShape(1000, 200, 5000, True, 10, 0, 0)  # 5 values a row, 12 bytes each
    assert cost.run_seconds(config, csr, rates=SIMPLE) == pytest.approx(
        4 * 10 * (3 * 5 * (5 * 12 / (1e9 * cost.GATHER_SHARE) + 3 * 5 * cost.SCATTERED_S) + mean)
        + 3 * (5000 * 12 / 1e9 + losses)
        + cost.RUN_OVERHEAD_S
    )


def test_fediterht_is_charged_a_selection_of_the_model_after_every_local_step():
    shape = cost.DataShape(1000, 200, 200_000, False, 10, 0, 0)
    params = {"stepsize": 0.1, "sparsity": 20, "local_steps": 3, "batch_size": 5}
    config = {"algorithm": "fedht", "params": params, "rounds": 4, "eval_every": 2}
    config["model"] = {"loss": "least_squares"}
    fedht = cost.run_terms(config, shape, rates=SIMPLE)
    fediterht = cost.run_terms({**config, "algorithm": "fediterht"}, shape, rates=SIMPLE)
    assert fedht["selections"] == 0
    # rounds x clients x local steps, each over the 200 weights
    assert fediterht.pop("selections") == pytest.approx(4 * 10 * 3 * 200 * cost.SELECT_S)
    assert fediterht == {name: s for name, s in fedht.items() if name != "selections"}


def test_a_sparse_datas_hard_thresholding_client_works_on_its_active_coordinates():
    # 20 values a row: 3 steps of 5 rows touch 100 features each; on average over the round a
    # step works on the support and two steps' features (features assumed distinct)
    csr = cost.DataShape(1000, 5000, 20_000, True, 10, 0, 0)
    params = {"stepsize": 0.1, "sparsity": 20, "local_steps": 3, "batch_size": 5}
    config = {"algorithm": "fedht", "params": params, "rounds": 4, "eval_every": 2}
    config["model"] = {"loss": "least_squares", "l2": 0.0}
    active = 20 + 2 * 5 * 20
    plain = cost.run_terms(config, csr, rates=SIMPLE)
    # its rows' 5 x 20 values at scattered weights: read for the score, gradient, moved
    rows = 5 * 20 * 12 / (1e9 * cost.GATHER_SHARE) + 3 * 5 * 20 * cost.SCATTERED_S
    assert plain["steps"] == pytest.approx(4 * 10 * 3 * rows)
    ridge = cost.run_terms({**config, "model": {**config["model"], "l2": 1e-3}}, csr, rates=SIMPLE)
    # without ridge a step moves its rows' weights only; with it, every active one
    assert ridge["steps"] - plain["steps"] == pytest.approx(4 * 10 * 3 * active * cost.SCATTERED_S)
    # FedIter-HT's selection keeps tau of them after every step: the support and a step's rows
    kept = 20 + 5 * 20
    fediterht = cost.run_terms({**config, "algorithm": "fediterht"}, csr, rates=SIMPLE)
    assert fediterht["selections"] == pytest.approx(4 * 10 * 3 * kept * cost.SELECT_S)
    moved = 4 * 10 * 3 * kept * cost.SCATTERED_S
    assert fediterht["steps"] - plain["steps"] == pytest.approx(moved)
    # an algorithm without the active-set kernel selects over the whole model
    work = cost.run_work({**config, "algorithm": "fediterht"})._replace(active_set=False)
    whole = cost.run_terms({**config, "algorithm": "fediterht"}, csr, work, rates=SIMPLE)
    assert whole["selections"] == pytest.approx(4 * 10 * 3 * 5000 * cost.SELECT_S)
    # nor does a model with an intercept (the network kernels): the 5,000 weights and its bias
    biased = {**config, "algorithm": "fediterht", "model": {**config["model"], "bias": True}}
    selections = cost.run_terms(biased, csr, rates=SIMPLE)["selections"]
    assert selections == pytest.approx(4 * 10 * 3 * 5001 * cost.SELECT_S)


def test_a_network_step_is_each_layers_products_at_the_slower_of_flops_and_bytes():
    shape = cost.DataShape(600, 784, 600 * 784, False, 6, 10, 0)
    rates = Rates(dgemm=1e10, sgemm=2e10, bandwidth=1e9, startup_s=0.0)
    config = {"model": {"kind": "mlp", "hidden": [100], "loss": "softmax"}}
    gemm = cost.NETWORK_EFFICIENCY * 1e10

    def product(m, n, k):  # its FLOPs, or its operands and result in float64, whichever is slower
        return max(2 * m * n * k / gemm, (n * k + m * (n + k)) * 8 / 1e9)

    def passes(n_params, itemsize=8):  # the gradient written and applied, at the bandwidth
        return cost.NETWORK_STEP_PASSES * n_params * itemsize / 1e9

    # the first layer's input needs no gradient: two products; the others three
    expected = 2 * product(20, 100, 784) + 3 * product(20, 10, 100) + 2 * cost.NETWORK_STEP_S
    expected += passes(785 * 100 + 101 * 10)
    assert cost.step_seconds(config, shape, 20, rates) == pytest.approx(expected)
    f32 = {"model": {**config["model"], "dtype": "float32"}}  # SGEMM's rate, 4-byte values
    assert cost.step_seconds(f32, shape, 20, rates) < cost.step_seconds(config, shape, 20, rates)
    # a convolution's product has a row per output position of each sample
    cnn = {
        "model": {
            "kind": "cnn",
            "loss": "softmax",
            "layers": [{"conv": {"out": 8, "kernel": 5, "stride": 1, "padding": "same"}}],
        }
    }
    conv = 2 * product(20 * 784, 8, 25) + 3 * product(20, 10, 784 * 8)
    conv += passes(cost.layers(cnn["model"], 784, 10).n_params)
    assert cost.step_seconds(cnn, shape, 20, rates) == pytest.approx(conv + 2 * cost.NETWORK_STEP_S)


def test_an_algorithm_declares_the_work_it_adds():
    # a top-k client selects over the model once a round, a periodic-k one does not, and
    # send-all's server reads and zeroes every residual; personal models are scored too; an
    # online controller probes a second model's loss; a smooth-l1 prox step takes tanh
    fab = cost.run_work({"algorithm": "fabtopk", "params": {"k": 10}})
    periodic = cost.run_work({"algorithm": "periodick", "params": {"k": 10}})
    sendall = cost.run_work({"algorithm": "sendall", "params": {}})
    online = cost.run_work({"algorithm": "fabtopk", "params": {"k": 10, "k_control": "online"}})
    assert (fab.selections, periodic.selections, sendall.selections) == (1, 0, 0)
    assert fab.passes == periodic.passes == 1 and sendall.passes == 3
    assert online.probes == 3 and fab.probes == 0 and online.selections == 1
    sfedhp = cost.run_work({"algorithm": "sfedhp", "params": {}})
    fedprox = cost.run_work({"algorithm": "fedprox", "params": {}})
    assert sfedhp.evaluations == 2 and fedprox.evaluations == 1
    assert sfedhp.tanh_passes == 0 and fedprox.tanh_passes == 0  # gamma1 = 0: no tanh
    sparse = cost.run_work({"algorithm": "sfedhp", "params": {"gamma1": 1e-3, "inner_steps": 5}})
    assert sparse.tanh_passes == sparse.steps == 20 * 5
    assert cost.run_work({"algorithm": "fedht", "params": {"sparsity": 7}}).support == 7


def test_a_data_sets_shape_is_known_from_its_spec_before_it_is_built(tmp_path):
    images = {"kind": "idx", "source": "fashion-mnist"}
    cycle = {"kind": "label_cycle", "clients": 20, "labels_per_client": 5}
    cycle.update(train_per_label=200, test_per_label=800, scope="total")
    shape = cost.spec_shape(images, cycle)
    assert (shape.rows, shape.test_rows, shape.cols, shape.clients) == (2000, 8000, 784, 20)
    shape = cost.spec_shape(images, {"kind": "dirichlet", "clients": 156, "test_fraction": 0})
    assert (shape.rows, shape.test_rows, shape.n_classes, shape.assumed) == (60000, 10000, 10, "")
    rcv1 = cost.spec_shape(
        {"kind": "svmlight", "source": "rcv1.binary"}, {"kind": "iid", "clients": 4}
    )
    assert rcv1.sparse and "assumed" in rcv1.assumed  # its stored values: only the file tells
    cifar = {"kind": "svmlight", "source": "cifar10", "file": "train"}
    split = {"kind": "one_class", "clients": 100, "test_fraction": 0.1}
    shape = cost.spec_shape(cifar, split)
    assert (shape.rows, shape.test_rows, shape.n_classes, shape.assumed) == (45000, 5000, 10, "")
    local = {"kind": "svmlight", "path": str(tmp_path / "a.svm"), "task": "binary"}
    assert cost.spec_shape(local, {"kind": "iid", "clients": 4}) is None


def test_a_network_job_holds_rows_of_its_dtype_beside_the_mapped_data():
    images = {"kind": "idx", "source": "fashion-mnist"}
    shape = cost.spec_shape(images, {"kind": "iid", "clients": 10})
    mlp = {"kind": "mlp", "loss": "softmax", "hidden": [100]}
    f64, f32, linear = (
        cost.data_memory_bytes({"model": model}, shape)
        for model in (mlp, {**mlp, "dtype": "float32"}, {"loss": "softmax"})
    )
    assert linear == shape.disk_bytes
    values = (shape.rows + shape.test_rows) * shape.cols
    assert (f64 - linear, f32 - linear) == (8 * values, 4 * values)


def test_shard_resources_grow_with_the_runs_and_the_data(tmp_path):
    plan = plan_sweep(sweep(rounds=10_000_000, shard_size=2))
    first, *_ = plan.shards
    small = plan.shard_resources(first, tmp_path / "absent")  # from the synthetic spec
    assert small["runtime"] >= cost.MIN_RUNTIME_MIN and small["mem_mb"] >= cost.BASE_MEM_MB
    bigger = plan_sweep(sweep(rounds=10_000_000, shard_size=4))
    assert bigger.shard_resources(first, tmp_path / "absent")["runtime"] > small["runtime"]
    real = {"kind": "svmlight", "source": "rcv1.binary"}
    assert cost.job_resources([], real, tmp_path / "absent") == {
        "runtime": cost.UNKNOWN_RUNTIME_MIN,
        "mem_mb": cost.UNKNOWN_MEM_MB,
    }
    wide = dict(LIN, dim=100_000)
    assert cost.job_resources([], wide, tmp_path)["mem_mb"] > 1.25 * 2 * 120 * 100_000 * 8 / 2**20


def test_a_huge_sweep_is_packed_into_at_most_about_max_shards_shards():
    grid = {
        "stepsize": [0.1, 0.01, 0.001, 0.0001],
        "local_steps": list(range(1, 11)),
        "sparsity": list(range(1, 26)),
    }
    start = time.perf_counter()
    plan = plan_sweep(sweep(grid=grid, seeds=list(range(10)), shard_size=5, max_shards=40))
    elapsed = time.perf_counter() - start
    runs = [r.run_id for r in plan.runs]
    assert len(runs) == 2 * 4 * 10 * 25 * 10 - 4 * 9 * 25 * 10  # distiht: K = 1 only
    assert len(set(runs)) == len(runs)
    assert len(plan.shards) == 40  # shards of ceil(11,000 / 40) = 275 runs' count
    priorities = sorted(plan.shard_priority(s) for s in plan.shards)
    assert priorities[-1] <= 1.1 * priorities[len(priorities) // 2]  # each costs about the same
    assert min(len(s) for s in plan.shards.values()) > 0
    assert elapsed < 30
    # with cohorts a shard grows past its size rather than part one (the 4 step sizes of a
    # configuration and seed compute as one)
    fused = plan_sweep(
        sweep(grid=grid, seeds=list(range(10)), shard_size=5, max_shards=40, fuse=True)
    )
    assert len(fused.shards) <= 40
    # below the cap, as many shards as shard_size makes
    assert len(plan_sweep(sweep(shard_size=3)).shards) == 4  # 12 runs


@pytest.mark.parametrize("bad", [0, -1, "many"])
def test_bad_max_shards_is_refused(bad):
    with pytest.raises(ConfigError, match="max_shards"):
        plan_sweep(sweep(max_shards=bad))


def shard_minutes_of(plan) -> dict[str, float]:
    """Each shard's estimated minutes of runs (the cost model; no job start-up)."""
    out = {}
    for name, runs in plan.shards.items():
        shape = cost.known_shape(plan.datasets[runs[0].dataset]["data"], None)
        out[name] = sum(cost.run_seconds(r.config, shape) for r in runs) / 60
    return out


def test_shard_minutes_groups_a_data_sets_runs_by_estimated_cost():
    grid = {"stepsize": [0.1, 0.01, 0.001], "local_steps": [1, 5, 20], "sparsity": [5, 10]}
    base = sweep(grid=grid, rounds=3000, seeds=list(range(5)), shard_size=4)
    by_count, by_cost = plan_sweep(base), plan_sweep({**base, "shard_minutes": 0.065})
    # the same runs in the same order, only cut elsewhere
    assert [r.run_id for r in by_cost.runs] == [r.run_id for r in by_count.runs]
    minutes = shard_minutes_of(by_cost)
    total = sum(minutes.values())
    assert len(by_cost.shards) == -(-total // 0.065) == 7  # ceil(total / target), ~0.42 min
    assert len({len(runs) for runs in by_cost.shards.values()}) > 2  # runs differ in cost
    # near-equal shares: none above the target or far below it, the runs' costs differing
    share = total / len(minutes)
    one_run = max(cost.run_seconds(r.config, cost.known_shape(LIN, None)) for r in by_cost.runs)
    assert all(abs(m - share) <= one_run / 60 for m in minutes.values())
    assert all(m <= 0.065 + one_run / 60 for m in minutes.values())
    # a larger target: fewer, longer shards; max_shards still caps the count
    assert len(plan_sweep({**base, "shard_minutes": 0.15}).shards) == -(-total // 0.15) == 3
    assert len(plan_sweep({**base, "shard_minutes": 0.01, "max_shards": 4}).shards) == 4


def test_a_data_set_of_unknown_shape_is_cut_by_count(tmp_path):
    # shard_size runs a shard, grown past max_shards: where the cost model cannot size the
    # runs before the data is built (a local file's shape is in the file)
    def by_count(plan, size, cap):
        runs = {}
        for r in plan.runs:
            runs.setdefault(r.dataset, []).append(r.run_id)
        size = max(size, -(-len(plan.runs) // cap))
        return {
            f"{ds}--{k // size:04d}": ids[k : k + size]
            for ds, ids in runs.items()
            for k in range(0, len(ids), size)
        }

    local = {"kind": "svmlight", "path": str(tmp_path / "a.svm"), "task": "binary"}
    datasets = {"local": {"data": local, "partition": {"kind": "iid", "clients": 4}}}
    cases = (({}, 25, 500), ({"shard_size": 3}, 3, 500), ({"max_shards": 2}, 25, 2))
    for extra, size, cap in cases:
        plan = plan_sweep(sweep(datasets=datasets, **extra))
        shards = {name: [r.run_id for r in runs] for name, runs in plan.shards.items()}
        assert shards == by_count(plan, size, cap)


def test_shard_minutes_leaves_data_sets_of_unknown_shape_to_shard_size(tmp_path):
    local = {"kind": "svmlight", "path": str(tmp_path / "a.svm"), "task": "binary"}
    real = {"data": local, "model": {"loss": "logistic"}}
    cfg = sweep(shard_size=3, shard_minutes=60)
    cfg["datasets"] = {"lin": {"data": dict(LIN)}, "rcv1": real}
    plan = plan_sweep(cfg)
    assert len([s for s in plan.shards if s.startswith("lin--")]) == 1  # seconds of runs
    sizes = [len(runs) for name, runs in plan.shards.items() if name.startswith("rcv1--")]
    assert sizes == [3, 3, 3, 3]  # its 12 runs, shard_size a shard


@pytest.mark.parametrize("bad", [0, -1, "20", True, float("inf"), float("nan"), [20]])
def test_bad_shard_minutes_is_refused_with_one_line_naming_it(bad):
    with pytest.raises(ConfigError, match=r"^shard_minutes: must be a number of minutes > 0"):
        plan_sweep(sweep(shard_minutes=bad))


def test_a_plan_read_from_its_file_sizes_shards_as_the_planned_one(tmp_path):
    # steps per round differ from local_steps here (pfedme: local x inner steps, hierfavg:
    # local steps x edge rounds); a job's Snakemake reads them from the plan file
    from fedsparse.sweep.plan_file import read_plan, write_plan_file

    cfg = sweep(seeds=[0, 1, 2], shard_size=2)
    cfg["datasets"]["lin"]["data"]["clients"] = 8
    cfg["algorithms"] = {
        "pfedme": {"lambda": [20], "local_steps": [3], "inner_steps": [5]},
        "hierfavg": {"local_steps": [1, 2], "edge_rounds": [20], "edges": [4]},
        "fedht": {},
    }
    cfg["grid"].update(inner_stepsize=[0.05], batch_size=[5])
    plan = plan_sweep(cfg)
    assert {cost.steps_per_round(r.config) for r in plan.runs} == {15, 20, 40, 2, 4}
    write_plan_file(plan, cfg, tmp_path / "plan.parquet")
    read = read_plan(tmp_path / "plan.parquet", cfg)
    make_data(cfg, "lin", tmp_path / "lin")
    for shard, runs in plan.shards.items():
        assert read.shard_work(shard) == [cost.run_work(r.config) for r in runs]
        assert read.shard_priority(shard) == plan.shard_priority(shard) > 0
        assert read.shard_resources(shard, tmp_path / "lin") == plan.shard_resources(
            shard, tmp_path / "lin"
        )
    # the hard-thresholding family bounds its model's support (its model_support hook): an
    # exact evaluation reads tau columns; the others' models are dense
    supports = {r.config["algorithm"]: cost.run_work(r.config).support for r in plan.runs}
    assert supports == {"pfedme": None, "hierfavg": None, "fedht": cfg["grid"]["sparsity"][0]}


def test_a_second_process_on_the_same_shard_waits_for_the_first(tmp_path):
    from fedsparse.pipeline.shard_runner import run_shard

    cfg = sweep(shard_size=50)
    make_data(cfg, "lin", tmp_path / "data" / "lin")
    out = tmp_path / "shards"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(2)",
            str(out / ".lin--0000.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    start = time.monotonic()
    run_shard(cfg, "lin--0000", tmp_path / "data", out / "t.parquet", out / "r.parquet")
    assert time.monotonic() - start > 1.0  # it waited for the holder
    holder.wait()
    assert (out / "t.parquet").is_file() and (out / "r.parquet").is_file()
    # the runs it computed went to the run store beside the shards' folder
    stored = {p.stem for p in (tmp_path / "store").glob("*/*.parquet")}
    assert stored == set(pq.read_table(out / "r.parquet").column("run_id").to_pylist())


def test_costlier_shards_get_higher_scheduling_priority(tmp_path):
    cfg = sweep(shard_size=5, rounds=100_000, shard_minutes=1000)  # one shard a data set
    cfg["datasets"]["wide"] = {"data": dict(LIN, dim=4000)}
    local = {"kind": "svmlight", "path": str(tmp_path / "a.svm"), "task": "binary"}
    cfg["datasets"]["local"] = {"data": local, "partition": {"kind": "iid", "clients": 4}}
    plan = plan_sweep(cfg)
    small, wide = plan.shard_priority("lin--0000"), plan.shard_priority("wide--0000")
    assert wide > small > 0
    assert plan.shard_priority("local--0000") == 0  # its shape: unknown until built


def test_without_shard_minutes_the_shards_of_costly_data_sets_are_more_and_cost_alike():
    cfg = sweep(shard_size=4, rounds=1000)  # 12 runs a data set: 6 shards in all by count
    cfg["datasets"]["wide"] = {"data": dict(LIN, dim=4000)}
    plan = plan_sweep(cfg)
    count = {ds: sum(s.startswith(ds + "--") for s in plan.shards) for ds in ("lin", "wide")}
    assert sum(count.values()) == 6 and count["wide"] > count["lin"] >= 1
    priorities = sorted(plan.shard_priority(s) for s in plan.shards if s.startswith("wide"))
    assert priorities[-1] <= 2 * priorities[len(priorities) // 2]


def test_a_shard_estimate_counts_each_configuration_once_and_equals_the_per_run_sum(
    monkeypatch,
):
    # The seeds of a planned configuration share its params mapping: the estimate computes
    # each configuration once (the DAG's priorities of a million-run plan were per-run work),
    # and still equals summing every run's own estimate.
    plan = plan_sweep(sweep(seeds=[0, 1, 2, 3], rounds=50, shard_size=1000))
    (shard,) = plan.shards
    runs = plan.shards[shard]
    configs = [r.config for r in runs]
    shape = cost.synthetic_shape(plan.datasets["lin"]["data"])
    expected = NOMINAL.startup_s + sum(cost.run_seconds(c, shape) for c in configs)

    calls = []
    real = cost.run_seconds
    monkeypatch.setattr(cost, "run_seconds", lambda *a, **k: calls.append(a) or real(*a, **k))
    assert cost.shard_seconds(configs, shape) == pytest.approx(expected, rel=1e-12)
    assert len(calls) == len(configs) // 4  # one per configuration, not per seed

    # a config that only looks alike (its own params mapping) is estimated on its own
    copies = [{**c, "params": dict(c["params"])} for c in configs]
    calls.clear()
    assert cost.shard_seconds(copies, shape) == pytest.approx(expected, rel=1e-12)
    assert len(calls) == len(configs)
