"""A machine's rates: measured once per host, cached, overridden by FEDSPARSE_MACHINE."""

from __future__ import annotations

import json

import pytest

from fedsparse.errors import ConfigError
from fedsparse.sweep import machine


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.delenv(machine.MACHINE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_rates_are_measured_once_then_read_from_the_hosts_cache(cache_home, monkeypatch):
    measured = machine.host_rates()
    # what a core of any machine that runs these tests does, loosely
    assert 1e8 < measured.dgemm < 1e13 and 1e8 < measured.sgemm < 1e13
    assert 1e8 < measured.bandwidth < 1e12 and 0 < measured.startup_s < 300
    assert measured.cores >= 1
    path = machine.cache_path()
    assert path.parent.parent == cache_home and json.loads(path.read_text())["version"] == 1

    def no_second_measurement():
        raise AssertionError("measured again")

    monkeypatch.setattr(machine, "measure", no_second_measurement)
    assert machine.host_rates() == measured


def test_a_damaged_cache_is_measured_again(cache_home, monkeypatch):
    path = machine.cache_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    fresh = machine.Rates(1e10, 2e10, 1e10, 5.0, 2, "here")
    monkeypatch.setattr(machine, "measure", lambda: fresh)
    assert machine.host_rates() == fresh
    assert machine.host_rates(measure_if_missing=False) == fresh  # cached now


def test_the_environment_names_fixed_rates_or_a_file_of_them(cache_home, monkeypatch, tmp_path):
    monkeypatch.setenv(machine.MACHINE_ENV, "nominal")
    assert machine.host_rates() == machine.NOMINAL
    rates = tmp_path / "cluster.json"
    rates.write_text(json.dumps({"dgemm": 3e10, "sgemm": 6e10, "bandwidth": 8e9, "startup_s": 30}))
    monkeypatch.setenv(machine.MACHINE_ENV, str(rates))
    assert machine.host_rates().dgemm == 3e10
    rates.write_text(json.dumps({"dgemm": 0, "sgemm": 6e10, "bandwidth": 8e9, "startup_s": 30}))
    with pytest.raises(ConfigError, match=r"cluster.json: dgemm must be > 0"):
        machine.host_rates()
    monkeypatch.setenv(machine.MACHINE_ENV, str(tmp_path / "absent.json"))
    with pytest.raises(ConfigError, match=r"absent.json: not a file of machine rates"):
        machine.host_rates()
