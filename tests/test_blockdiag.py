"""The blockdiag unit and the five-network continuum: against NumPy references and closed forms."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import dynlab
from dynlab.errors import ConfigError
from dynlab.units.continuum import LayerStack
from dynlab.analyses.protocol import Drive
from dynlab.analyses.qr_settings import QRSettings

NETS = ["rnn-generic", "rnn-blockdiag", "rnn-diag-uniform", "rnn-diag-geometric", "sith-rnn", "sithcon"]
SMALL = {"rnn-generic": dict(hidden=12), "sithcon": dict(tau_max=20.0)}


def small(unit, **kw):
    cfg = dict(n_features=3, n_layers=3, **({} if unit == "rnn-generic" else dict(n_taus=6)), **SMALL.get(unit, {}), **kw)
    return dynlab.build("unit", unit, input_size=3, key=jax.random.key(1), **cfg)


def test_blockdiag_matches_dense_numpy():
    cell = dynlab.build("unit", "blockdiag", input_size=2, key=jax.random.key(0), n_blocks=3, block_size=4)
    W = np.zeros((12, 12))
    for b in range(3):
        W[4 * b:4 * b + 4, 4 * b:4 * b + 4] = np.asarray(cell.blocks[b])
    h, x = np.random.default_rng(0).normal(size=12), np.array([0.3, -1.0])
    ref = np.tanh(W @ h + np.asarray(cell.w_xh) @ x + np.asarray(cell.b_h) + 0.2)
    np.testing.assert_allclose(cell(jnp.asarray(h, jnp.float32), jnp.asarray(x, jnp.float32), drive=0.2)[0], ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cell.recurrent_matrices()["w_hh"], W, atol=1e-7)
    shared = dynlab.build("unit", "blockdiag", input_size=2, key=jax.random.key(0), n_blocks=3, block_size=4, shared_blocks=True)
    assert shared.param_count()["total"] == 16 + 24 + 12


@pytest.mark.parametrize("unit", NETS)
def test_fast_paths_equal_step_scan(unit):
    cell = small(unit)
    xs = jax.random.normal(jax.random.key(2), (40, 3))
    drive = 0.1 * jnp.sin(jnp.arange(40.0))

    @eqx.filter_jit  # one program, as training runs it (op by op costs more CPU)
    def three_ways(cell, xs, drive):
        def body(s, inp):
            s, o = cell(s, inp[0], drive=inp[1])
            return s, cell.layer_outputs(s)

        return jax.lax.scan(body, cell.init_state(), (xs, drive))[1], cell.sequence(xs, drive), cell.scan_layers(xs, drive)

    ref, sequence, scan_layers = three_ways(cell, xs, drive)
    ref = np.asarray(ref).transpose(1, 0, 2)
    tol = 1e-4 * np.abs(ref).max()
    np.testing.assert_allclose(sequence, ref, atol=tol)
    np.testing.assert_allclose(scan_layers, ref, atol=tol)


@pytest.mark.parametrize("hidden_input", ["pulse", "hold"])
def test_diagonal_net_against_numpy_equations(hidden_input):
    """Nets 3-5, Eqs. 3, 5-7 written out with explicit loops over features and taus.

    ``"hold"``: layers 2, 3 integrate the leaky kernel ``a e^{-u/tau}`` over each step, here by
    numerical quadrature (scipy), so the closed form in the code is checked too."""
    from scipy.integrate import quad

    cell = small("sith-rnn", input_weight="decay", hidden_input=hidden_input)
    a = np.exp(-1 / cell.taus)
    held = np.array([quad(lambda u, tau=tau: np.exp(-u / tau), 0, 1)[0] for tau in cell.taus]) * a
    m = np.asarray(cell.motif) - np.asarray(cell.motif).mean()
    L = np.zeros((6, 6))
    for i in range(6):
        for j in range(6):
            if abs(j - i) <= 3:
                L[i, j] = m[j - i + 3]
    g = np.asarray(cell.g)
    xs = np.random.default_rng(1).normal(size=(15, 3))
    h = np.zeros((3, 3, 6))
    out = []
    for t in range(15):
        u = xs[t]
        for l in range(3):
            for f in range(3):
                h[l, f] = a * h[l, f] + (held if l and hidden_input == "hold" else a) * u[f]
            lh = h[l] @ L.T
            u = np.array([max(sum(g[o, b] * lh[b, i] for b in range(3)) for i in range(6)) for o in range(3)])
        out.append(u)
    sequence = eqx.filter_jit(lambda c, x: c.sequence(x))(cell, jnp.asarray(xs, jnp.float32))  # one program
    np.testing.assert_allclose(sequence[-1], np.array(out), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(cell.readout_matrix()), L, atol=1e-6)
    np.testing.assert_allclose(L[3:-3].sum(1), 0, atol=1e-6)  # zero-sum rows away from the edges


def test_paper_parameter_counts():
    # built abstractly (shapes only): the counts need no values, and the full-size units cost seconds to draw
    counts = {u: eqx.filter_eval_shape(lambda u=u: dynlab.build("unit", u, input_size=9, key=jax.random.key(0)))
              .param_count()["total"] for u in NETS}
    assert counts == {"rnn-generic": 210600, "rnn-blockdiag": 5131, "rnn-diag-uniform": 2581,
                      "rnn-diag-geometric": 2581, "sith-rnn": 88, "sithcon": 81}
    assert counts["sith-rnn"] / counts["rnn-generic"] < 0.0005


def test_fixed_decays_untouched_by_adamw():
    model = dynlab.build("model", unit="rnn-diag-geometric", input_size=9, output_size=9, key=jax.random.key(0))
    before = np.asarray(model.cells[0].decays())
    opt = optax.adamw(0.1, weight_decay=0.5)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    state = opt.init(params)
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    params = eqx.apply_updates(params, opt.update(grads, state, params)[0])
    np.testing.assert_array_equal(eqx.combine(params, static).cells[0].decays(), before)


@eqx.filter_jit  # one program per shape, shared by the tests below (op by op costs more CPU)
def _hidden_sequence(cell, x):
    return cell.layer_hidden_sequence(x)


def _original_and_dilated(how: str):
    """A one-layer SITH-RNN's read-out of sparse pulses, and that of the same network with its tau
    grid rescaled by 3 (``how``) of the pulses dilated by 3, taken at the dilated times."""
    cell = dynlab.build("unit", "sith-rnn", input_size=3, key=jax.random.key(0), n_features=3, n_layers=1,
                        n_taus=9, tau_min=1.0, tau_max=81.0)
    rescaled = cell.extend_taus(3, how=how)
    x = np.zeros((30, 3), np.float32)
    x[np.arange(0, 30, 4), np.arange(8) % 3] = 1
    xd = np.zeros((90, 3), np.float32)
    xd[::3] = x
    h1 = np.asarray(_hidden_sequence(cell, jnp.asarray(x)))
    h3 = np.asarray(_hidden_sequence(rescaled, jnp.asarray(xd)))[3 * np.arange(30)]
    return rescaled, h1, h3


def test_sith_rnn_extension_is_scale_invariant():
    """Dilating pulses by 3 with the tau grid extended by 3 (2 indices at ratio sqrt 3) gives the
    same layer-1 read-out, shifted by 2 indices, at the dilated times (leaky integrators are exact)."""
    ext, h1, h3 = _original_and_dilated("extend")
    assert ext.n_taus == 11
    np.testing.assert_allclose(h3[..., 2:], h1, rtol=1e-4, atol=1e-5)


def test_shifted_tau_window_sees_the_dilated_input_as_the_original():
    """how="shift": the whole tau window times 3 reads pulses dilated by 3 exactly as the original
    window reads the original (same nodes, no new fast ones): the layer-1 read-out is unchanged at
    the dilated times, for the leaky integrators of SITH-RNN and for SITHCon's Post memory."""
    from dynlab.units.sith import SITH

    shifted, h1, h3 = _original_and_dilated("shift")
    assert shifted.n_taus == 9 and (shifted.tau_min, shifted.tau_max) == (3.0, 243.0)
    np.testing.assert_allclose(h3, h1, rtol=1e-4, atol=1e-5)
    # Post filters: Phi_{3 tau}(3 u) = Phi_tau(u) / 3 (closed form), so the shifted memory of pulses
    # dilated by 3 is the original's divided by 3 at every node
    mem = SITH(2.0, 40.0, 12, k=8)
    np.testing.assert_allclose(mem.shift(3).kernels(3 * np.arange(1, 60)), mem.kernels(np.arange(1, 60)) / 3,
                               rtol=1e-10, atol=1e-14)
    with pytest.raises(ConfigError, match="how must be"):
        shifted.extend_taus(3, how="stretch")


