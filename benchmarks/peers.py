"""fedsparse against what researchers use instead: Flower's simulation with a PyTorch client,
and a plain PyTorch FedAvg loop, on the same experiment.

    python benchmarks/peers.py                      # every case, 3 interleaved repeats
    python benchmarks/peers.py --cases 20x100 --repeats 1 --rounds 10   # quicker

Prints a table, writes nothing but a temporary folder. Needs ``torch`` for the PyTorch loop and
``flwr[simulation]`` (with Ray) for Flower; a contender whose package is missing is skipped with
a one-line reason. Neither is a dependency of fedsparse (``pip install torch==2.13.0
'flwr[simulation]'`` in a virtual environment that sees fedsparse).

The experiment: real Fashion-MNIST (fedsparse's ``kind: idx`` loader, pixels scaled to [0, 1]),
an IID split into N clients (fedsparse's ``partition: iid``), full participation, float32 in
all three, the same Glorot-uniform initial model (fedsparse's ``init: glorot``, copied into the
PyTorch modules), plain SGD with lr 0.05, E = 10 local steps of batch 32, 20 rounds, no ridge,
the p-weighted average (equal sizes: the mean). PyTorch's loop runs twice: with torch's default
threads (one per core: what a user gets) and with one (``torch-1t``), which is faster whenever
another process is busy (OpenMP's waiting threads then lose their core: measured 8× slower).

Each contender runs in a fresh process, so "process" is the whole wall time a user waits
(imports, data, JIT or Ray start, training, the final test evaluation); "round" is the training
time of a round: fedsparse's own timer (``elapsed_s`` / rounds), PyTorch's loop timed per round
(the median of rounds 2..R), and for Flower the time between consecutive calls of the strategy's
central ``evaluate_fn`` (called after every round; the median of rounds 2..R). "system" is the
kernel's share of the process's CPU time (of its whole tree for fedsparse and the PyTorch loop;
Ray's workers are not the driver's children, so Flower's is its driver's). Test accuracy is
of the final model on the 10,000 test images. Repeats are interleaved (fedsparse, PyTorch,
Flower, then again) so the machine's spells of load fall on all of them alike.

Flower's side is written as Flower's quickstart-pytorch writes it (flwr 1.x Message API): a
``ClientApp`` whose ``train`` builds the ``Net``, loads the received ``ArrayRecord``, makes a
shuffled ``DataLoader`` of its partition and trains; a ``ServerApp`` running
``FedAvg.start``; ``run_simulation`` on Ray with ``num_cpus=1`` per client actor. Only the
data source differs (the same arrays as the others, read once per actor process, as the
quickstart caches its ``FederatedDataset``) and the optimiser (plain SGD for momentum, to
match the experiment); training stops after E batches.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {"20x100": (20, [100]), "100x100": (100, [100]), "100x500-200": (100, [500, 200])}
LR, LOCAL_STEPS, BATCH = 0.05, 10, 32


def run_config(clients: int, hidden: list[int], rounds: int) -> dict:
    """The fedsparse run config of a case (also the source of every peer's data and init)."""
    return {
        "dataset": {"kind": "idx", "source": "fashion-mnist"},
        "partition": {"kind": "iid", "clients": clients},
        "model": {
            "kind": "mlp",
            "loss": "softmax",
            "l2": 0.0,
            "hidden": hidden,
            "activation": "relu",
            "dtype": "float32",
            "init": {"kind": "glorot", "seed": 0},
        },
        "algorithm": "fedavg",
        "params": {"stepsize": LR, "local_steps": LOCAL_STEPS, "batch_size": BATCH},
        "rounds": rounds,
        "eval_every": rounds,
        "seed": 0,
    }


def export_case(cfg: dict, dest: Path) -> None:
    """The case's clients, test set and initial model as one .npz the peers read."""
    import numpy as np

    from fedsparse.objective.problem import Problem
    from fedsparse.training.config import normalize_run_config
    from fedsparse.training.experiment import load_dataset

    cfg = normalize_run_config(cfg)
    data = load_dataset(cfg["dataset"], cfg["model"]["loss"], cfg["partition"])
    problem = Problem.from_config(data, cfg["model"])
    network = problem.network
    layers = [(W.copy(), b.copy()) for W, b in network.split(problem.initial_model())]
    arrays = {
        "X": np.asarray(data.X, dtype=np.float32),
        "y": data.y.astype(np.int64),
        "client_ptr": data.client_ptr,
        "X_test": np.asarray(data.X_test, dtype=np.float32),
        "y_test": data.y_test.astype(np.int64),
    }
    for k, (W, b) in enumerate(layers):
        arrays[f"W{k}"], arrays[f"b{k}"] = W.astype(np.float32), b.astype(np.float32)
    np.savez(dest, **arrays)


# ---------------------------------------------------------------------------
# PyTorch pieces shared by the plain loop and Flower's client


def torch_net(npz):
    """The MLP as torch modules, float32, with the case's initial weights."""
    import torch

    n_layers = sum(1 for k in npz.files if k.startswith("W"))
    mods = []
    for k in range(n_layers):
        W = torch.from_numpy(npz[f"W{k}"])
        lin = torch.nn.Linear(W.shape[1], W.shape[0])
        with torch.no_grad():
            lin.weight.copy_(W)
            lin.bias.copy_(torch.from_numpy(npz[f"b{k}"]))
        mods += [lin, torch.nn.ReLU()]
    return torch.nn.Sequential(*mods[:-1])


def torch_accuracy(net, X, y) -> float:
    import torch

    with torch.no_grad():
        return float((net(X).argmax(dim=1) == y).float().mean())


def work_torch(npz_path: str, rounds: int, threads: int = 0) -> dict:
    """A plain PyTorch FedAvg loop, as a researcher writes one without a framework
    (``threads``: torch's intra-op threads, 0 its default, one per core)."""
    import numpy as np
    import torch

    if threads:
        torch.set_num_threads(threads)

    npz = np.load(npz_path)
    X, y = torch.from_numpy(npz["X"]), torch.from_numpy(npz["y"])
    ptr = npz["client_ptr"]
    clients = [(X[a:b], y[a:b]) for a, b in zip(ptr[:-1], ptr[1:], strict=True)]
    weights = torch.tensor(np.diff(ptr) / ptr[-1], dtype=torch.float32)
    net = torch_net(npz)
    torch.manual_seed(0)
    loss_fn = torch.nn.CrossEntropyLoss()
    global_state = {k: v.clone() for k, v in net.state_dict().items()}
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        total = {k: torch.zeros_like(v) for k, v in global_state.items()}
        for (Xc, yc), p in zip(clients, weights, strict=True):
            net.load_state_dict(global_state)
            opt = torch.optim.SGD(net.parameters(), lr=LR)
            order = torch.randperm(len(yc))
            for s in range(LOCAL_STEPS):
                rows = order[(s * BATCH) % len(yc) :][:BATCH]
                opt.zero_grad()
                loss_fn(net(Xc[rows]), yc[rows]).backward()
                opt.step()
            for k, v in net.state_dict().items():
                total[k].add_(v, alpha=float(p))
        global_state = total
        times.append(time.perf_counter() - start)
    net.load_state_dict(global_state)
    acc = torch_accuracy(net, torch.from_numpy(npz["X_test"]), torch.from_numpy(npz["y_test"]))
    return {"round_times": times, "accuracy": acc, "threads": torch.get_num_threads()}


def work_flower(npz_path: str, rounds: int, out_path: str) -> dict:
    """Flower's simulation (Ray) with a PyTorch client as Flower's quickstart writes it."""
    import numpy as np
    import torch
    from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp
    from flwr.serverapp.strategy import FedAvg
    from flwr.simulation import run_simulation

    npz = np.load(npz_path)
    n_clients = len(npz["client_ptr"]) - 1
    cache: dict = {}

    def load_data(partition_id: int):
        """The partition's DataLoader (the arrays read once per actor process)."""
        if "npz" not in cache:
            cache["npz"] = np.load(npz_path)
        d = cache["npz"]
        a, b = d["client_ptr"][partition_id], d["client_ptr"][partition_id + 1]
        ds = torch.utils.data.TensorDataset(
            torch.from_numpy(d["X"][a:b]), torch.from_numpy(d["y"][a:b])
        )
        return torch.utils.data.DataLoader(ds, batch_size=BATCH, shuffle=True)

    def train_fn(net, trainloader, lr: float) -> float:
        criterion = torch.nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(net.parameters(), lr=lr)
        net.train()
        running, steps = 0.0, 0
        while steps < LOCAL_STEPS:
            for images, labels in trainloader:
                optimizer.zero_grad()
                loss = criterion(net(images), labels)
                loss.backward()
                optimizer.step()
                running += loss.item()
                steps += 1
                if steps == LOCAL_STEPS:
                    break
        return running / steps

    client_app = ClientApp()

    @client_app.train()
    def train(msg: Message, context: Context):
        if "npz" not in cache:
            cache["npz"] = np.load(npz_path)
        model = torch_net(cache["npz"])
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        trainloader = load_data(context.node_config["partition-id"])
        train_loss = train_fn(model, trainloader, msg.content["config"]["lr"])
        metrics = MetricRecord({"train_loss": train_loss, "num-examples": len(trainloader.dataset)})
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics})
        return Message(content=content, reply_to=msg)

    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        net = torch_net(npz)
        X_test, y_test = torch.from_numpy(npz["X_test"]), torch.from_numpy(npz["y_test"])
        stamps: list[float] = []
        result: dict = {}

        def central_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
            stamps.append(time.perf_counter())
            if server_round < rounds:
                return MetricRecord({})
            net.load_state_dict(arrays.to_torch_state_dict())
            result["accuracy"] = torch_accuracy(net, X_test, y_test)
            return MetricRecord({"accuracy": result["accuracy"]})

        strategy = FedAvg(
            fraction_train=1.0,
            fraction_evaluate=0.0,
            min_train_nodes=n_clients,
            min_available_nodes=n_clients,
        )
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(net.state_dict()),
            num_rounds=rounds,
            train_config=ConfigRecord({"lr": LR}),
            evaluate_fn=central_evaluate,
        )
        times = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]
        Path(out_path).write_text(json.dumps({"round_times": times, **result}))

    run_simulation(
        server_app=server_app,
        client_app=client_app,
        num_supernodes=n_clients,
        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}},
    )
    return json.loads(Path(out_path).read_text())


