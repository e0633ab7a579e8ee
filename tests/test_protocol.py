"""Issue 34, item 3: the input protocol and the QR settings are values (analyses/protocol.py,
analyses/qr_settings.py), parsed from command-line text and TOML by one function, checked once,
shared by lyapunov, clv, fixed-points and spectra; the older flat keys fold into them."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import dynlab
from cli_runner import invoke, one_line_error
from dynlab.analyses.protocol import Autonomous, Constant, Drive, Noise, Protocol, TaskStream, from_keywords
from dynlab.analyses.qr_settings import QRSettings
from dynlab.errors import ConfigError
from dynlab.option_groups import parse_text

PROTOCOL_ANALYSES = ("lyapunov", "clv", "fixed-points", "spectra")


@pytest.mark.parametrize("text, toml, value", [
    ("autonomous", "autonomous", Autonomous()),
    ("drive=1.5", {"drive": 1.5}, Drive(1.5)),
    ("drive=2", {"drive": 2}, Drive(2.0)),
    ("task=adding", {"task": "adding"}, TaskStream("adding")),
    ("task=train,drive=0.5", {"task": "train", "drive": 0.5}, TaskStream("train", 0.5)),
    ("noise=0.1,seed=3", {"noise": 0.1, "seed": 3}, Noise(0.1, 3)),
    ("noise=0.1", {"noise": 0.1}, Noise(0.1)),
    ("constant=[1.0,0.0,-2]", {"constant": [1.0, 0.0, -2]}, Constant((1.0, 0.0, -2.0))),
])
def test_command_line_text_and_toml_become_the_same_value(text, toml, value):
    assert parse_text(text, "--input") == toml
    assert Protocol.parse(parse_text(text, "--input")) == Protocol.parse(toml) == value


@pytest.mark.parametrize("toml, fragment", [
    ({"drive": float("inf")}, "drive must be a finite number"),
    ({"drive": True}, "drive must be a finite number"),
    ({"noise": 0.0}, "noise must be a standard deviation > 0"),
    ({"noise": 0.1, "seed": -1}, "seed must be an integer in [0, 4294967295]"),
    ({"noise": 0.1, "drive": 1.0}, "drive does not go with noise"),
    ({"constant": [1.0], "drive": 1.0}, "drive does not go with constant"),
    ({"constant": [1.0, "a"]}, "constant must be a finite number"),
    ({"speed": 1.0}, "the input protocol must be"),
    ({}, "the input protocol must be"),
    ("zero", "the input protocol must be"),
    ({"task": "nosuch"}, "unknown task 'nosuch'"),
])
def test_a_bad_protocol_is_one_line(toml, fragment):
    with pytest.raises(dynlab.errors.DynlabError, match=None) as error:
        Protocol.parse(toml)
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_qr_settings_keep_the_analysis_default_for_keys_left_out():
    clv_default = QRSettings(k=8, reortho_every=1)
    assert QRSettings.parse({"k": 3}, default=clv_default) == QRSettings(3, 1)
    assert QRSettings.parse({"reortho_every": 4}) == QRSettings(16, 4)
    for bad, fragment in [({"k": 0}, "k must be an integer >= 1"), ({"k": 2.0}, "k must be an integer >= 1"),
                          ({"reortho_every": "sometimes"}, "reortho_every must be"), ({"kk": 2}, "table of k, reortho_every")]:
        with pytest.raises(ConfigError, match=fragment):
            QRSettings.parse(bad)


def test_the_old_keywords_name_the_same_protocol():
    """The mapping of the old (drive, task) keywords, which state_map.protocol_inputs still takes."""
    task = dynlab.build("task", "adding", length=5)
    assert from_keywords() == Autonomous() and from_keywords(drive=0.5) == Drive(0.5)
    assert from_keywords(drive=0.5, task=task) == TaskStream(task, 0.5)
    assert Drive(0.0).name == Autonomous().name == "autonomous (zero input)"  # drive 0 is the autonomous map
    assert math.isnan(Autonomous().drive_attr) and Drive(0.0).drive_attr == 0.0


def test_noise_is_white_gaussian_input_drawn_from_its_own_seed():
    """x_t ~ N(0, std^2 I): sample moments within 5 standard errors; realisations independent;
    a given seed fixes the draws whatever the analysis's key, no seed takes the analysis's."""
    model = dynlab.build("model", unit="rnn", input_size=3, output_size=1, key=jax.random.key(0), hidden=4)
    n = 4000
    x, xi = Noise(0.3, 7).inputs(model, n, jax.random.key(1))
    x = np.asarray(x)
    assert x.shape == (n, 3) and not np.asarray(xi).any()
    assert abs(x.mean()) < 5 * 0.3 / math.sqrt(x.size)
    assert abs(x.var() / 0.09 - 1) < 5 * math.sqrt(2 / x.size)
    assert abs(np.corrcoef(x[:-1, 0], x[1:, 0])[0, 1]) < 5 / math.sqrt(n)  # white: no lag-1 correlation
    same = np.asarray(Noise(0.3, 7).inputs(model, n, jax.random.key(2))[0])
    np.testing.assert_array_equal(x, same)
    other = np.asarray(Noise(0.3, 7).inputs(model, n, jax.random.key(1), realisation=1)[0])
    assert not np.allclose(x, other)
    a, b = (np.asarray(Noise(0.3).inputs(model, 10, jax.random.key(s))[0]) for s in (1, 2))
    assert not np.allclose(a, b)


def test_fixed_points_under_noise_are_those_at_the_noise_mean():
    """A tanh RNN without biases maps h = 0 to itself at zero input, the noise's mean; the
    trajectory visits states around it, and the search finds h* = 0."""
    import equinox as eqx

    model = dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(0), hidden=4)
    model = eqx.tree_at(lambda m: m.cells[0].w_hh, model, 0.5 * model.cells[0].w_hh)
    from dynlab.analyses.fixed_points import fixed_points_analysis

    ds = fixed_points_analysis(model, input=Noise(0.5, 1), steps=80, burn_in=10, ics=8, dtype="float32", max_steps=200)
    assert ds.attrs["input"] == "zero input (the noise's mean)" and ds.attrs["protocol"].startswith("input noise")
    assert ds.sizes["point"] >= 1
    assert np.min(np.linalg.norm(ds.points.values, axis=1)) < 1e-4


@pytest.mark.parametrize("args, fragments", [
    (["analyze", "lyapunov", "--input", "drive=nan"], ["--input drive is nan"]),
    (["analyze", "spectra", "--input", "wind=3"], ["--input: the input protocol must be"]),
    (["analyze", "fixed-points", "--input", "noise=0.1,drive=1"], ["drive does not go with noise"]),
    (["analyze", "clv", "--input", "drive"], ["the input protocol must be"]),
    (["analyze", "clv", "--input", "drive=1,drive=2"], ["--input gives drive twice"]),
    (["analyze", "lyapunov", "--drive", "1", "--input", "drive=2"], ["drive is also given in"]),
    (["analyze", "lyapunov", "--model", "rnn", "--set", "model.hidden=4", "--qr", "k=5"],
     ["k = 5 exceeds the state dimension N = 4"]),
    (["analyze", "clv", "--model", "rnn", "--set", "model.hidden=4", "--k", "5"], ["k = 5 exceeds the state dimension"]),
    (["analyze", "clv", "--model", "rnn", "--set", "model.hidden=4", "--qr", "reortho_every=2"],
     ["reortho_every must be 1"]),
])
def test_bad_values_on_the_command_line_are_one_line_exit_2(args, fragments, tmp_path):
    one_line_error(invoke(args, tmp_path), *fragments)


def _entry(**options):
    from dynlab.scenarios.spec import parse

    doc = {"name": "p", "model": {"unit": "rnn", "hidden": 4}, "task": {"name": "adding", "length": 6},
           "train": {"steps": 0}, "analyses": [{"name": "fixed-points", "stages": ["init"], **options}]}
    return parse(doc).analyses[0]


def test_a_scenario_entry_in_the_old_spelling_is_the_same_entry():
    """``drive``/``task`` fold into ``input`` in one place: both spellings give one entry (so
    one cell key, one configuration), and a key given both ways is refused."""
    assert _entry(drive=0.5, task="train") == _entry(input={"task": "train", "drive": 0.5})
    assert _entry(drive=0.5)["input"] == {"drive": 0.5}
    with pytest.raises(ConfigError, match="analyses.fixed-points.drive is also given in analyses.fixed-points.input"):
        _entry(drive=0.5, input={"drive": 1.0})
    with pytest.raises(ConfigError, match=r"analyses.fixed-points.input: noise must be"):
        _entry(input={"noise": -1.0})


@pytest.mark.parametrize("name", PROTOCOL_ANALYSES)
def test_every_protocol_analysis_takes_the_one_value(name):
    """One parameter, ``input``, annotated with the one Protocol type, in each of the four (and
    ``qr`` in the two tangent-space analyses): no analysis keeps its own drive/task keywords."""
    from dynlab import registry
    from dynlab.option_groups import group_parameters

    groups = group_parameters(registry.get("analysis", name).obj)
    assert groups["input"][0] is Protocol
    assert ("qr" in groups) == (name in ("lyapunov", "clv"))
    keys = registry.config_keys(registry.get("analysis", name).obj)
    assert not {"drive", "task", "k", "reortho_every"} & set(keys)


def test_build_takes_an_analysis_options_as_a_scenario_entry_does():
    """README's ``dynlab.build("analysis", "lyapunov", model=..., k=8)``: the flat key, the table and
    the value run the same configuration; the key given both ways is one ConfigError."""
    model = dynlab.build("model", unit="rnn", input_size=2, output_size=1, key=jax.random.key(0), hidden=6)
    means = [dynlab.build("analysis", "lyapunov", model=model, steps=100, realisations=2, **given)["mean"].values
             for given in ({"k": 3}, {"qr": {"k": 3}}, {"qr": QRSettings(k=3)})]
    assert means[0].shape == (3,) and all(np.array_equal(means[0], m) for m in means[1:])
    with pytest.raises(ConfigError, match="also given in"):
        dynlab.build("analysis", "lyapunov", model=model, k=3, qr={"k": 2})
