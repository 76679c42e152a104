"""The sweep schema (workflow/schemas/sweep.schema.yaml), which Snakemake validates a sweep
config against before planning: it takes every config the project ships, and its model part
knows the package's model keys and choices (fedsparse.objective.model)."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest
import yaml

from fedsparse.objective import model

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = yaml.safe_load((ROOT / "workflow" / "schemas" / "sweep.schema.yaml").read_text())
CONFIGS = sorted((ROOT / "config").glob("*.yaml"))
MODEL = SCHEMA["properties"]["datasets"]["additionalProperties"]["properties"]["model"]


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_validates(path):
    jsonschema.Draft202012Validator(SCHEMA).validate(yaml.safe_load(path.read_text()))


def test_there_are_shipped_configs():
    assert len(CONFIGS) >= 10 and ROOT / "config" / "gs-cifar10.yaml" in CONFIGS


def test_the_schema_takes_the_package_model_keys_and_choices():
    props = MODEL["properties"]
    assert MODEL["additionalProperties"] is False
    assert set(props) == set(model.KEYS)
    assert props["kind"]["enum"] == list(model.KINDS)
    assert props["dtype"]["enum"] == list(model.DTYPES)
    assert props["activation"]["enum"] == list(model.ACTIVATIONS)
    assert props["input_order"]["enum"] == list(model.INPUT_ORDERS)
    pool = props["layers"]["oneOf"][1]["items"]["oneOf"][1]["properties"]["pool"]
    assert pool["properties"]["kind"]["enum"] == list(model.POOL_KINDS)


@pytest.mark.parametrize("preset", list(model.PRESETS))
def test_the_schema_takes_each_preset_written_out(preset):
    # a preset's layers are what a user may write instead of its name
    cfg = yaml.safe_load((ROOT / "config" / "gs-cifar10.yaml").read_text())
    (ds,) = cfg["datasets"].values()
    ds["model"]["layers"] = model.PRESETS[preset]
    jsonschema.Draft202012Validator(SCHEMA).validate(cfg)
    ds["model"]["layers"] = [{"conv": {"out": 6}}]  # kernel missing
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(SCHEMA).validate(cfg)
