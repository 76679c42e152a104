"""Defaults of the data-set and partition config keys, by kind: what ``dataset:`` and
``partition:`` mean when a key is absent (each data-set kind of fedsparse.data.kinds and
fedsparse.training.config fill them in; a key at its default stays out of the canonical config, so
run ids do not change when a key is added).

Imports nothing heavy: the planner (and a cluster job's own Snakemake) reads these through
fedsparse.training.config.
"""

from __future__ import annotations

from typing import Any

SYNTHETIC_DEFAULTS: dict[str, Any] = {
    "task": "linear",
    "clients": 100,
    "samples_per_client": None,
    "dim": 1000,
    "support": 100,
    "alpha": 0.1,
    "beta": 0.1,
    "seed": 0,
    "noise_std": 1.0,
    "positives": 100,
    "shared_model": False,
    "name": None,
}
# Readings of the simulation data that deviate from the papers' text: subtract the
# features' global mean or each client's own mean. "none" (the papers') stays out of the config.
CENTERINGS = ("none", "global", "per_client")
# Readings of the generator itself (fedsparse.data.synthetic's docstring has the sources). At
# these defaults -- the papers' text as we read it -- a key stays out of the canonical config,
# so run ids from before the keys existed still hold.
#   alpha_beta_as: variance | std -- how alpha and beta enter N(., alpha), N(0, beta); std is
#       how FedProx's generator and the Flower baseline (PR #4398) pass them to numpy.
#   u_mean: the mean of u_i (text 0.1; FedProx's code and Flower's 0).
#   v_mean: client_scalar | shared_vector -- each client's scalar B_i (text) or one vector
#       B ~ N(0, beta I_d) shared by all clients (Flower).
SYNTHETIC_READINGS: dict[str, Any] = {
    "alpha_beta_as": "variance",
    "u_mean": 0.1,
    "v_mean": "client_scalar",
}
LIBSVM_DEFAULTS: dict[str, Any] = {
    "path": None,
    "client_key": "qid",
    "n_features": None,
    "name": None,
}
# kind svmlight: a plain svmlight/LibSVM file (no client ids) from the registry (source),
# a URL or a local path; its clients come from the partition (fedsparse.data.prepare).
SVMLIGHT_DEFAULTS: dict[str, Any] = {
    "source": None,  # registry name (fedsparse.data.registry.DATASETS)
    "file": "papers",  # registry file: papers (the one the papers used) | train | test
    "url": None,  # a file not in the registry
    "task": None,  # regression | binary | multiclass (from the registry for a source)
    "n_features": None,
    "rows": None,  # expected number of rows (checked)
    "size": None,  # expected download size in bytes (checked)
    "sha256": None,  # expected SHA-256 of the download (checked)
    "path": None,  # offline: a local copy (plain, .bz2 or .xz) instead of downloading
    "mirror": None,  # offline/cluster: a base URL replacing the LibSVM site
    "name": None,
}
# kind idx: an image set in the original IDX format (four files, train and test), from the
# registry (source; fedsparse.data.registry.IMAGE_SETS) or a local folder (path).
IDX_DEFAULTS: dict[str, Any] = {
    "source": None,  # fashion-mnist | mnist
    "path": None,  # a folder holding the four files (plain or .gz); offline copy of a source
    "mirror": None,  # a base URL replacing the source's site
    "preprocess": None,  # {scale: 255, standardize: false} (IDX_PREPROCESS)
    "task": "multiclass",  # (always; accepted so that a canonical config normalises again)
    "name": None,
}
# kind leaf: a folder in LEAF's JSON format (train/*.json, test/*.json), each writer a client.
LEAF_DEFAULTS: dict[str, Any] = {
    "path": None,
    "preprocess": None,  # LEAF's images are already in [0, 1]: scale 1 by default
    "task": "multiclass",
    "name": None,
}
# the defaults of an image set's preprocess: pixels 0..255 to [0, 1] (IDX), LEAF's already so
IDX_PREPROCESS: dict[str, Any] = {"scale": 255.0, "standardize": False}
LEAF_PREPROCESS: dict[str, Any] = {"scale": 1.0, "standardize": False}
TASKS = ("regression", "binary", "multiclass")
PARTITION_COMMON: dict[str, Any] = {
    "seed": 0,
    "min_size": 1,
    "test_fraction": 0.0,
    "test_split": "per_client",
}
PARTITION_DEFAULTS: dict[str, dict[str, Any]] = {
    "papers": {"clusters": 10, "parts": 20, "parts_per_client": 2, "cluster_by": "auto"},
    "iid": {"clients": 100},
    "dirichlet": {"clients": 100, "alpha": 0.5, "bins": 10, "max_tries": 100},
    # the gradient-sparsification authors' code's deal of FEMNIST's 156 writers (partition.py)
    "writer_mix": {"clients": 156, "writers": 156, "alpha": 0.3, "bins": 10, "max_tries": 100},
    "quantity": {"clients": 100, "alpha": 0.5},
    "labels": {"clients": 100, "k": 2, "bins": 10},
    "one_class": {"clients": 10},
    # pFedMe's/sFedHP's split (spec seed-002 section 4.1): its own test keys, no test_fraction
    "label_cycle": {
        "clients": 20,
        "labels_per_client": 5,
        "train_per_label": 200,
        "test_per_label": 800,
        "scope": "per_client",  # per_client | total (the spec's ambiguity D1)
    },
}
OWN_TEST_SPLIT = ("label_cycle",)  # partitioners that draw test rows themselves
SCOPES = ("per_client", "total")
# partition.test_pool: split (the data set's test file stays the test pool) or pooled (its
# train and test files are pooled before the partition, as pFedMe's generator does). The
# default is left out of the canonical config, so run ids from before it existed still hold.
TEST_POOLS = ("split", "pooled")
