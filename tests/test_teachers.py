"""Teachers against truths the code did not produce: closed forms (the rate network's Jacobian at
its fixed point 0, the line attractor's one eigenvalue 1), published values (Lorenz-63's spectrum,
Kaplan-Yorke dimension and fixed points), Sompolinsky-Crisanti-Sommers (the network at g = 1.5 is
chaotic), and the flip-flop's 2^N memories. Each fingerprint is measured by dynlab's own analyses
([`dynlab.analyses.recovery.fingerprint`][]); the full-size chaotic teacher (N = 200) is
`benchmarks/teachers.py`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab import experiment, registry
from dynlab.analyses.fixed_points import jacobian_eigenvalues
from dynlab.analyses.lyapunov import lyapunov_replicates
from dynlab.analyses.recovery.fingerprint import FingerprintOptions, fingerprint, of_teacher
from dynlab.analyses.recovery.spectrum_score import positive_exponents
from dynlab.teachers.lorenz import Lorenz63
from dynlab.teachers.network import chaotic_rnn
from cli_runner import invoke, one_line_error

LORENZ = np.array([0.9056, 0.0, -14.5723])  # Sprott (2003), Table A.2, per unit time
LORENZ_KY = 2.0621


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNLAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_rate_network_jacobian_at_zero_is_the_closed_form():
    teacher = chaotic_rnn(jax.random.key(3), n=40, g=1.5, alpha=1 / 30)
    w = np.asarray(teacher.model.cells[0].w, np.float64)
    with jax.enable_x64(True):
        mu = jacobian_eigenvalues(teacher.step, jnp.zeros((1, 40)), jnp.zeros(1))[0]
    expected = 1 - 1 / 30 + np.linalg.eigvals(w) / 30  # (1 - a) I + a W phi'(0), phi'(0) = 1
    assert np.allclose(np.sort_complex(mu), np.sort_complex(expected), atol=1e-6)
    assert abs(teacher.step(jnp.zeros(40), jnp.zeros(1))).max() == 0  # 0 is a fixed point


def test_lorenz_spectrum_dimension_and_fixed_points_are_the_published_ones():
    teacher = Lorenz63()
    options = FingerprintOptions(trials=6, realisations=6, ics=24, steps=3000, lyapunov_burn_in=300)
    fixed, spectrum = fingerprint(of_teacher(teacher), teacher.inputs(jax.random.key(0), 6, 200), options)
    rates_low, rates_high = spectrum.ci_low.values / teacher.dt, spectrum.ci_high.values / teacher.dt
    assert np.all((rates_low <= LORENZ) & (LORENZ <= rates_high)), (rates_low, rates_high)
    assert float(spectrum.ky_dimension_ci_low) <= LORENZ_KY <= float(spectrum.ky_dimension_ci_high)
    assert positive_exponents(spectrum) == 1
    c = np.sqrt(8 / 3 * 27)
    expected = np.array([[0, 0, 0], [c, c, 27], [-c, -c, 27]])
    found = fixed.points.values[fixed.is_fixed.values]
    assert len(found) == 3
    for point in expected:
        assert np.min(np.linalg.norm(found - point, axis=1)) < 1e-6
    origin = np.argmin(np.linalg.norm(found, axis=1))
    assert int(fixed.n_unstable.values[fixed.is_fixed.values][origin]) == 1  # a saddle with one unstable direction
    # C+-: eigenvalues -13.8546 and 0.0940 +- 10.1945i (the flow's Jacobian), over one step dt
    others = fixed.eig_abs.values[fixed.is_fixed.values][np.arange(3) != origin]
    assert np.allclose(np.sort(others, axis=1), np.exp(teacher.dt * np.array([-13.8546, 0.0940, 0.0940])), atol=1e-4)


def test_the_default_chaotic_teacher_has_a_positive_exponent():
    # Sompolinsky-Crisanti-Sommers: chaos for g > 1 as N -> infinity; at N = 200 it depends on the
    # drawn network, and the task's default teacher_seed is the one measured chaotic (its docstring).
    # The top exponent only (the full spectrum of N = 200 is benchmarks/teachers.py), same analysis.
    teacher = registry.build("task", "teacher-chaotic-rnn").teacher
    assert teacher.state_size == 200 and teacher.model.cells[0].alpha == pytest.approx(1 / 30)
    states = of_teacher(teacher).visit(teacher.inputs(jax.random.key(1), 3, 600))
    h0s = jnp.asarray(states[:, -1][:, None], jnp.float32)
    ds = lyapunov_replicates(teacher.step, h0s, jnp.zeros((3, 6000, 1)), 1, burn_in=600, key=jax.random.key(0))
    assert float(ds.ci_low.values[0]) > 0


def test_flipflop_teacher_is_trained_once_and_read_back(cache):
    # training to the 2^N stable points takes a minute (benchmarks/teachers.py; the same truth for a
    # GRU trained by dynlab: tests/test_flipflop_truth.py); here the cache: one run directory, read back
    task = registry.build("task", "teacher-flipflop", bits=2, hidden=8, train_steps=3, length=16)
    (run,) = (cache / "teachers").glob("flipflop-*")
    assert {"config.toml", "model.eqx", "metrics.nc", "checksums.toml"} <= {p.name for p in run.iterdir()}
    before = (run / "model.eqx").read_bytes()
    again = registry.build("task", "teacher-flipflop", bits=2, hidden=8, train_steps=3, length=16)
    assert (run / "model.eqx").read_bytes() == before
    assert np.array_equal(np.asarray(again.teacher.model.readout.weight), np.asarray(task.teacher.model.readout.weight))
    x, y, _ = task.batch(jax.random.key(0), 2)
    assert x.shape == (2, 16, 2) and y.shape == (2, 16, 2)


def test_teacher_batches_are_its_trials_and_reproduce():
    config = {"seed": 0, "model": {"unit": "gru", "hidden": 4}, "rule": {"name": "bptt"}, "train": {},
              "task": {"name": "teacher-chaotic-rnn", "n": 20, "length": 50, "latents": 5, "kick": 10}}
    experiment.check(config)  # a scenario checks every cell's config abstractly: the teacher is built all the same
    task = registry.build("task", "teacher-chaotic-rnn", n=20, length=50, latents=5, kick=10)
    x, y, mask = task.batch(jax.random.key(4), 3)
    again = task.batch(jax.random.key(4), 3)
    assert all(np.array_equal(a, b) for a, b in zip((x, y, mask), again))
    latents, _ = jax.vmap(task.teacher.run)(x)
    assert np.array_equal(np.asarray(y), np.asarray(latents[..., :5]))
    assert float(jnp.abs(x[:, 10:]).max()) == 0 < float(jnp.abs(x[:, :10]).max())  # the kick: the first 10 steps


def test_an_observation_the_teacher_cannot_give_is_one_line(tmp_path):
    result = invoke(["train", "--model", "gru", "--task", "teacher-lorenz", "--set", "task.latents=4",
                     "--set", "train.steps=1", "--out", "run"], tmp_path)
    one_line_error(result, "task.latents = 4", "3 components")
    assert not (tmp_path / "run" / "model.eqx").exists()
