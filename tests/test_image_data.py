"""Image data sets: the IDX reader and its downloads, LEAF folders, preprocessing, and the
papers' partitions on them (files the tests write, a loopback server, and the real
Fashion-MNIST of Debian's dataset-fashion-mnist where it is installed)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from _loopback import Loopback

import fedsparse
from fedsparse import cli
from fedsparse.data import leaf, registry
from fedsparse.data.idx import IMAGES, LABELS, find_files, obtain, read_idx
from fedsparse.data.leaf import load_leaf_dir
from fedsparse.data.prepare import prepare
from fedsparse.data.preprocess import preprocess
from fedsparse.errors import ConfigError, DataError
from fedsparse.sweep import plan_sweep
from fedsparse.training.config import normalize_run_config, partition_label, run_id

FAST = {"retries": 2, "backoff": 0.01, "timeout": 5.0}
DEBIAN_FMNIST = Path("/usr/share/datasets/fashion-mnist")
STEMS = registry.IDX_FILES


# ---------------------------------------------------------------------------- writing IDX files


def idx_bytes(arr: np.ndarray) -> bytes:
    """``arr`` (uint8) as an IDX file: magic 0x0000080<ndim>, sizes, values."""
    head = bytes([0, 0, 0x08, arr.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in arr.shape)
    return head + np.ascontiguousarray(arr, dtype=np.uint8).tobytes()


def image_set(n_train: int, n_test: int, classes: int = 10, side: int = 3, seed: int = 0):
    """Random images (n, side, side) with labels cycling through the classes."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        out[f"{split}_images"] = rng.integers(0, 256, (n, side, side), dtype=np.uint8)
        out[f"{split}_labels"] = (np.arange(n) % classes).astype(np.uint8)
    return out


def write_idx_dir(folder: Path, arrays: dict, gz: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for key, stem in STEMS.items():
        body = idx_bytes(arrays[key])
        if gz:  # no time stamp in the header: equal contents give equal files (and SHA-256s)
            (folder / f"{stem}.gz").write_bytes(gzip.compress(body, mtime=0))
        else:
            (folder / stem).write_bytes(body)
    return folder


def run_cfg(dataset: dict, partition, **kw) -> dict:
    return {
        "dataset": dataset,
        "partition": partition,
        "model": {"loss": "softmax"},
        "algorithm": "fedht",
        "params": {"stepsize": 0.1, "sparsity": 5},
        "rounds": 2,
        **kw,
    }


def norm(dataset: dict, partition) -> dict:
    return normalize_run_config(run_cfg(dataset, partition))


# ---------------------------------------------------------------------------- the IDX reader


@pytest.mark.parametrize("gz", [True, False])
def test_idx_reader_reads_plain_and_gzip_files(tmp_path, gz):
    arrays = image_set(30, 10, side=4)
    folder = write_idx_dir(tmp_path / "d", arrays, gz=gz)
    suffix = ".gz" if gz else ""
    images = read_idx(folder / (STEMS["train_images"] + suffix), IMAGES)
    labels = read_idx(folder / (STEMS["train_labels"] + suffix), LABELS)
    assert images.shape == (30, 16) and images.dtype == np.uint8
    assert np.array_equal(images, arrays["train_images"].reshape(30, 16))
    assert np.array_equal(labels, arrays["train_labels"])


def _bad(path: Path, body: bytes) -> str:
    path.write_bytes(body)
    with pytest.raises(DataError) as err:
        read_idx(path, IMAGES)
    msg = str(err.value)
    assert msg.startswith(str(path)) and "\n" not in msg
    return msg


def test_idx_reader_refuses_a_wrong_magic_number(tmp_path):
    labels = idx_bytes(np.zeros(5, np.uint8))  # a labels file where images are expected
    msg = _bad(tmp_path / "x-idx3-ubyte", labels)
    assert "magic number 0x00000801, expected 0x00000803" in msg
    msg = _bad(tmp_path / "y", b"PK\x03\x04 a zip file, not IDX")
    assert "not an IDX images file" in msg


def test_idx_reader_refuses_sizes_that_disagree_with_the_header(tmp_path):
    body = idx_bytes(np.zeros((4, 2, 2), np.uint8))
    msg = _bad(tmp_path / "short", body[:-3])
    assert "truncated: the header announces 4 x 2 x 2 = 16 bytes of data, the file holds 13" in msg
    msg = _bad(tmp_path / "long", body + b"\0\0")
    assert "2 bytes too long" in msg
    msg = _bad(tmp_path / "header", body[:9])
    assert "truncated IDX header" in msg


def test_idx_reader_refuses_truncated_and_corrupt_gzip(tmp_path):
    whole = gzip.compress(idx_bytes(np.zeros((50, 3, 3), np.uint8)))
    assert "truncated gzip stream" in _bad(tmp_path / "cut.gz", whole[: len(whole) // 2])
    corrupt = whole[:12] + bytes(b ^ 0xFF for b in whole[12:30]) + whole[30:]
    assert "gzip stream" in _bad(tmp_path / "bad.gz", corrupt)


def test_idx_folder_with_label_and_image_counts_that_differ(tmp_path):
    arrays = image_set(20, 10)
    arrays["test_labels"] = arrays["test_labels"][:9]
    folder = write_idx_dir(tmp_path / "d", arrays)
    ds = norm({"kind": "idx", "path": str(folder)}, "iid")["dataset"]
    with pytest.raises(DataError) as err:
        obtain(ds, tmp_path / "cache")
    msg = str(err.value)
    assert msg.startswith(str(folder / "t10k-labels-idx1-ubyte.gz")) and "\n" not in msg
    assert "9 labels, but" in msg and "holds 10 images" in msg


def test_idx_folder_missing_a_file_names_it(tmp_path):
    folder = write_idx_dir(tmp_path / "d", image_set(20, 10))
    (folder / "t10k-images-idx3-ubyte.gz").unlink()
    ds = norm({"kind": "idx", "path": str(folder)}, "iid")["dataset"]
    with pytest.raises(DataError, match=r"no t10k-images-idx3-ubyte \(nor t10k-images-idx3-ubyte"):
        obtain(ds, tmp_path / "cache")


def test_idx_folder_prepared_with_label_cycle_has_per_client_test_rows(tmp_path):
    arrays = image_set(400, 200, side=2)
    folder = write_idx_dir(tmp_path / "digits", arrays, gz=False)
    cfg = norm(
        {"kind": "idx", "path": str(folder)},
        {
            "kind": "label_cycle",
            "clients": 4,
            "labels_per_client": 3,
            "train_per_label": 5,
            "test_per_label": 4,
            "scope": "per_client",
        },
    )
    assert cfg["dataset"]["name"] == "digits"
    out = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path / "cache")
    d = out.data
    assert d.task == "multiclass" and d.n_classes == 10 and not d.is_sparse
    assert d.X.shape == (4 * 3 * 5, 4) and d.X.dtype == np.float64
    assert d.X_test.shape == (4 * 3 * 4, 4)
    assert d.client_ptr.tolist() == [0, 15, 30, 45, 60]
    assert d.test_ptr.tolist() == [0, 12, 24, 36, 48]
    for u in range(4):
        mine = {(u + j) % 10 for j in range(3)}
        assert set(d.y[d.client_ptr[u] : d.client_ptr[u + 1]].astype(int)) == mine
        assert set(d.y_test[d.test_ptr[u] : d.test_ptr[u + 1]].astype(int)) == mine
    assert 0 <= d.X.min() and d.X.max() <= 1  # pixels / 255
    # each client row is one of the training file's images, scaled
    raw = arrays["train_images"].reshape(400, 4) / 255.0
    assert all((raw == row).all(axis=1).any() for row in d.X[:5])
    assert not (tmp_path / "cache").exists()  # a local folder is read, not cached


def test_idx_with_other_partitions_keeps_the_test_file_as_one_global_test_set(tmp_path):
    folder = write_idx_dir(tmp_path / "d", image_set(300, 80))
    cfg = norm({"kind": "idx", "path": str(folder)}, {"kind": "dirichlet", "clients": 5})
    d = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path / "cache").data
    assert d.n_samples == 300 and d.test_ptr.tolist() == [0, 80]
    cfg = norm(
        {"kind": "idx", "path": str(folder)}, {"kind": "iid", "clients": 5, "test_fraction": 0.2}
    )
    d = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path / "cache").data  # own split
    assert d.n_samples == 240 and d.y_test.shape == (60,) and len(d.test_ptr) == 6


