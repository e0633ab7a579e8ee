"""Teachers against truths the code did not produce: closed forms (the rate network's Jacobian at
its fixed point 0, the line attractor's one eigenvalue 1), published values (Lorenz-63's spectrum,
Kaplan-Yorke dimension and fixed points), Sompolinsky-Crisanti-Sommers (the network at g = 1.5 is
chaotic), and the flip-flop's 2^N memories. Each fingerprint is measured by dynlab's own analyses
([`dynlab.analyses.recovery.fingerprint`][]); the full-size chaotic teacher (N = 200) is
`benchmarks/teachers.py`."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab import registry
from dynlab.analyses.fixed_points import jacobian_eigenvalues
from dynlab.analyses.recovery.fingerprint import FingerprintOptions, fingerprint, of_teacher
from dynlab.analyses.recovery.truth import teacher_truth, truth_dir
from dynlab.teachers.lorenz import Lorenz63
from dynlab.teachers.network import chaotic_rnn, line_attractor
from tests.cli_runner import invoke, one_line_error

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


def test_line_attractor_has_exactly_one_marginal_direction(cache):
    alpha = 0.1
    teacher = line_attractor(jax.random.key(0), n=6, alpha=alpha)
    options = FingerprintOptions(trials=4, realisations=2, ics=16, steps=300, lyapunov_burn_in=50)
    fixed, spectrum = teacher_truth(teacher, 60, options)
    assert fixed.sizes["point"] >= 4 and set(fixed.stability.values) == {"marginal"}
    assert (fixed.n_marginal.values == 1).all()
    # closed form: eigenvalue 1 along u, 1 - alpha in the 5 other directions, at every point
    assert np.allclose(fixed.eig_abs.values[:, 0], 1, atol=1e-9)
    assert np.allclose(fixed.eig_abs.values[:, 1:], 1 - alpha, atol=1e-9)
    u = np.asarray(teacher.model.readout.weight[0], np.float64)
    along = fixed.points.values @ u
    assert np.allclose(fixed.points.values, np.outer(along, u), atol=1e-6)  # the points lie on the line c u
    assert spectrum.ci_low.values[0] <= 0 <= spectrum.ci_high.values[0]
    assert np.allclose(spectrum["mean"].values[1:], np.log(1 - alpha), atol=1e-6)
    # stored once, read back the same
    assert sorted(p.name for p in truth_dir(teacher, 60, options).iterdir()) == ["fixed-points.nc", "lyapunov.nc"]
    again, _ = teacher_truth(teacher, 60, options)
    assert np.array_equal(again.points.values, fixed.points.values)


def test_lorenz_spectrum_dimension_and_fixed_points_are_the_published_ones():
    teacher = Lorenz63()
    options = FingerprintOptions(trials=6, realisations=6, ics=24, steps=3000, lyapunov_burn_in=300)
    fixed, spectrum = fingerprint(of_teacher(teacher), teacher.inputs(jax.random.key(0), 6, 200), options)
    rates_low, rates_high = spectrum.ci_low.values / teacher.dt, spectrum.ci_high.values / teacher.dt
    assert np.all((rates_low <= LORENZ) & (LORENZ <= rates_high)), (rates_low, rates_high)
    assert float(spectrum.ky_dimension_ci_low) <= LORENZ_KY <= float(spectrum.ky_dimension_ci_high)
    assert int(round(float(spectrum.n_positive_mean))) == 1
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


def test_chaotic_rate_network_at_g_1_5_has_a_positive_exponent():
    # a smaller network than the teacher's N = 200 (benchmarks/teachers.py), same code path
    teacher = chaotic_rnn(jax.random.key(0), n=100)
    options = FingerprintOptions(trials=3, realisations=3, ics=8, steps=1500, lyapunov_burn_in=300, burn_in=200)
    _, spectrum = fingerprint(of_teacher(teacher), teacher.inputs(jax.random.key(1), 3, 400), options)
    assert float(spectrum.ci_low.values[0]) > 0
    assert float(spectrum.ky_dimension_mean) > 1


def test_flipflop_teacher_has_a_stable_point_at_every_corner(cache):
    # the configuration of tests/test_flipflop_truth.py (2 bits, 16 GRU units), trained by the teacher itself
    task = registry.build("task", "teacher-flipflop", bits=2, hidden=16, train_steps=600, length=32)
    assert len(list((cache / "teachers").glob("flipflop-*/model.eqx"))) == 1
    teacher = task.teacher
    options = FingerprintOptions(trials=8, realisations=2, ics=64, steps=200, lyapunov_burn_in=50, burn_in=5)
    fixed, spectrum = fingerprint(of_teacher(teacher), teacher.inputs(jax.random.key(0), 8, 32), options)
    stable = fixed.points.values[fixed.stability.values == "stable"]
    readouts = np.array([np.asarray(teacher.model.readout(jnp.asarray(p, jnp.float32))) for p in stable])
    corners = {tuple(np.sign(r).astype(int)) for r in readouts if np.all(np.abs(np.abs(r) - 1) < 0.2)}
    assert corners == set(itertools.product((-1, 1), repeat=2)) and len(stable) == 4
    assert float(spectrum.ci_high.values[0]) < 0  # every memory is an attractor
    # a second build reads the cached teacher: the same arrays
    again = registry.build("task", "teacher-flipflop", bits=2, hidden=16, train_steps=600, length=32)
    assert np.array_equal(np.asarray(again.teacher.model.readout.weight), np.asarray(teacher.model.readout.weight))


def test_teacher_batches_are_its_trials_and_reproduce():
    task = registry.build("task", "teacher-lorenz", length=50, latents=3, noise=0.0)
    x, y, mask = task.batch(jax.random.key(4), 3)
    again = task.batch(jax.random.key(4), 3)
    assert all(np.array_equal(a, b) for a, b in zip((x, y, mask), again))
    latents, _ = jax.vmap(task.teacher.run)(x)
    assert np.array_equal(np.asarray(y), np.asarray(latents))
    assert float(jnp.abs(x[:, 20:]).max()) == 0  # the kick ends after 20 steps


def test_an_observation_the_teacher_cannot_give_is_one_line(tmp_path):
    result = invoke(["train", "--model", "gru", "--task", "teacher-lorenz", "--set", "task.latents=4",
                     "--set", "train.steps=1", "--out", "run"], tmp_path)
    one_line_error(result, "task.latents = 4", "3 components")
    assert not (tmp_path / "run" / "model.eqx").exists()
