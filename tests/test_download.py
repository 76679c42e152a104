"""Downloads, caching, verification and parsing of real data, against a loopback server only."""

from __future__ import annotations

import bz2
import json
import logging
import lzma
import os

import numpy as np
import pytest
from _loopback import Loopback

from fedsparse import cli
from fedsparse.data.convert import parse_svmlight
from fedsparse.data.download import cache_dir, fetch, sha256_of
from fedsparse.data.prepare import prepare
from fedsparse.data.svmlight import obtain
from fedsparse.errors import ConfigError, DataError
from fedsparse.training.config import normalize_run_config, run_id

FAST = {"retries": 3, "backoff": 0.01, "timeout": 5.0}


@pytest.fixture
def srv():
    with Loopback() as s:
        yield s


def svm_text(rows: int = 60, d: int = 30, seed: int = 0, classes: int = 2) -> bytes:
    """A random svmlight file (1-based, sorted indices) as bytes."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(rows):
        k = int(rng.integers(1, 6))
        idx = np.sort(rng.choice(d, k, replace=False)) + 1
        label = (i % classes) if classes > 2 else (1 if i % 2 else -1)
        feats = " ".join(f"{j}:{v:.5g}" for j, v in zip(idx, rng.standard_normal(k), strict=True))
        lines.append(f"{label} {feats}")
    return ("\n".join(lines) + "\n").encode()


def test_cut_download_is_resumed_with_a_range_request(srv, tmp_path, caplog):
    body = os.urandom(300_000)
    url = srv.serve("/blob.bin", body)
    srv.state.cut["/blob.bin"] = 1  # the first transfer stops half-way
    dest = tmp_path / "blob.bin"
    with caplog.at_level(logging.INFO, logger="fedsparse.data"):
        fetch(url, dest, **FAST)
    assert dest.read_bytes() == body
    assert not dest.with_name("blob.bin.part").exists()
    (p1, r1), (p2, r2) = srv.state.requests
    assert r1 is None and r2 == f"bytes={len(body) // 2}-"  # resumed, not restarted
    rec = json.loads(dest.with_name("blob.bin.json").read_text())
    assert rec["sha256"] == sha256_of(dest) and rec["size"] == len(body)
    assert "retry 1/3" in caplog.text
    assert "%" in caplog.text  # progress lines


def test_partial_file_of_an_interrupted_process_is_resumed(srv, tmp_path):
    body = os.urandom(100_000)
    url = srv.serve("/f.bin", body)
    (tmp_path / "f.bin.part").write_bytes(body[:30_000])
    fetch(url, tmp_path / "f.bin", **FAST)
    assert (tmp_path / "f.bin").read_bytes() == body
    assert srv.state.requests == [("/f.bin", "bytes=30000-")]


def test_server_without_range_support_restarts_from_zero(srv, tmp_path):
    body = os.urandom(50_000)
    url = srv.serve("/f.bin", body)
    srv.state.no_range = True
    (tmp_path / "f.bin.part").write_bytes(b"garbage" * 100)
    fetch(url, tmp_path / "f.bin", **FAST)
    assert (tmp_path / "f.bin").read_bytes() == body


def test_stalled_server_times_out_and_is_retried(srv, tmp_path):
    body = os.urandom(10_000)
    url = srv.serve("/slow.bin", body)
    srv.state.stall["/slow.bin"] = 1
    fetch(url, tmp_path / "slow.bin", retries=2, backoff=0.01, timeout=0.3)
    assert (tmp_path / "slow.bin").read_bytes() == body
    assert len(srv.state.requests) == 2


def test_404_is_one_clear_line_and_leaves_nothing(srv, tmp_path):
    with pytest.raises(DataError, match=r"HTTP 404") as err:
        fetch(srv.url("/missing.bz2"), tmp_path / "missing.bz2", **FAST)
    assert "\n" not in str(err.value) and "/missing.bz2" in str(err.value)
    assert len(srv.state.requests) == 1  # a 404 is not retried
    assert not any(tmp_path.iterdir())


def test_size_mismatch_is_refused(srv, tmp_path):
    body = os.urandom(5_000)
    url = srv.serve("/f.bin", body)
    with pytest.raises(DataError, match=r"size mismatch: expected 4999 bytes, the server has 5000"):
        fetch(url, tmp_path / "f.bin", expected_size=4999, **FAST)
    assert not (tmp_path / "f.bin").exists()


def test_server_announcing_more_than_it_sends_fails_after_retries_and_keeps_the_part(srv, tmp_path):
    body = os.urandom(8_000)
    url = srv.serve("/short.bin", body)
    srv.state.lie["/short.bin"] = 16_000  # Content-Length says 16000, 8000 arrive
    with pytest.raises(DataError, match=r"download failed after 3 attempts .* run again to resume"):
        fetch(url, tmp_path / "short.bin", retries=2, backoff=0.01, timeout=2.0)
    assert not (tmp_path / "short.bin").exists()  # never renamed into place


def test_sha256_pin_mismatch_deletes_the_download(srv, tmp_path):
    url = srv.serve("/f.bin", b"abc")
    with pytest.raises(DataError, match="SHA-256 mismatch"):
        fetch(url, tmp_path / "f.bin", expected_sha256="0" * 64, **FAST)
    assert not any(tmp_path.iterdir())


def test_a_later_download_that_differs_is_flagged(srv, tmp_path, caplog):
    url = srv.serve("/f.bin", b"version one")
    dest = tmp_path / "f.bin"
    fetch(url, dest, **FAST)
    dest.unlink()  # e.g. the cache was pruned; the record stays
    srv.state.files["/f.bin"] = b"version two!"
    with caplog.at_level(logging.WARNING, logger="fedsparse.data"):
        fetch(url, dest, **FAST)
    assert "DIFFERS from the first download" in caplog.text
    rec = json.loads(dest.with_name("f.bin.json").read_text())
    assert rec["size"] == len(b"version one")  # the first download stays the reference
    assert rec["later"][-1]["differs"] is True


# ---------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("compress", ["plain", "bz2", "xz"])
def test_parser_matches_sklearn_on_plain_bz2_and_xz_across_block_boundaries(tmp_path, compress):
    from sklearn.datasets import load_svmlight_file

    text = svm_text(rows=500, d=40) + b"# a comment line\n\n1 3:2.5 # trailing comment\n"
    plain = tmp_path / "a.svm"
    plain.write_bytes(text)
    src = plain
    if compress != "plain":
        src = tmp_path / f"a.svm.{compress}"
        src.write_bytes(bz2.compress(text) if compress == "bz2" else lzma.compress(text))
    got = parse_svmlight(src, n_features=40, block_size=997)  # many blocks, lines split across
    X, y = load_svmlight_file(str(plain), n_features=40, zero_based=False)
    assert got.X.shape == (501, 40)
    assert (got.X != X).nnz == 0 and np.array_equal(got.y, y)
    assert got.X.indices.dtype == np.int32


BAD_LINES = [
    ("1 3:abc", "feature value 'abc' is not a number"),
    ("1 3:1 2:1", "strictly increasing"),
    ("one 1:1", "label 'one' is not a number"),
    ("1 0:1", "below 1"),
    ("1 1:1:2", "expected <index>:<value>"),
    ("1 5", "expected <index>:<value>"),
    ("1 99:1", "exceeds the data set's 30 features"),
    ("1 2:inf", "not a finite number"),
]


@pytest.mark.parametrize("line, needle", BAD_LINES)
def test_malformed_line_is_named_by_file_and_line_number(tmp_path, line, needle):
    good = svm_text(rows=200).decode().splitlines()
    good.insert(136, line)  # line 137
    path = tmp_path / "bad.svm"
    path.write_text("\n".join(good) + "\n")
    with pytest.raises(DataError) as err:
        parse_svmlight(path, n_features=30, block_size=512)
    msg = str(err.value)
    assert msg.startswith(f"{path}:137: ") and needle in msg and "\n" not in msg


def test_truncated_bz2_download_is_refused_and_never_used(srv, tmp_path):
    whole = bz2.compress(svm_text(rows=3000))
    url = srv.serve("/data.svm.bz2", whole[: len(whole) * 2 // 3])
    ds = normalize_run_config(_run_cfg({"kind": "svmlight", "url": url, "task": "binary"}))[
        "dataset"
    ]
    with pytest.raises(DataError, match="truncated archive"):
        obtain(ds, tmp_path, FAST)
    files = [p.name for p in tmp_path.rglob("*") if p.is_file()]
    assert not [f for f in files if f.endswith((".bz2", ".part", ".npz"))], files


def test_rows_mismatch_and_too_many_features_are_refused(srv, tmp_path):
    url = srv.serve("/d.svm", svm_text(rows=50, d=30))
    ds = _svm_ds(url=url, task="binary", rows=51)
    with pytest.raises(DataError, match=r"50 rows, expected 51"):
        obtain(ds, tmp_path, FAST)
    ds = _svm_ds(url=url, task="binary", n_features=10)
    with pytest.raises(DataError, match=r"d.svm:\d+: feature index \d+ exceeds the data set's 10"):
        obtain(ds, tmp_path, FAST)


def test_download_is_converted_once_and_then_read_from_the_cache(srv, tmp_path):
    url = srv.serve("/d.svm.bz2", bz2.compress(svm_text(rows=80, d=30)))
    ds = _svm_ds(url=url, task="binary", n_features=30)
    a, info = obtain(ds, tmp_path, FAST)
    n = len(srv.state.requests)
    b, info2 = obtain(ds, tmp_path, FAST)
    assert len(srv.state.requests) == n == 1
    assert (a.X != b.X).nnz == 0 and np.array_equal(a.y, b.y)
    assert info["sha256"] == info2["sha256"] and len(info["sha256"]) == 64
    assert list(tmp_path.rglob("d.svm.bz2.csr.npz"))


def test_offline_local_path_needs_no_network(tmp_path):
    path = tmp_path / "local.svm.bz2"
    path.write_bytes(bz2.compress(svm_text(rows=120, d=30, classes=3)))
    ds = _svm_ds(path=str(path), task="multiclass", n_features=30)
    out = prepare(ds, {"kind": "iid", "clients": 4, "seed": 0}, cache=tmp_path / "cache")
    assert out.data.n_clients == 4 and out.data.n_samples == 120 and out.data.n_classes == 3
    assert out.source["origin"] == str(path)
    assert not (tmp_path / "cache").exists()  # nothing downloaded or cached


def test_registry_source_with_local_copy_checks_the_registry_row_count(tmp_path):
    path = tmp_path / "rcv1_train.binary.bz2"
    path.write_bytes(bz2.compress(svm_text(rows=30, d=30)))
    ds = _svm_ds(source="rcv1.binary", path=str(path))
    with pytest.raises(DataError, match=r"30 rows, expected 20242"):
        obtain(ds, tmp_path / "cache")


def test_mirror_replaces_the_libsvm_site(srv, tmp_path):
    srv.serve("/mirror/binary/rcv1_train.binary.bz2", bz2.compress(svm_text(rows=40, d=30)))
    ds = _svm_ds(source="rcv1.binary", mirror=srv.url("/mirror/"), rows=40)
    parsed, info = obtain(ds, tmp_path, FAST)
    assert srv.state.requests[0][0] == "/mirror/binary/rcv1_train.binary.bz2"
    assert parsed.X.shape == (40, 47_236)  # the registry's dimension
    assert (tmp_path / "rcv1.binary" / "rcv1_train.binary.bz2.json").is_file()
    # where the file came from is not part of the run's identity
    site = normalize_run_config(_run_cfg({"kind": "svmlight", "source": "rcv1.binary", "rows": 40}))
    mirrored = normalize_run_config(_run_cfg({**ds, "kind": "svmlight"}))
    assert run_id(site) == run_id(mirrored)


def test_cache_dir_from_config_then_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDSPARSE_DATA_CACHE", str(tmp_path / "env"))
    assert cache_dir(None) == tmp_path / "env"
    assert cache_dir(str(tmp_path / "cfg")) == tmp_path / "cfg"
    monkeypatch.delenv("FEDSPARSE_DATA_CACHE")
    assert cache_dir(None).parts[-3:] == (".cache", "fedsparse", "data")


@pytest.mark.parametrize(
    "ds, needle",
    [
        ({"kind": "svmlight"}, "dataset.source"),
        ({"kind": "svmlight", "source": "nope"}, "unknown data set 'nope'"),
        ({"kind": "svmlight", "url": "http://x/y"}, "dataset.task"),
        ({"kind": "svmlight", "source": "mnist", "task": "binary"}, "dataset.task"),
        ({"kind": "svmlight", "url": "ftp://x/y", "task": "binary"}, "dataset.url"),
        ({"kind": "svmlight", "source": "a9a", "file": "valid"}, "dataset.file"),
    ],
)
def test_bad_svmlight_configs_name_the_key(ds, needle):
    with pytest.raises(ConfigError, match=needle):
        normalize_run_config(_run_cfg(ds))


def test_cli_reports_a_404_as_one_line(srv, tmp_path, capsys, monkeypatch):
    import yaml

    monkeypatch.setenv("FEDSPARSE_DATA_CACHE", str(tmp_path / "cache"))
    cfg = _run_cfg({"kind": "svmlight", "url": srv.url("/gone.svm"), "task": "binary"})
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert cli.main(["run", str(path), "-o", str(tmp_path / "t.parquet")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedsparse: error: ") and "HTTP 404" in err and "\n" not in err


def _run_cfg(ds: dict) -> dict:
    return {
        "dataset": ds,
        "partition": {"kind": "iid", "clients": 2},
        "model": {"loss": "least_squares"},
        "algorithm": "fedht",
        "params": {"stepsize": 0.01, "sparsity": 3},
        "rounds": 2,
    }


def _svm_ds(**kw) -> dict:
    return normalize_run_config(_run_cfg({"kind": "svmlight", **kw}))["dataset"]