def test_a_compressed_local_idx_file_is_decompressed_once_and_again_when_it_changes(
    tmp_path, monkeypatch
):
    arrays = image_set(50, 20, side=2)
    folder = write_idx_dir(tmp_path / "d", arrays)
    ds = norm({"kind": "idx", "path": str(folder)}, "iid")["dataset"]
    cache = tmp_path / "cache"
    first, source = obtain(ds, cache)
    kept = sorted((cache / "idx-local").rglob("*.npy"))
    assert sorted(p.name for p in kept) == sorted(
        f"{f['sha256']}.npy" for f in source["files"].values()
    )

    def no_gunzip(*_args):
        raise AssertionError("decompressed again")

    monkeypatch.setattr(gzip, "decompress", no_gunzip)
    again, source_again = obtain(ds, cache)  # from the kept copies
    assert source_again == source
    for name in ("X", "y", "X_test", "y_test"):
        assert np.array_equal(getattr(again, name), getattr(first, name))
    assert np.array_equal(again.X, arrays["train_images"].reshape(50, 4))
    monkeypatch.undo()
    # an edited file has another SHA-256: it is parsed again, never its stale copy
    changed = dict(arrays, train_images=255 - arrays["train_images"])
    write_idx_dir(folder, changed)
    edited, source = obtain(ds, cache)
    assert np.array_equal(edited.X, changed["train_images"].reshape(50, 4))
    assert len(list((cache / "idx-local").rglob("*.npy"))) == 5
    # an unreadable copy is parsed and written again
    copy = (
        cache / "idx-local" / "images" / f"{source['files'][STEMS['train_images']]['sha256']}.npy"
    )
    copy.write_bytes(b"not a .npy file")
    repaired, _ = obtain(ds, cache)
    assert np.array_equal(repaired.X, edited.X)
    assert np.array_equal(np.load(copy), edited.X)


def test_an_unwritable_cache_only_costs_the_parse(tmp_path):
    folder = write_idx_dir(tmp_path / "d", image_set(30, 10, side=2))
    ds = norm({"kind": "idx", "path": str(folder)}, "iid")["dataset"]
    (tmp_path / "cache").write_text("a file where the cache folder would be")
    images, _ = obtain(ds, tmp_path / "cache")
    assert images.X.shape == (30, 4)


