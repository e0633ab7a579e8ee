r"""The analysis ``flip-threshold`` (issue 49, item 4): the smallest sustained input that flips a held bit.

Truths that do not come from the code:

- **The fold of $h \leftarrow \tanh(w h + u)$** is at $u^* = w h^* - \operatorname{atanh}(h^*)$ with
  $h^{*2} = 1 - 1/w$ (0.532840 at $w = 2$, 1.303274 at $w = 3$): no sustained input below it flips
  the bit, so the simulated threshold lies above it and approaches it as the hold grows.
- **The passage through the fold's ghost.** With $z = h - h^*$ and $\delta = u - u^*$ the map is
  $z \mapsto z + \mu - c z^2$ near the fold, $\mu = F_u\,\delta = (1 - h^{*2})\,\delta = \delta/w$ and
  $c = |F''|/2 = w h^* (1 - h^{*2})\, w = w h^*$; the passage takes $T = \pi/\sqrt{\mu c} =
  \pi/\sqrt{h^* \delta}$ steps, so a hold of $T$ steps flips from $\delta = \pi^2/(h^* T^2)$ on
  ([`ghost_excess`][]): $3.5\cdot10^{-4}$ at $w = 2$, $T = 200$.
- A 2-unit RNN built by hand as two decoupled such maps holds 2 bits: each channel's threshold is
  its own map's fold, at every corner, with the sign of the input that flips the corner's bit.
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from cli_runner import invoke, one_line_error
from dynlab.analyses.continuation.flip_threshold import flip_thresholds
from dynlab.errors import ConfigError


def fold(w: float) -> float:
    """The fold u* > 0 of h <- tanh(w h + u) (closed form)."""
    h = math.sqrt(1 - 1 / w)
    return -(math.atanh(h) - w * h)


def ghost_excess(w: float, hold: int) -> float:
    r"""$u - u^*$ at which the passage through the fold's ghost takes ``hold`` steps: $\pi^2/(h^* T^2)$ (module docstring)."""
    return math.pi**2 / (math.sqrt(1 - 1 / w) * hold**2)


def tanh_step(w):
    def step(h, x):
        h = jnp.tanh(w * h + x[0])
        return h, h[0]

    return step


def test_the_threshold_approaches_the_fold_from_above_by_the_ghosts_passage_time():
    w, u_star = 2.0, fold(2.0)
    assert u_star == pytest.approx(0.532840, abs=1e-6)
    low = np.array([[-math.sqrt(1 - 1 / w) - 0.25]])  # in the lower stable state's basin, pushed up
    with jax.enable_x64(True):
        excess = {hold: flip_thresholds(tanh_step(w), low, np.array([[1.0]]), np.array([-1.0]), hold=hold,
                                        release=50, u_max=1.0, tol=1e-8)[0] - u_star for hold in (200, 400)}
    for hold, got in excess.items():
        assert got > 0  # below the fold the stable state exists: no sustained input flips it
        assert got == pytest.approx(ghost_excess(w, hold), rel=0.1), (hold, got, ghost_excess(w, hold))
    assert excess[200] / excess[400] == pytest.approx(4.0, rel=0.05)  # T ~ 1/sqrt(u - u*)


def handmade(ws=(2.0, 3.0)):
    """A fresh RNN for the len(ws)-bit flip-flop whose weights are set to len(ws) decoupled units
    h_i <- tanh(w_i h_i + x_i), read out as they are: each holds one bit."""
    n = len(ws)
    exp = dynlab.model("rnn", task={"name": "flipflop", "bits": n}, hidden=n)
    model = eqx.tree_at(lambda m: (m.cells[0].w_hh, m.cells[0].w_xh, m.cells[0].b_h, m.readout.weight, m.readout.bias),
                        exp.model, (jnp.diag(jnp.array(ws)), jnp.eye(n), jnp.zeros(n), jnp.eye(n), jnp.zeros(n)))
    return dataclasses.replace(exp, model=model)


@pytest.mark.parametrize("channel, w", [(0, 2.0), (1, 3.0)])
def test_each_corner_of_a_handmade_two_bit_network_flips_at_its_channels_fold(channel, w):
    ds = dynlab.analyze("flip-threshold", handmade(), channel=channel, hold=400, u_max=2.0)
    u_star = fold(w)
    assert int(ds.n_corners_held) == 4 and int(ds.n_flipped) == 4
    bits = ds.corner_bits.values[:, channel]
    np.testing.assert_array_equal(ds.held_sign.values, bits)
    # the input that flips a held bit pushes against it: +u for a bit held at -1
    np.testing.assert_allclose(ds.fold_input.values, -bits * u_star, atol=1e-6)  # continuation's fold: the closed form
    flip = ds.flip_input.values * -bits
    assert (flip > u_star).all() and (flip - u_star < 2 * ghost_excess(w, 400)).all()
    np.testing.assert_array_equal(ds.flip_input_own.values, ds.flip_input.values)  # decoupled: only bit `channel` can go
    assert (ds.fold_relative_error.values > 0).all()
    assert float(ds.fold_relative_error_max) == pytest.approx(np.max(flip / u_star - 1), rel=1e-9)
    assert float(ds.flip_amplitude_min) == pytest.approx(np.min(flip), rel=1e-12)


def test_no_flip_below_the_fold_is_nan_not_a_number_made_up():
    ds = dynlab.analyze("flip-threshold", handmade(), channel=0, u_max=0.5)  # the fold is at 0.5328
    assert int(ds.n_flipped) == 0
    assert np.isnan(ds.flip_input.values).all() and np.isnan(ds.fold_input.values).all()
    assert np.isnan(float(ds.flip_amplitude_min)) and np.isnan(float(ds.fold_relative_error_max))


def test_without_fold_the_dataset_has_the_simulation_only():
    ds = dynlab.analyze("flip-threshold", handmade(), channel=1, fold=False, u_max=2.0, grid=20)
    assert "fold_input" not in ds and "fold_relative_error_max" not in ds
    assert int(ds.n_flipped) == 4


def test_mistakes_are_one_line_before_any_work(tmp_path):
    with pytest.raises(ConfigError, match="u_max"):
        dynlab.analyze("flip-threshold", handmade(), u_max=0.0)
    with pytest.raises(ConfigError, match="channel = 2"):
        dynlab.analyze("flip-threshold", handmade(), channel=2)
    result = invoke(["analyze", "flip-threshold", "--model", "rnn", "--task", "flipflop", "--set", "model.hidden=4",
                     "--channel", "3", "--out", str(tmp_path / "f.nc")], tmp_path)
    one_line_error(result, "channel = 3", "0 <= channel <= 2")