@pytest.mark.parametrize("unit, kwargs, fragment", [
    ("sith-rnn", dict(motif_width=4), "motif_width must be odd"),
    ("rnn-diag-uniform", dict(input_weight="twos"), "input_weight must be one of"),
    ("blockdiag", dict(n_blocks=0), "n_blocks must be a positive integer"),
    ("sithcon", dict(n_taus=5, k=15, method="fd", fd_pad=0), "too small for Post order"),
    ("rnn-generic", dict(n_layers=0), "n_layers must be a positive integer"),
    ("sith-rnn", dict(hidden_input="smooth"), "hidden_input must be one of"),
    ("sithcon", dict(hidden_input="smooth"), "hidden_input must be one of"),
])
def test_bad_unit_config(unit, kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        dynlab.build("unit", unit, input_size=9, key=jax.random.key(0), **kwargs)


def test_extension_refused_for_dense_readout():
    with pytest.raises(ConfigError, match="only a Toeplitz read-out"):
        small("rnn-diag-geometric").extend_taus(3)


def test_units_work_in_lyapunov_state_map():
    from dynlab.analyses.lyapunov import lyapunov_analysis

    model = dynlab.build("model", unit="sith-rnn", input_size=9, output_size=9, key=jax.random.key(0), n_taus=5, n_layers=1)
    ds = lyapunov_analysis(model, qr=QRSettings(k=3), steps=600, burn_in=300, ics=2, input=Drive(0.0))
    # one layer of leaky integrators: the exponents are log e^{-1/tau}, the slowest (tau = 81) nine-fold
    np.testing.assert_allclose(ds["mean"].values, np.full(3, -1 / 81), rtol=0.03)