def test_loading_image_data_for_a_run_imports_no_pandas(tmp_path):
    """pandas (0.2 s to import) is for the partition's statistics, which a run never reads."""
    folder = write_idx_dir(tmp_path / "d", image_set(40, 10, side=2))
    cfg = run_cfg({"kind": "idx", "path": str(folder)}, {"kind": "iid", "clients": 4})
    code = (
        "import sys\n"
        "from fedsparse.training.config import normalize_run_config\n"
        "from fedsparse.training.experiment import load_dataset\n"
        f"cfg = normalize_run_config({cfg!r})\n"
        f"data = load_dataset(cfg['dataset'], 'softmax', cfg['partition'], {str(tmp_path)!r})\n"
        "assert data.n_samples == 40, data.n_samples\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- downloads


@pytest.fixture
def srv():
    with Loopback() as s:
        yield s


def serve_idx(srv: Loopback, base: str, arrays: dict) -> None:
    for key, stem in STEMS.items():
        srv.serve(f"{base}{stem}.gz", gzip.compress(idx_bytes(arrays[key])))


def mnist_sized(side: int = 1) -> dict:
    """The registry's MNIST counts (60,000 / 10,000) with tiny images."""
    return image_set(60_000, 10_000, side=side)


def test_idx_source_downloads_from_a_mirror_resumes_verifies_and_caches(srv, tmp_path):
    arrays = mnist_sized()
    serve_idx(srv, "/m/", arrays)
    srv.state.cut["/m/train-images-idx3-ubyte.gz"] = 1  # cut half-way once: resumed
    ds = norm({"kind": "idx", "source": "mnist", "mirror": srv.url("/m/")}, "iid")["dataset"]
    images, source = obtain(ds, tmp_path, FAST)
    assert images.X.shape == (60_000, 1) and images.X_test.shape == (10_000, 1)
    assert np.array_equal(images.y, arrays["train_labels"])
    ranged = [r for p, r in srv.state.requests if p == "/m/train-images-idx3-ubyte.gz"]
    assert ranged[0] is None and ranged[1].startswith("bytes=")
    for stem in STEMS.values():
        assert (tmp_path / "mnist" / f"{stem}.gz").is_file()
        assert (tmp_path / "mnist" / f"{stem}.gz.npy").is_file()  # converted once
        assert (tmp_path / "mnist" / f"{stem}.gz.json").is_file()  # first download recorded
    assert len(source["files"]["train-images-idx3-ubyte"]["sha256"]) == 64
    n = len(srv.state.requests)
    again, _ = obtain(ds, tmp_path, FAST)
    assert len(srv.state.requests) == n  # read from the cache
    assert np.array_equal(again.X, images.X)
    # where the files come from is not part of the run's identity
    site = norm({"kind": "idx", "source": "mnist"}, "iid")
    assert run_id(site) == run_id(norm({**ds}, "iid"))


def test_a_bad_idx_download_is_one_line_and_never_used(srv, tmp_path):
    arrays = mnist_sized()
    serve_idx(srv, "/m/", arrays)
    srv.state.files["/m/t10k-labels-idx1-ubyte.gz"] = gzip.compress(
        idx_bytes(arrays["test_labels"][:-1])
    )
    ds = norm({"kind": "idx", "source": "mnist", "mirror": srv.url("/m/")}, "iid")["dataset"]
    with pytest.raises(DataError) as err:
        obtain(ds, tmp_path, FAST)
    msg = str(err.value)
    assert msg == f"{srv.url('/m/t10k-labels-idx1-ubyte.gz')}: 9999 labels, expected 10000"
    assert not (tmp_path / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()
    assert not list((tmp_path / "mnist").glob("*.part"))


def test_a_404_is_one_line(srv, tmp_path):
    ds = norm({"kind": "idx", "source": "mnist", "mirror": srv.url("/none/")}, "iid")["dataset"]
    with pytest.raises(DataError, match=r"/none/train-images-idx3-ubyte.gz: HTTP 404"):
        obtain(ds, tmp_path, FAST)


def test_fashion_mnist_uses_the_system_folder_when_there_is_one(srv, tmp_path, monkeypatch):
    local = write_idx_dir(tmp_path / "system", image_set(60_000, 10_000, side=1, seed=1))
    entry = dataclasses.replace(registry.IMAGE_SETS["fashion-mnist"], local=(str(local),))
    monkeypatch.setitem(registry.IMAGE_SETS, "fashion-mnist", entry)
    ds = norm({"kind": "idx", "source": "fashion-mnist"}, "iid")["dataset"]
    images, source = obtain(ds, tmp_path / "cache")  # no server needed
    assert source["origin"] == str(local) and images.X.shape == (60_000, 1)
    # nothing downloaded: the cache holds only the four files decompressed
    kept = sorted(
        p.relative_to(tmp_path / "cache").parent for p in (tmp_path / "cache").rglob("*.*")
    )
    assert kept == [Path("idx-local/images")] * 2 + [Path("idx-local/labels")] * 2
    # an explicit mirror wins over the system folder
    serve_idx(srv, "/f/", image_set(60_000, 10_000, side=1, seed=2))
    ds = norm({"kind": "idx", "source": "fashion-mnist", "mirror": srv.url("/f/")}, "iid")
    _, source = obtain(ds["dataset"], tmp_path / "cache", FAST)
    assert source["origin"] == srv.url("/f/") and len(srv.state.requests) == 4


def test_offline_path_of_a_source_is_checked_against_the_registry_counts(tmp_path):
    folder = write_idx_dir(tmp_path / "d", image_set(100, 10))
    ds = norm({"kind": "idx", "source": "mnist", "path": str(folder)}, "iid")["dataset"]
    with pytest.raises(DataError, match=r"train-images-idx3-ubyte.gz: 100 images, expected 60000"):
        obtain(ds, tmp_path / "cache")


# ---------------------------------------------------------------------------- LEAF


def write_leaf(
    root: Path, users: dict[str, tuple[int, int]], d: int = 4, seed: int = 0, files: int = 2
) -> dict:
    """A LEAF folder: users -> (train rows, test rows), spread over ``files`` files per split."""
    rng = np.random.default_rng(seed)
    names = list(users)
    truth = {}
    for split, k in (("train", 0), ("test", 1)):
        (root / split).mkdir(parents=True, exist_ok=True)
        for f in range(files):
            part = names[f::files]
            doc = {"users": part, "num_samples": [], "user_data": {}}
            for u in part:
                n = users[u][k]
                x = rng.random((n, d)).round(4)
                y = rng.integers(0, 5, n)
                truth[(split, u)] = (x, y)
                doc["num_samples"].append(n)
                doc["user_data"][u] = {"x": x.tolist(), "y": y.tolist()}
            (root / split / f"all_data_{f}_niid_{split}.json").write_text(json.dumps(doc))
    return truth


def test_leaf_folder_each_writer_a_client_with_its_own_test_rows(tmp_path):
    root = tmp_path / "femnist"
    truth = write_leaf(root, {"f0": (5, 2), "f1": (3, 1), "f2": (4, 0)})
    cfg = norm({"kind": "leaf", "path": str(root)}, None)
    assert cfg["partition"] == "natural" and cfg["dataset"]["name"] == "femnist"
    assert cfg["dataset"]["preprocess"] == {"scale": 1.0, "standardize": False}
    d = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path / "cache").data
    # users in the order of the (sorted) training files: file 0 holds f0, f2; file 1 f1
    order = ["f0", "f2", "f1"]
    assert d.client_ptr.tolist() == [0, 5, 9, 12]
    assert d.test_ptr.tolist() == [0, 2, 2, 3]  # f2 has no test rows
    assert np.allclose(d.X, np.concatenate([truth[("train", u)][0] for u in order]))
    assert np.array_equal(d.y_test, np.concatenate([truth[("test", u)][1] for u in order]))
    assert d.n_features == 4 and d.task == "multiclass"


def test_leaf_folder_is_parsed_once_and_again_when_a_file_changes(tmp_path, monkeypatch):
    root = tmp_path / "leaf"
    write_leaf(root, {"a": (3, 1), "b": (2, 2)})
    first = load_leaf_dir(root, tmp_path / "cache")
    calls = []
    real = leaf._parse
    monkeypatch.setattr(leaf, "_parse", lambda *a: calls.append(1) or real(*a))
    again = load_leaf_dir(root, tmp_path / "cache")
    assert calls == [] and np.array_equal(again.X, first.X) and again.users == first.users
    write_leaf(root, {"a": (4, 1), "b": (2, 2)}, seed=3)
    changed = load_leaf_dir(root, tmp_path / "cache")
    assert calls == [1] and changed.client_ptr.tolist() == [0, 4, 6]


def _corrupt(doc: dict, how: str) -> dict | str:
    u = doc["users"][0]
    if how == "json":
        return "{not json"
    if how == "missing":
        del doc["user_data"]
    elif how == "count":
        doc["num_samples"][0] += 1
    elif how == "ragged":
        doc["user_data"][u]["x"][0] = doc["user_data"][u]["x"][0][:-1]
    elif how == "xy":
        doc["user_data"][u]["y"].append(1)
    elif how == "label":
        doc["user_data"][u]["y"][0] = 1.5
    elif how == "text":
        doc["user_data"][u]["x"][0][0] = "a"
    elif how == "users":
        doc["num_samples"].append(3)
    elif how == "extra":
        doc["user_data"]["ghost"] = {"x": [], "y": []}
    return doc


@pytest.mark.parametrize(
    "how, needle",
    [
        ("json", "not a valid JSON file"),
        ("missing", "missing key 'user_data'"),
        ("count", "'num_samples' says 4, 'x' has 3 rows"),
        ("ragged", "rows must be lists of numbers of one length"),
        ("xy", "'x' has 3 rows, 'y' 4 labels"),
        ("label", "labels in 'y' must be integers >= 0"),
        ("text", "rows must be lists of numbers"),
        ("users", "'num_samples' has 3 entries, 'users' 2"),
        ("extra", "'user_data' holds user 'ghost', not in 'users'"),
    ],
)
def test_malformed_leaf_file_is_one_line_naming_it(tmp_path, how, needle):
    root = tmp_path / "leaf"
    write_leaf(root, {"a": (3, 1), "b": (3, 1), "c": (2, 1), "d": (2, 1)})
    bad = root / "train" / "all_data_1_niid_train.json"
    doc = _corrupt(json.loads(bad.read_text()), how)
    bad.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(DataError) as err:
        load_leaf_dir(root, tmp_path / "cache")
    msg = str(err.value)
    assert msg.startswith(str(bad)) and needle in msg and "\n" not in msg, msg


def test_leaf_test_user_without_training_rows_and_missing_split(tmp_path):
    root = tmp_path / "leaf"
    write_leaf(root, {"a": (3, 1), "b": (3, 1)})
    doc = json.loads((root / "test" / "all_data_0_niid_test.json").read_text())
    doc["users"].append("z")
    doc["num_samples"].append(1)
    doc["user_data"]["z"] = {"x": [[0.0] * 4], "y": [1]}
    (root / "test" / "all_data_0_niid_test.json").write_text(json.dumps(doc))
    with pytest.raises(DataError, match="user 'z' has test rows but no training rows"):
        load_leaf_dir(root, tmp_path / "cache")
    for f in (root / "test").iterdir():
        f.unlink()
    with pytest.raises(DataError, match=r"leaf/test: no \*.json files"):
        load_leaf_dir(root, tmp_path / "cache")


def test_leaf_rows_can_be_repartitioned_with_the_test_files_as_the_test_set(tmp_path):
    root = tmp_path / "leaf"
    write_leaf(root, {f"w{i}": (20, 5) for i in range(6)})
    cfg = norm({"kind": "leaf", "path": str(root)}, {"kind": "iid", "clients": 3})
    d = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path / "cache").data
    assert d.n_clients == 3 and d.n_samples == 120 and d.test_ptr.tolist() == [0, 30]


