"""Lyapunov spectra of dynlab models, against truths computed independently of the QR code."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from click.testing import CliRunner

import dynlab
from dynlab.analyses.lyapunov import lyapunov_analysis
from dynlab.analyses.state_map import protocol_inputs, run_in, state_map
from dynlab.analyses.lyapunov import interpret_spectrum
from dynlab.cli import main
from dynlab.analyses.lyapunov import DEFAULT_DRIVE as FRESH_DRIVE
from dynlab.errors import ConfigError
from dynlab.analyses.protocol import Drive, TaskStream
from dynlab.analyses.qr_settings import QRSettings


def fresh(unit, **kw):
    return dynlab.build("model", unit=unit, input_size=2, output_size=1, key=jax.random.key(5), **kw)


def test_fixed_point_exponents_are_log_eigenvalue_moduli():
    """At a stable fixed point every trajectory ends up at h*, and lambda_i = ln|eig_i(J(h*))|."""
    model = fresh("aru", hidden=6, n_g=3)
    smap = state_map(model)
    ds = lyapunov_analysis(model, qr=QRSettings(k=smap.dim), steps=3000, burn_in=1000, ics=3, x64=True,
                           input=Drive(0.0))
    with jax.enable_x64(True):
        inputs = protocol_inputs(model, 4000)
        h_star = run_in(smap, inputs)[-1]
        jac = np.asarray(jax.jacfwd(lambda h: smap.step(h, (jnp.zeros(2), 0.0)))(h_star))
    assert np.allclose(h_star, smap.step(h_star, (jnp.zeros(2), 0.0)), atol=1e-6)  # it is a fixed point
    truth = np.sort(np.log(np.abs(np.linalg.eigvals(jac))))[::-1]
    np.testing.assert_allclose(ds["mean"].values, truth, atol=2e-3)


def test_driven_sum_equals_mean_log_det():
    """Sum of all exponents = time-mean of ln|det J_t| along the driven trajectory (identity).

    Realisation r runs on the task inputs drawn from fold_in(k_in, r) from an initial condition
    drawn from fold_in(k_ic, r) (issue 22: the analysis repeats the measurement over input
    realisations); realisation 1 is checked here.
    """
    model = fresh("rnn", hidden=10, activation="tanh")
    task = dynlab.build("task", "adding", length=25)
    smap = state_map(model)
    ds = lyapunov_analysis(model, qr=QRSettings(k=10, reortho_every=1), steps=400, burn_in=0, input=TaskStream(task),
                           realisations=2, ics=1, ic_kind="random", ic_scale=0.5, seed=2, x64=True)
    # rebuild the same inputs and initial condition, then log|det J_t| with numpy
    key = jax.random.key(2)
    k_in, k_ic, _ = jax.random.split(key, 3)
    xs, xi = protocol_inputs(model, 400, task=task, key=jax.random.fold_in(k_in, 1))
    h = np.asarray(smap.h0 + 0.5 * jax.random.normal(jax.random.fold_in(k_ic, 1), (1, smap.dim))[0], np.float64)
    jac, step = jax.jit(jax.jacfwd(smap.step)), jax.jit(lambda h, u: smap.step(h, u))  # compiled, not op-by-op
    logdets = []
    with jax.enable_x64(True):
        for t in range(400):
            u = (jnp.asarray(xs[t], jnp.float64), jnp.float64(xi[t]))
            logdets.append(np.linalg.slogdet(np.asarray(jac(jnp.asarray(h), u)))[1])
            h = np.asarray(step(jnp.asarray(h), u))
    np.testing.assert_allclose(float(ds.exponents.sel(realisation=1, ic=0).sum()), np.mean(logdets), atol=1e-4)


def test_bad_options_raise_config_errors():
    model = fresh("rnn", hidden=4)
    with pytest.raises(ConfigError, match="exceeds the state dimension N = 4"):
        lyapunov_analysis(model, qr=QRSettings(k=5))
    with pytest.raises(ConfigError, match="steps must be a positive integer"):
        lyapunov_analysis(model, qr=QRSettings(k=2), steps=0)


def test_diverging_network_is_flagged_not_crashing():
    model = fresh("rnn", hidden=4, activation="relu")
    model = jax.tree_util.tree_map(lambda a: a, model)
    import equinox as eqx

    model = eqx.tree_at(lambda m: m.cells[0].w_hh, model, 1e3 * jnp.eye(4))
    with pytest.warns(RuntimeWarning, match="diverged"):
        ds = lyapunov_analysis(model, qr=QRSettings(k=2), steps=400, burn_in=10, ics=2, ic_kind="random",
                               input=Drive(1.0))
    assert bool(ds.diverged.all()) and np.all(np.isnan(ds.exponents.values))


def test_cli_lyapunov_fresh_and_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tiny = ["--set", "model.hidden=4", "--set", "model.n_g=2"]
    r = CliRunner().invoke(main, ["analyze", "lyapunov", "--model", "aru", "--steps", "200", "--burn-in", "50",
                                  "--k", "3", "--ics", "3", "--out", "fresh.nc", "-q", *tiny])
    assert r.exit_code == 0, r.output + r.stderr
    assert (tmp_path / "fresh.nc").is_file() and (tmp_path / "fresh.png").is_file()
    assert "Kaplan" in r.output
    ds = xr.load_dataset(tmp_path / "fresh.nc")
    # Issue 22: 5 realisations (the CI is over them) x 3 initial conditions each; QR every
    # reortho_every steps ("auto" by default), so the running estimate has 150 / m entries.
    m = ds.attrs["reortho_every"]
    assert ds.sizes == {"realisation": 5, "ic": 3, "exponent": 3, "time": -(-150 // m)}
    assert "freshly initialised" in ds.attrs["source"] and ds.attrs["reortho_requested"] == "auto"
    assert ds.attrs["ci_population"] == "5 trajectory stretches" and ds.attrs["ci_level"] == 0.95
    assert "95% CI (5 realisations)" in r.output and "multistab" in r.output
    # issue 23: a fresh model without --drive/--task is driven by FRESH_DRIVE; one line reads the numbers
    assert ds.attrs["drive"] == FRESH_DRIVE and ds.attrs["protocol"].startswith("constant drive")
    check_reading(r.output, ds)

    # test_cli's tiny ARU training (same chunk and held-out programs: the suite's compilation cache serves both)
    r = CliRunner().invoke(main, ["train", "--model", "aru", "--steps", "10", "--out", "run", "-q", *tiny,
                                  "--set", "train.batch_size=4", "--set", "task.length=6",
                                  "--set", "train.eval_size=8"])
    assert r.exit_code == 0, r.stderr
    # the fresh run's sizes (under the task's stream now): its compiled programs serve this one too
    r = CliRunner().invoke(main, ["analyze", "lyapunov", "--checkpoint", "run", "--steps", "200", "--burn-in", "50",
                                  "--k", "3", "--ics", "3", "--task", "adding", "-q"])
    assert r.exit_code == 0, r.output + r.stderr
    assert (tmp_path / "run" / "lyapunov.nc").is_file() and (tmp_path / "run" / "lyapunov.png").is_file()

    for args, fragment in [
        (["--checkpoint", "run", "--model", "rnn"], "holds a 'aru' model, not 'rnn'"),
        (["--checkpoint", "nope"], "does not exist"),
        (["--k", "1000", *tiny], "exceeds the state dimension"),
        (["--steps", "0", *tiny], "--steps must be an integer >= 1"),
        (["--steps", "100", "--burn-in", "100", *tiny], "burn_in must be"),
        (["--drive", "abc", *tiny], "--drive must be a number"),
        # issue 22: an interval needs 2 realisations; 'auto' QR intervals need a burn-in to measure the spread
        (["--realisations", "1", *tiny], "--realisations must be an integer >= 2"),
        (["--steps", "100", "--burn-in", "0", *tiny], "reortho_every='auto' measures the spread"),
        (["--model", "nope"], "unknown unit 'nope'"),
    ]:
        r = CliRunner().invoke(main, ["analyze", "lyapunov", "-q", *args])
        assert r.exit_code == 2, (args, r.output, r.stderr)
        assert r.stderr.startswith("error: ") and fragment in r.stderr and r.stderr.count("\n") == 1, r.stderr


def check_reading(output: str, ds) -> None:
    """The printed reading is the line of [`interpret_spectrum`][] and agrees with the dataset's λ1 and interval."""
    line = next(x for x in output.splitlines() if x.startswith("λ1 = "))
    assert line == interpret_spectrum(ds)
    value, half = (float(t) for t in line.split(" (")[0][len("λ1 = "):].split(" ± "))
    low, high = float(ds.ci_low[0]), float(ds.ci_high[0])  # exponent 1: the table's first row
    assert value == pytest.approx(float(ds["mean"][0]), abs=1e-5)
    assert half == pytest.approx((high - low) / 2, rel=0.06)
    assert half > 0 and ds.largest_ci_high > ds.largest_ci_low  # issue 22/23: never an interval of width 0
    verdict = "< 0: stable" if high < 0 else "> 0: chaotic" if low > 0 else "contains 0: marginal"
    assert verdict in line