# ---------------------------------------------------------------------------
# The driver: each contender in a fresh process, timed whole


def children_cpu() -> tuple[float, float]:
    """User and system CPU seconds of the waited-for child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def system_share(before: tuple[float, float]) -> float:
    """The system time's share of a child's CPU time since ``before`` (its whole process tree
    where it waits for its own children; Ray's workers are not among them)."""
    user, system = (now - then for now, then in zip(children_cpu(), before, strict=True))
    return system / max(user + system, 1e-9)


def run_fedsparse(cfg_path: Path, out: Path, rounds: int) -> dict:
    import pyarrow.parquet as pq

    start, cpu = time.perf_counter(), children_cpu()
    cmd = [sys.executable, "-m", "fedsparse", "run", str(cfg_path), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - start
    last = pq.read_table(out).to_pylist()[-1]
    per_round = last["elapsed_s"] / rounds
    return {
        "wall": wall,
        "round": per_round,
        "accuracy": last["test_accuracy"],
        "system": system_share(cpu),
    }


def run_peer(kind: str, npz: Path, rounds: int, tmp: Path) -> dict:
    out = tmp / f"{kind}.json"
    cmd = [sys.executable, __file__, "--worker", kind, str(npz), str(rounds), str(out)]
    start, cpu = time.perf_counter(), children_cpu()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{proc.stderr[-3000:]}")
    res = json.loads(out.read_text())
    steady = res["round_times"][1:] or res["round_times"]
    return {
        "wall": wall,
        "round": statistics.median(steady),
        "accuracy": res["accuracy"],
        "system": system_share(cpu),
    }


def available(module: str) -> str | None:
    """None if ``module`` imports, else the one-line reason to skip its contender."""
    try:
        __import__(module)
    except ImportError as exc:
        return f"skipped: {module} is not installed ({exc})"
    return None


def versions() -> str:
    import platform

    import numba
    import numpy

    import fedsparse

    parts = [f"python {platform.python_version()}", f"fedsparse {fedsparse.__version__}"]
    parts += [f"numpy {numpy.__version__}", f"numba {numba.__version__}"]
    for name in ("torch", "flwr", "ray"):
        try:
            parts.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            pass
    return ", ".join(parts)


def fmt(values: list[float], digits: int = 3) -> str:
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if len(values) == 1 else f"{lo:.{digits}f}–{hi:.{digits}f}"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, npz, rounds, out = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        if kind == "flower":
            res = work_flower(npz, rounds, out)
        else:
            res = work_torch(npz, rounds, 1 if kind == "torch-1t" else 0)
        Path(out).write_text(json.dumps(res))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--skip", nargs="*", default=[], choices=["torch", "torch-1t", "flower"])
    args = ap.parse_args()
    import yaml

    torch_missing = available("torch")
    skipped = {"torch": torch_missing, "torch-1t": torch_missing, "flower": available("flwr")}
    if skipped["flower"] is None and skipped["torch"] is not None:
        skipped["flower"] = "skipped: Flower's client here is PyTorch, which is not installed"
    for kind in args.skip:
        skipped[kind] = "skipped: --skip"
    print(versions())
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for kind, why in skipped.items():
        if why:
            print(f"{kind}: {why}")
    contenders = ["fedsparse"] + [k for k, why in skipped.items() if why is None]
    rows = []
    with tempfile.TemporaryDirectory(prefix="fedsparse-peers-") as tmp_name:
        tmp = Path(tmp_name)
        for case in args.cases:
            clients, hidden = CASES[case]
            cfg = run_config(clients, hidden, args.rounds)
            cfg_path, npz = tmp / f"{case}.yaml", tmp / f"{case}.npz"
            cfg_path.write_text(yaml.safe_dump(cfg))
            export_case(cfg, npz)
            got: dict[str, list[dict]] = {k: [] for k in contenders}
            for rep in range(args.repeats):
                for kind in contenders:
                    if kind == "fedsparse":
                        res = run_fedsparse(cfg_path, tmp / "trace.parquet", args.rounds)
                    else:
                        res = run_peer(kind, npz, args.rounds, tmp)
                    got[kind].append(res)
                    print(
                        f"  {case} #{rep + 1} {kind:9s} process {res['wall']:6.2f} s, "
                        f"round {res['round']:.4f} s, test accuracy {res['accuracy']:.4f}, "
                        f"system {100 * res['system']:.1f} % of CPU",
                        flush=True,
                    )
            rows.append((case, got))
    print()
    # the ratio of each interleaved pair (repeat i of a peer against repeat i of fedsparse)
    head = "| case | contender | process s | s/round | round ÷ fedsparse's | test accuracy "
    print(head + "| system % of CPU |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for case, got in rows:
        ours = [r["round"] for r in got["fedsparse"]]
        for kind, res in got.items():
            rounds = [r["round"] for r in res]
            pairs = [r / o for r, o in zip(rounds, ours, strict=True)]
            ratio = "" if kind == "fedsparse" else fmt(pairs, 1) + "×"
            print(
                f"| {case} | {kind} | {fmt([r['wall'] for r in res], 2)} | {fmt(rounds)} "
                f"| {ratio} | {fmt([r['accuracy'] for r in res])} "
                f"| {fmt([100 * r['system'] for r in res], 1)} |"
            )


if __name__ == "__main__":
    main()