# ---------------------------------------------------------------------------- preprocess


def test_preprocess_scales_and_standardizes_with_training_statistics_only():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (50, 6)).astype(np.uint8)
    X[:, 2] = 7  # a constant feature
    T = rng.integers(0, 256, (20, 6)).astype(np.uint8)
    A, B = preprocess(X, T, {"scale": 255.0, "standardize": False})
    assert A.dtype == np.float64 and np.allclose(A, X / 255) and np.allclose(B, T / 255)
    A, B = preprocess(X, T, {"scale": 255.0, "standardize": True})
    Xs = X / 255
    mean, std = Xs.mean(axis=0), Xs.std(axis=0)
    std[2] = 1.0
    assert np.allclose(A, (Xs - mean) / std) and np.allclose(B, (T / 255 - mean) / std)
    assert np.allclose(A.mean(axis=0), 0) and np.allclose(np.delete(A.std(axis=0), 2), 1)
    assert np.all(A[:, 2] == 0)  # only centred
    assert not np.allclose(B.mean(axis=0), 0)  # test rows do not set the statistics


@pytest.mark.parametrize("standardize", [False, True])
def test_float32_rows_are_the_float64_values_rounded_once(standardize, monkeypatch):
    """A float32 network's rows: float32(x) of each float64 value (the bits its kernels
    converted each gathered row to), scaled a few rows at a time without a float64 copy."""
    monkeypatch.setattr("fedsparse.data.preprocess._CHUNK_ROWS", 7)  # chunks and a remainder
    rng = np.random.default_rng(1)
    X = rng.integers(0, 256, (50, 6)).astype(np.uint8)
    T = rng.integers(0, 256, (20, 6)).astype(np.uint8)
    spec = {"scale": 255.0, "standardize": standardize}
    A64, B64 = preprocess(X, T, spec)
    A32, B32 = preprocess(X, T, spec, np.float32)
    assert A32.dtype == B32.dtype == np.float32 and A32.flags.c_contiguous
    assert np.array_equal(A32.view(np.uint32), A64.astype(np.float32).view(np.uint32))
    assert np.array_equal(B32.view(np.uint32), B64.astype(np.float32).view(np.uint32))
    assert preprocess(X, None, spec, np.float32)[1] is None