def test_reading_follows_the_numbers():
    """interpret_spectrum: the sign of λ1's interval against 0 decides the reading; e^λ1 and 1/|λ1| come from λ1."""
    k = 3

    def spectrum(mean, half, ky=0.0):
        mean = np.asarray(mean, float)
        return xr.Dataset({"mean": ("exponent", mean), "ci_low": ("exponent", mean - half),
                           "ci_high": ("exponent", mean + half), "ky_dimension_mean": ky},
                          coords={"exponent": np.arange(1, k + 1)},
                          attrs={"ci_level": 0.95, "state_dim": 10})

    stable = interpret_spectrum(spectrum([-0.2, -0.3, -0.5], 0.01))
    assert stable.startswith("λ1 = -0.20000 ± 1.0e-02 (95% CI) < 0: stable") and f"{np.exp(-0.2):.3f} per step" in stable
    assert "(1/e in 5 steps)" in stable
    chaotic = interpret_spectrum(spectrum([0.2, 0.05, -0.5], 0.01, ky=2.5))  # the sign flipped
    assert chaotic.startswith("λ1 = +0.20000 ± 1.0e-02 (95% CI) > 0: chaotic") and f"{np.exp(0.2):.3f} per step" in chaotic
    assert "2 of 3 exponents > 0" in chaotic and "Kaplan–Yorke dim 2.50" in chaotic
    assert "Kaplan–Yorke dim >= 3.00" in interpret_spectrum(spectrum([0.3, 0.2, 0.1], 0.01, ky=3.0))  # k < N: a bound
    marginal = interpret_spectrum(spectrum([-0.004, -0.3, -0.5], 0.01))  # the interval straddles 0
    assert marginal.startswith("λ1 = -0.00400 ± 1.0e-02 (95% CI) contains 0: marginal") and "chaos neither" in marginal
    assert "no reading" in interpret_spectrum(spectrum([np.nan, -0.3, -0.5], 0.01))
