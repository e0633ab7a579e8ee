"""TRW scrambling against systems with known receptive windows; Eq. 10; s50; the CLI."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
import dynlab.cli  # noqa: F401  (registers every command, 'dynlab analyze trw' included)
from dynlab.analyses import trw
from dynlab.errors import ConfigError
from cli_runner import invoke

SCALES = [3**i for i in range(7)]


def random_stream(T=729, key=0):
    return jax.nn.one_hot(jax.random.randint(jax.random.key(key), (T,), 0, 9), 9)


@pytest.mark.parametrize("N, entries", [(5, "offdiag"), (5, "all"), (40, "offdiag")])
def test_recurrence_correlation_matches_numpy(N, entries):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(30, N)), rng.normal(size=(30, N))
    b[:10] = a[:10]
    a[3] = 1.0  # a constant population vector: row of zeros by convention

    def rho(o):
        z = o - o.mean(1, keepdims=True)
        n = np.linalg.norm(z, axis=1, keepdims=True)
        z = np.where(n > 1e-12, z / np.where(n > 1e-12, n, 1), 0)
        return z @ z.T

    ra, rb = rho(a), rho(b)
    m = ~np.eye(30, dtype=bool) if entries == "offdiag" else np.ones((30, 30), bool)
    ref = np.corrcoef(ra[m], rb[m])[0, 1]
    za, zb = trw.normalise_rows(jnp.asarray(a)), trw.normalise_rows(jnp.asarray(b))
    np.testing.assert_allclose(trw.recurrence_correlation(za, zb, entries), ref, rtol=1e-4)
    np.testing.assert_allclose(trw.recurrence_matrix(jnp.asarray(b)), rb, atol=1e-5)


def test_block_permutation_keeps_blocks():
    idx = np.asarray(trw.block_permutation(jax.random.key(3), 81, 9))
    assert sorted(idx) == list(range(81))
    blocks = idx.reshape(9, 9)
    np.testing.assert_array_equal(blocks - blocks[:, :1], np.tile(np.arange(9), (9, 1)))
    assert sorted(blocks[:, 0] // 9) == list(range(9)) and not np.array_equal(blocks[:, 0], np.arange(0, 81, 9))


def test_memoryless_system_is_never_disrupted():
    c = trw.scramble_correlations(lambda x: (x, 2 * x), random_stream(), SCALES, 4, jax.random.key(0))
    np.testing.assert_allclose(c, 1.0, atol=1e-5)


@pytest.mark.parametrize("d", [3, 9])
def test_delay_line_window(d):
    """Output = input delayed by d steps. After un-shuffling, a step is intact iff its source lies
    in the same block (fraction 1 - d/s, plus blocks whose original predecessor happens to follow,
    1/n of the rest); the recurrence correlation is about that fraction squared, so s50 is near
    d / (1 - 1/sqrt 2)."""
    x = random_stream()
    fn = lambda x: (jnp.concatenate([jnp.zeros((d, 9)), x[:-d]]),)
    c = np.asarray(trw.scramble_correlations(fn, x, SCALES, 40, jax.random.key(1)))[0].mean(-1)
    s = np.array(SCALES, float)
    p = np.where(s > d, 1 - (d / s) * (1 - s / 729), 0.0)
    np.testing.assert_allclose(c, p**2, atol=0.06)
    s50, censored = trw.s50(SCALES, c)
    assert not censored
    assert abs(math.log(s50, 3) - math.log(d / (1 - 2**-0.5), 3)) < 0.25


def test_s50_interpolates_in_log3():
    assert trw.s50([1, 3, 9, 27], [0.0, 0.2, 0.6, 1.0]) == (pytest.approx(3 ** 1.75), False)
    assert trw.s50([1, 3, 9], [0.8, 0.9, 1.0]) == (1.0, True)


def test_trw_on_generic_model_and_layer_stacks():
    rnn = dynlab.build("model", unit="rnn", input_size=9, output_size=9, key=jax.random.key(0), hidden=8, layers=2)
    ds = trw.trw_analysis(rnn, n_shuffle=3)
    assert list(ds.layer_name.values) == ["cell0", "cell1"]
    assert ds.correlation.dims == ("layer", "scale", "shuffle") and ds.correlation.shape == (2, 7, 3)
    np.testing.assert_allclose(ds.correlation_mean.sel(scale=729), 1.0, atol=1e-5)  # one block: identity
    sr = dynlab.build("model", unit="sith-rnn", input_size=9, output_size=9, key=jax.random.key(0), n_taus=8)
    ds = trw.trw_analysis(sr, n_shuffle=2)
    assert list(ds.layer_name.values) == [f"cell0.layer{l}" for l in range(1, 5)]


def test_leaky_integrators_longer_tau_longer_window():
    x = random_stream()
    def leaky(tau):
        a = math.exp(-1 / tau)
        return lambda x: (jax.lax.scan(lambda h, u: (a * h + u, a * h + u), jnp.zeros(9), x)[1],)
    s = [trw.s50(SCALES, np.asarray(trw.scramble_correlations(leaky(t), x, SCALES, 10, jax.random.key(2)))[0].mean(-1))[0]
         for t in (1.0, 5.0, 25.0)]
    assert s[0] < s[1] < s[2], s


def test_bad_scale_is_an_error():
    with pytest.raises(ConfigError, match="scrambling scale 5 does not divide the stream length 729"):
        trw.scramble_correlations(lambda x: (x,), random_stream(), [1, 5], 2, jax.random.key(0))
    with pytest.raises(ConfigError, match="warmup must be one of 'stream', 'none', got 'twice'"):
        trw.scramble_correlations(lambda x: (x,), random_stream(), [1, 3], 2, jax.random.key(0), warmup="twice")


def test_accuracy_vs_dilation_and_impulse_collapse():
    sr = dynlab.build("model", unit="sith-rnn", input_size=9, output_size=9, key=jax.random.key(0), n_taus=8)
    ds = trw.accuracy_vs_dilation(sr, dilations=[0, 1])
    assert ds.accuracy.dims == ("dilation",) and ds.prediction.shape == (2, 9)
    imp = trw.impulse_responses(dynlab.build("unit", "sith-rnn", input_size=9, key=jax.random.key(0)), steps=400)
    # leaky integrators e^{-t/tau} collapse exactly onto e^{-x} when time is divided by tau
    assert float(imp.collapse_h) > 0.999 and float(imp.collapse_h) > float(imp.collapse_h_raw_time)




def test_cli_trw(tmp_path):
    # the SITH-RNN of test_trw_on_generic_model_and_layer_stacks: its compiled programs are reused
    res = invoke(["analyze", "trw", "--model", "sith-rnn", "--set", "model.n_taus=8", "--n-shuffle", "2",
                  "--out", "t.nc", "-q"], tmp_path)
    assert res.exit_code == 0, res.output + res.stderr
    assert "cell0.layer4" in res.output and (tmp_path / "t.nc").is_file() and (tmp_path / "t.png").is_file()
    assert res.output.count("tau at the max over tau: median") == 4
    import xarray as xr

    with xr.open_dataset(tmp_path / "t.nc") as ds:
        assert ds.tau_selected_quantile.dims == ("layer", "quantile")


@pytest.mark.parametrize("args, fragment", [
    (["--dilation", "-1"], "dilation must be a non-negative integer exponent"),
    (["--task", "adding"], "runs on the 'hierarchical-language' stream"),
    (["--n-shuffle", "0"], "--n-shuffle must be an integer >= 1"),
])
def test_cli_trw_bad_input(args, fragment, tmp_path):
    res = invoke(["analyze", "trw", "--model", "sith-rnn", "--set", "model.n_taus=4", "-q", *args], tmp_path)
    assert res.exit_code == 2, (res.output, res.stderr)
    err = res.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err and fragment in err, err
    assert not (tmp_path / "runs").exists()


def sithcon_identity_mixing(n_layers=1, **kw):
    model = dynlab.build("model", unit="sithcon", input_size=9, output_size=9, key=jax.random.key(0),
                         n_layers=n_layers, **kw)
    return eqx.tree_at(lambda m: m.cells[0].g, model, jnp.eye(9))


def test_max_over_tau_of_a_pulse_selects_tau_k_over_k_plus_1_times_the_lag():
    r"""With $g = I$, a pulse at lag $t$ gives the time cells $\Phi_{\tau}(t) \propto \tau^{-(k+1)} e^{-kt/\tau}$,
    maximal at $\tau = k t / (k + 1)$: the selected cell is the grid point nearest to it in log τ."""
    cell = sithcon_identity_mixing(tau_max=60.0, n_taus=40).cells[0]
    x = jnp.zeros((80, 9)).at[0, 2].set(1.0)
    pooled = eqx.filter_jit(lambda c, x: c.pooled_sequence(x)[0])(cell, x)  # one program (op by op costs more CPU)
    feats = np.asarray(pooled)[0, :, 2]  # [T, n_tau]
    t = np.arange(2, 60)
    expected = np.abs(np.log(cell.taus)[None, :] - np.log(15 * t / 16)[:, None]).argmin(1)
    np.testing.assert_array_equal(feats[t].argmax(1), expected)


@pytest.mark.parametrize("warmup", ["none", "stream"])
def test_selected_timescales_against_numpy_filter_bank(warmup):
    """One SITHCon layer, g = I, on the task's stream (``"stream"``: its second presentation): the
    selected τ equals the argmax over τ of the stream convolved (NumPy) with the closed-form Post
    filters."""
    from dynlab.tasks.hierarchical import HierarchicalLanguageTask
    from dynlab.units.sith import post_kernel

    model = sithcon_identity_mixing(tau_max=27.0, n_taus=13)
    ds = trw.selected_timescales(model, warmup=warmup)
    x = np.asarray(HierarchicalLanguageTask().stream(0), np.float64)
    T = len(x)
    x = np.concatenate([x, x]) if warmup == "stream" else x
    taus = model.cells[0].taus
    K = post_kernel(taus, 15, np.arange(len(x)))
    mem = np.stack([[np.convolve(x[:, a], K[i])[: len(x)] for i in range(len(taus))] for a in range(9)])  # [9, n, T]
    mem = mem.transpose(2, 0, 1)[-T:]  # [T, 9, n]
    ref = np.where(mem.max(-1) > 0, taus[mem.argmax(-1)], np.nan)  # nothing selected before a feature's first pulse
    np.testing.assert_array_equal(ds.tau_selected.sel(layer=1).values, ref)
    np.testing.assert_allclose(ds.tau_selected_quantile.sel(layer=1).values, np.nanquantile(ref, [0.1, 0.5, 0.9]))
    with pytest.raises(ConfigError, match="no max over tau"):
        trw.selected_timescales(dynlab.build("model", unit="rnn-generic", input_size=9, output_size=9,
                                             key=jax.random.key(0), hidden=8))


def test_warmup_keeps_an_onset_transient_from_posing_as_context():
    """A delay line (window d) whose output also carries a large decaying onset transient, a function
    of the position since the start, not of the input. From the zero state (``"none"``) the
    transient sits at the start of the intact response but wherever the first block belongs in the
    un-shuffled one, and s50 grows to nearly the whole stream; after a warm-up presentation
    (``"stream"``, default) it is gone and s50 is the delay line's, d / (1 - 1/sqrt 2)."""
    d = 3
    pattern = jnp.asarray(np.random.default_rng(0).normal(size=9))

    def fn(x):
        t = jnp.arange(x.shape[0], dtype=x.dtype)
        return (jnp.concatenate([jnp.zeros((d, 9)), x[:-d]]) + 30 * jnp.exp(-t / 40)[:, None] * pattern,)

    x = random_stream()
    s50 = {w: trw.s50(SCALES, np.asarray(trw.scramble_correlations(fn, x, SCALES, 40, jax.random.key(1), warmup=w))[0].mean(-1))[0]
           for w in ("none", "stream")}
    assert abs(math.log(s50["stream"], 3) - math.log(d / (1 - 2**-0.5), 3)) < 0.25, s50
    assert math.log(s50["none"], 3) > 4.5, s50