def test_a_float32_network_reads_float32_rows_of_the_same_values(tmp_path):
    """load_dataset(dtype=float32) and FederatedData.in_dtype give the same rows; a problem
    holds the rows in its network's dtype and a linear model's in float64."""
    from fedsparse.objective.problem import Problem
    from fedsparse.training.experiment import load_dataset

    folder = write_idx_dir(tmp_path / "d", image_set(60, 20))
    cfg = norm({"kind": "idx", "path": str(folder)}, {"kind": "iid", "clients": 3})
    d64 = load_dataset(cfg["dataset"], "softmax", cfg["partition"])
    d32 = load_dataset(cfg["dataset"], "softmax", cfg["partition"], dtype="float32")
    assert d64.X.dtype == np.float64 and d32.X.dtype == d32.X_test.dtype == np.float32
    assert np.array_equal(d32.X, d64.X.astype(np.float32))
    assert np.array_equal(d32.X_test, d64.X_test.astype(np.float32))
    cast = d64.in_dtype(np.float32)
    assert cast is d64.in_dtype("float32")  # built once
    assert np.array_equal(cast.X, d32.X) and not cast.X.flags.writeable
    assert cast.in_dtype(np.float32) is cast and d64.in_dtype(np.float64) is d64
    assert np.array_equal(cast.in_dtype(np.float64).X, d32.X.astype(np.float64))
    mlp = {"kind": "mlp", "hidden": [4], "activation": "relu", "init": {"kind": "glorot"}}
    for data in (d64, d32):
        p32 = Problem(data, "softmax", 0.0, model={**mlp, "dtype": "float32"})
        assert p32.data.kernel_X.dtype == p32.data.kernel_X_test.dtype == np.float32
        assert Problem(data, "softmax", 0.0).data.kernel_X.dtype == np.float64
        assert Problem(data, "softmax", 0.0, model=mlp).data.kernel_X.dtype == np.float64
    with pytest.raises(ValueError, match="float64 or float32, not float16"):
        d64.in_dtype(np.float16)


def test_standardize_in_a_prepared_idx_set_uses_the_training_rows(tmp_path):
    folder = write_idx_dir(tmp_path / "d", image_set(200, 50))
    ds = {"kind": "idx", "path": str(folder), "preprocess": {"standardize": True}}
    cfg = norm(
        ds,
        {
            "kind": "label_cycle",
            "clients": 3,
            "labels_per_client": 2,
            "train_per_label": 4,
            "test_per_label": 2,
        },
    )
    d = prepare(cfg["dataset"], cfg["partition"]).data
    assert np.allclose(d.X.mean(axis=0), 0)
    assert np.allclose(d.X.std(axis=0)[d.X.std(axis=0) > 0], 1)


@pytest.mark.parametrize(
    "ds, needle",
    [
        ({"kind": "idx"}, "dataset.source: kind idx needs a source"),
        ({"kind": "idx", "source": "emnist"}, "unknown image data set 'emnist'"),
        (
            {"kind": "idx", "source": "mnist", "preprocess": {"scale": 0}},
            "dataset.preprocess.scale",
        ),
        (
            {"kind": "idx", "source": "mnist", "preprocess": {"centre": 1}},
            "dataset.preprocess.centre",
        ),
        (
            {"kind": "idx", "source": "mnist", "preprocess": {"standardize": "yes"}},
            "dataset.preprocess.standardize",
        ),
        ({"kind": "idx", "path": "/x", "mirror": "http://h/"}, "dataset.mirror"),
        ({"kind": "idx", "source": "mnist", "task": "binary"}, "dataset.task"),
        ({"kind": "leaf"}, "dataset.path: required for kind leaf"),
        ({"kind": "leaf", "path": "/x", "source": "mnist"}, "dataset.source: unknown key"),
    ],
)
def test_bad_image_dataset_configs_name_the_key(ds, needle):
    with pytest.raises(ConfigError, match=needle):
        norm(ds, None)


def test_image_configs_normalise_again_to_themselves_and_default_to_softmax():
    cfg = norm({"kind": "idx", "source": "fashion-mnist"}, {"kind": "label_cycle"})
    assert normalize_run_config(cfg | {"sweep": "single"}) == cfg
    assert cfg["partition"] == {
        "kind": "label_cycle",
        "clients": 20,
        "labels_per_client": 5,
        "train_per_label": 200,
        "test_per_label": 800,
        "scope": "per_client",
        "seed": 0,
    }
    assert partition_label(cfg["partition"]) == "label_cycle-l5-tr200-te800-per_client"
    with pytest.raises(ConfigError, match="idx data has no clients of its own"):
        norm({"kind": "idx", "source": "mnist"}, "natural")
    with pytest.raises(ConfigError, match="model.loss: logistic does not fit multiclass"):
        normalize_run_config(
            run_cfg({"kind": "idx", "source": "mnist"}, "iid") | {"model": {"loss": "logistic"}}
        )


def test_a_sweep_takes_idx_data_and_the_papers_partitions(tmp_path):
    folder = write_idx_dir(tmp_path / "d", image_set(200, 50))
    sweep = {
        "sweep": "img",
        "rounds": 2,
        "datasets": {
            "fm": {
                "data": {"kind": "idx", "source": "fashion-mnist"},
                "partition": {"kind": "label_cycle", "scope": "total"},
            },
            "mine": {"data": {"kind": "idx", "path": str(folder)}, "partition": "one_class"},
        },
        "algorithms": ["fedht"],
        "grid": {"stepsize": [0.1], "sparsity": [10]},
    }
    plan = plan_sweep(sweep)
    fm = plan.datasets["fm"]
    assert fm["model"]["loss"] == "softmax" and fm["data"]["name"] == "fm"
    assert fm["partition"]["scope"] == "total" and len(plan.runs) == 2
    import jsonschema

    schema = yaml.safe_load(
        (Path(__file__).parents[1] / "workflow/schemas/sweep.schema.yaml").read_text()
    )
    jsonschema.validate(sweep, schema)
    bad = {
        **sweep,
        "datasets": {
            "x": {
                "data": {"kind": "idx", "source": "mnist"},
                "partition": {"kind": "label_cycle", "scope": "all"},
            }
        },
    }
    with pytest.raises(ConfigError, match=r"datasets.x.partition.scope: must be per_client or"):
        plan_sweep(bad)


# ---------------------------------------------------------------------------- runs and the CLI


def test_a_softmax_run_on_idx_data_under_label_cycle(tmp_path):
    folder = write_idx_dir(tmp_path / "d", image_set(300, 100, classes=4, side=3))
    trace = fedsparse.run(
        run_cfg(
            {"kind": "idx", "path": str(folder)},
            {
                "kind": "label_cycle",
                "clients": 4,
                "labels_per_client": 2,
                "train_per_label": 10,
                "test_per_label": 5,
            },
        )
    )
    assert len(trace) == 3 and trace["partition"].iloc[0] == "label_cycle-l2-tr10-te5-per_client"
    assert trace["test_accuracy"].notna().all()


def _cli(tmp_path, capsys, cfg: dict) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    output = tmp_path / "out.parquet"
    code = cli.main(["run", str(path), "-o", str(output)])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fedsparse: error: "), captured.err
    assert captured.out == "" and not output.exists()
    return lines[0]


def test_cli_bad_image_input_exits_2_with_one_line_and_writes_nothing(
    tmp_path, capsys, monkeypatch
):
    arrays = image_set(100, 40)
    good = write_idx_dir(tmp_path / "good", arrays)
    # a partition asking for more rows than exist
    line = _cli(
        tmp_path,
        capsys,
        run_cfg(
            {"kind": "idx", "path": str(good)},
            {
                "kind": "label_cycle",
                "clients": 10,
                "labels_per_client": 5,
                "train_per_label": 5,
                "test_per_label": 1,
                "scope": "per_client",
            },
        ),
    )
    assert "partition: label 0 needs 25 training rows, the data has 10 (short by 15)" in line
    # an IDX file with a wrong magic number
    bad = write_idx_dir(tmp_path / "bad", arrays)
    (bad / "train-labels-idx1-ubyte.gz").write_bytes(
        gzip.compress(idx_bytes(arrays["train_images"]))
    )
    line = _cli(tmp_path, capsys, run_cfg({"kind": "idx", "path": str(bad)}, "iid"))
    assert str(bad / "train-labels-idx1-ubyte.gz") in line and "magic number 0x00000803" in line
    # a malformed LEAF file
    root = tmp_path / "leaf"
    write_leaf(root, {"a": (3, 1), "b": (3, 1)})
    broken = root / "test" / "all_data_0_niid_test.json"
    broken.write_text('{"users": ["a"], "num_samples": [1]}')
    monkeypatch.setenv("FEDSPARSE_DATA_CACHE", str(tmp_path / "cache"))
    line = _cli(tmp_path, capsys, run_cfg({"kind": "leaf", "path": str(root)}, "natural"))
    assert f"{broken}: missing key 'user_data'" in line
    # a config error
    line = _cli(
        tmp_path,
        capsys,
        run_cfg({"kind": "idx", "path": str(good)}, {"kind": "one_class", "clients": 0}),
    )
    assert "partition.clients: must be >= 1" in line


# ---------------------------------------------------------------------------- real Fashion-MNIST


@pytest.mark.skipif(
    find_files(DEBIAN_FMNIST) is None,
    reason="Debian's dataset-fashion-mnist is not installed (/usr/share/datasets/fashion-mnist)",
)
def test_real_fashion_mnist_from_the_debian_package(tmp_path):
    ds = {"kind": "idx", "source": "fashion-mnist"}
    cfg = norm(ds, {"kind": "label_cycle", "scope": "total", "seed": 3})
    images, source = obtain(cfg["dataset"], tmp_path / "cache")
    assert source["origin"] == str(DEBIAN_FMNIST)
    assert images.X.shape == (60_000, 784) and images.X_test.shape == (10_000, 784)
    assert np.bincount(images.y.astype(int)).tolist() == [6000] * 10
    assert np.bincount(images.y_test.astype(int)).tolist() == [1000] * 10
    d = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path / "cache").data
    # scope total: 200 training / 800 test rows per label, split among its 10 clients
    assert d.n_features == 784 and d.n_clients == 20
    assert np.diff(d.client_ptr).tolist() == [100] * 20
    assert np.diff(d.test_ptr).tolist() == [400] * 20
    assert 0.0 <= d.X.min() and d.X.max() <= 1.0
    for u in range(20):
        labels = d.y[d.client_ptr[u] : d.client_ptr[u + 1]].astype(int)
        assert (
            np.bincount(labels, minlength=10)[[(u + j) % 10 for j in range(5)]].tolist() == [20] * 5
        )
    # per client, the papers' setting 1 needs 8,000 test images of a label; there are 1,000
    per_client = norm(ds, {"kind": "label_cycle", "scope": "per_client"})
    with pytest.raises(
        DataError,
        match=r"label 0 needs 8000 test rows, the test data has 1000 "
        r"\(short by 7000\)",
    ):
        prepare(per_client["dataset"], per_client["partition"])


@pytest.mark.skipif(
    find_files(DEBIAN_FMNIST) is None,
    reason="Debian's dataset-fashion-mnist is not installed (/usr/share/datasets/fashion-mnist)",
)
def test_real_fashion_mnist_pooled_in_pfedmes_reading(tmp_path):
    # pFedMe's generator: client u holds labels u, u+1; train and test files pooled; here
    # 600 training and 200 test images of each label per client (the sizes)
    ds = {"kind": "idx", "source": "fashion-mnist"}
    part = {
        "kind": "label_cycle",
        "clients": 20,
        "labels_per_client": 2,
        "train_per_label": 600,
        "test_per_label": 200,
        "scope": "per_client",
        "test_pool": "pooled",
    }
    cfg = norm(ds, part)
    assert partition_label(cfg["partition"]) == "label_cycle-l2-tr600-te200-per_client+pooled"
    images, _ = obtain(cfg["dataset"], tmp_path / "cache")
    out = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path / "cache")
    d, res = out.data, out.partition
    assert np.diff(d.client_ptr).tolist() == [1200] * 20
    assert np.diff(d.test_ptr).tolist() == [400] * 20
    pool_X = np.concatenate([images.X, images.X_test])
    pool_y = np.concatenate([images.y, images.y_test])
    for u in range(20):
        mine = [u % 10, (u + 1) % 10]
        for rows, n in ((res.clients[u], 600), (res.test[u], 200)):
            assert np.bincount(pool_y[rows].astype(int), minlength=10)[mine].tolist() == [n, n]
            assert np.unique(pool_y[rows]).size == 2
    rows = np.concatenate([*res.clients, *res.test])
    assert len(np.unique(rows)) == len(rows) == 32_000
    test = res.test_order
    assert (test >= 60_000).any() and (test < 60_000).any()  # test rows from both files
    # the prepared rows are the pooled images they index, scaled to [0, 1]
    assert np.array_equal(d.X_test, pool_X[test] / 255.0)
    assert np.array_equal(d.y_test, pool_y[test])
    # a label has 7,000 images in the pool; 4 clients x (1,500 + 300) would need 7,200
    big = norm(ds, {**part, "train_per_label": 1500, "test_per_label": 300})
    with pytest.raises(DataError) as err:
        prepare(big["dataset"], big["partition"], cache=tmp_path / "cache")
    assert str(err.value).startswith(
        "partition: label 0 needs 6000 training + 1200 test rows (train_per_label, "
        "test_per_label), the pooled train and test data has 7000 (short by 200)"
    )


def test_the_default_test_pool_leaves_run_ids_unchanged():
    # fmnist-s1's pFedMe run of config/sfedhp-quick.yaml, its id computed before test_pool
    raw = {
        "dataset": {"kind": "idx", "source": "fashion-mnist"},
        "partition": {
            "kind": "label_cycle",
            "clients": 20,
            "labels_per_client": 5,
            "train_per_label": 200,
            "test_per_label": 800,
            "scope": "total",
        },
        "model": {
            "kind": "mlp",
            "loss": "softmax",
            "l2": 1.0e-4,
            "hidden": [100],
            "activation": "relu",
            "init": {"kind": "glorot", "seed": 0},
        },
        "algorithm": "pfedme",
        "params": {
            "lambda": 20,
            "local_steps": 20,
            "inner_steps": 5,
            "stepsize": 0.05,
            "inner_stepsize": 0.05,
            "batch_size": 20,
        },
        "rounds": 100,
        "eval_every": 5,
        "seed": 0,
    }
    assert run_id(normalize_run_config(raw)) == "c470c473546ea4ce"
    split = {**raw, "partition": {**raw["partition"], "test_pool": "split"}}
    assert run_id(normalize_run_config(split)) == "c470c473546ea4ce"
    pooled = {**raw, "partition": {**raw["partition"], "test_pool": "pooled"}}
    assert run_id(normalize_run_config(pooled)) != "c470c473546ea4ce"


def test_cli_pooled_partition_errors_are_one_line(tmp_path, capsys):
    good = write_idx_dir(tmp_path / "good", image_set(100, 40))  # 14 images of a label
    part = {
        "kind": "label_cycle",
        "clients": 10,
        "labels_per_client": 2,
        "train_per_label": 5,
        "test_per_label": 3,
        "test_pool": "pooled",
    }
    line = _cli(tmp_path, capsys, run_cfg({"kind": "idx", "path": str(good)}, part))
    assert line.endswith(
        "partition: label 0 needs 10 training + 6 test rows (train_per_label, "
        "test_per_label), the pooled train and test data has 14 (short by 2); "
        "and 9 more shortfalls"
    )
    line = _cli(
        tmp_path,
        capsys,
        run_cfg({"kind": "idx", "path": str(good)}, {**part, "test_pool": "mixed"}),
    )
    assert line.endswith("partition.test_pool: must be split or pooled, got 'mixed'")


def test_per_client_test_rows_survive_the_data_store(tmp_path):
    from fedsparse.data import load_dataset_dir, save_dataset

    folder = write_idx_dir(tmp_path / "d", image_set(200, 100))
    cfg = norm(
        {"kind": "idx", "path": str(folder)},
        {
            "kind": "label_cycle",
            "clients": 3,
            "labels_per_client": 2,
            "train_per_label": 4,
            "test_per_label": 3,
        },
    )
    d = prepare(cfg["dataset"], cfg["partition"]).data
    save_dataset(d, tmp_path / "store")
    back = load_dataset_dir(tmp_path / "store")
    assert back.test_ptr.tolist() == d.test_ptr.tolist() == [0, 6, 12, 18]
    assert np.array_equal(back.X_test, d.X_test) and np.array_equal(back.X, d.X)


# ---------------------------------------------------------------------------- sFedHP's readings


@pytest.mark.parametrize("name", ["quick", "paper"])
def test_sfedhp_configs_hold_both_readings_told_apart_by_their_partitions(name):
    # the report names a run's reading from these facts alone: 5 labels with the test file
    # kept apart is the paper's text, 2 labels from the pooled files is pFedMe's generator
    root = Path(__file__).resolve().parents[1]
    sweep = yaml.safe_load((root / "config" / f"sfedhp-{name}.yaml").read_text())
    runs = plan_sweep(sweep).runs
    readings: dict[str, set] = {"paper_text": set(), "authors_code": set()}
    for r in runs:
        p = r.config["partition"]
        assert p["kind"] == "label_cycle" and p["clients"] == 20
        if p["labels_per_client"] == 5 and "test_pool" not in p:
            readings["paper_text"].add(r.config["dataset"]["name"])
        else:
            assert (p["labels_per_client"], p.get("test_pool")) == (2, "pooled")
            assert (p["train_per_label"], p["test_per_label"], p["scope"]) == (
                600,
                200,
                "per_client",
            )
            readings["authors_code"].add(r.config["dataset"]["name"])
    sources = {"quick": {"fmnist"}, "paper": {"mnist", "fmnist"}}[name]
    assert readings["authors_code"] == {f"{s}-ac" for s in sources}
    assert readings["paper_text"] == {f"{s}-s{k}" for s in sources for k in (1, 2)}
    anchors = {
        (r.config["dataset"]["name"], r.config["params"]["anchor"])
        for r in runs
        if r.config["algorithm"] == "sfedhp"
    }
    for ds in readings["authors_code"]:
        assert {a for d, a in anchors if d == ds} == {"per_client", "edge_avg"}
    for ds in readings["paper_text"]:  # unchanged runs: Algorithm 1's anchor only
        assert {a for d, a in anchors if d == ds} == {"edge_avg"}
    text = (root / "config" / f"sfedhp-{name}.yaml").read_text()
    assert "reading paper_text" in text and "reading authors_code" in text
