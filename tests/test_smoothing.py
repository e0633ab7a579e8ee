"""Smoothing of kinks (dynlab.rules.smoothing) and inference by continuation over smoothed energies
(dynlab.rules.pc_inference.Smoothed), against closed forms, a scalar root finder and the O(mu) law."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.optimize

from dynlab import experiment
from dynlab.analyses.pc_bp import length_task
from dynlab.errors import ConfigError
from dynlab.rules import pc_inference as pi
from dynlab.rules import pc_time
from dynlab.rules.smoothing import kinks, smooth
from dynlab.scenarios.every_unit import model_section



@pytest.fixture(autouse=True)
def x64():
    """float64 in this module's tests only (a global switch would leak into other modules on the worker)."""
    with jax.enable_x64(True):
        yield


def test_relu_and_max_over_an_axis_become_their_closed_forms_within_mu():
    mu = 1e-2
    x = jnp.linspace(-1.0, 1.0, 201, dtype=jnp.float64)
    relu = smooth(jax.nn.relu, mu)(x)  # through relu's custom_jvp and jit
    np.testing.assert_allclose(relu, 0.5 * (x + np.sqrt(np.asarray(x) ** 2 + 4 * mu**2)), rtol=0, atol=1e-15)
    assert np.all(relu > jax.nn.relu(x)) and np.all(relu - jax.nn.relu(x) <= mu)
    v = jax.random.normal(jax.random.key(0), (7, 50), jnp.float64)
    m = smooth(lambda v: jnp.max(v, axis=1), mu)(v)
    t = mu / np.log(50)
    np.testing.assert_allclose(m, t * scipy.special.logsumexp(np.asarray(v) / t, axis=1), rtol=1e-13)
    assert np.all(m >= v.max(axis=1)) and np.all(m - v.max(axis=1) <= mu)
    np.testing.assert_allclose(smooth(jnp.abs, mu)(x), np.sqrt(np.asarray(x) ** 2 + mu**2), atol=1e-15)


def test_only_kinks_that_depend_on_the_smoothed_arguments_change():
    def f(z, w):
        return jnp.tanh(z @ w) + jnp.maximum(w, 0.3) + jax.nn.relu(z)  # one kink in z, one in w alone

    z, w = jnp.linspace(-1, 1, 3), jnp.array([0.2, -0.5, 0.9])
    assert kinks(f, z, w) == {"max": 1}
    assert kinks(f, z, w, argnums=(0, 1)) == {"max": 2}
    mu = 1e-3
    expected = jnp.tanh(z @ w) + jnp.maximum(w, 0.3) + 0.5 * (z + jnp.sqrt(z**2 + 4 * mu**2))
    np.testing.assert_allclose(smooth(f, mu)(z, w), expected, rtol=0, atol=1e-15)
    smooth_fn = lambda z: jnp.sum(jnp.tanh(z) ** 2)  # noqa: E731
    assert not kinks(smooth_fn, z)
    assert smooth(smooth_fn, mu)(z) == smooth_fn(z)  # no kink: exactly the same function


def test_kinks_inside_a_scan_are_smoothed_and_differentiated():
    mu = 1e-2
    xs = jnp.array([1.0, -3.0, 2.0, -1.0])

    def run(xs):
        def body(c, x):
            c = jnp.maximum(0.5 * c + x, 0.0)
            return c, jnp.abs(c)
        return jax.lax.scan(body, 0.0, xs)

    assert kinks(run, xs) == {"max": 1, "abs": 1}
    c, ys = smooth(run, mu)(xs)
    h, expected = 0.0, []
    for x in np.asarray(xs):  # the same recurrence with the closed forms, by hand
        a = 0.5 * h + x
        h = 0.5 * (a + np.sqrt(a**2 + 4 * mu**2))
        expected.append(np.sqrt(h**2 + mu**2))
    np.testing.assert_allclose(ys, expected, rtol=1e-14)
    remat = jax.checkpoint(lambda xs: run(xs)[1])  # through jax.checkpoint too
    np.testing.assert_allclose(smooth(remat, mu)(xs), expected, rtol=1e-14)
    grad = jax.grad(lambda xs: smooth(run, mu)(xs)[0])(xs)
    fd = [(smooth(run, mu)(xs.at[i].add(1e-6))[0] - smooth(run, mu)(xs.at[i].add(-1e-6))[0]) / 2e-6 for i in range(4)]
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)


def _kink_problem():
    r"""$\mathcal F(z) = \frac12(z - \frac12)^2 + \frac12(1 + \mathrm{relu}(z))^2$ per sample: its minimum is the
    kink $z = 0$ (one-sided derivatives $-\frac12$ and $+\frac12$), so no gradient vanishes there."""
    def energies(z):
        z = z[:, 0]
        return 0.5 * (z - 0.5) ** 2 + 0.5 * (1.0 + jax.nn.relu(z)) ** 2

    return pi.Problem(energies, jnp.full((3, 1), 0.7, jnp.float64), 0)


def test_continuation_reaches_the_smoothed_minimum_of_a_kink_and_the_plain_method_cannot():
    problem = _kink_problem()
    method = pi.Descent(optax.sgd(0.02), pi.Criterion(rtol=1e-10, ftol=None, max_steps=20_000))
    plain = jax.jit(lambda: method(problem))()
    assert not plain.converged and plain.grad_norm > 0.1  # it oscillates across the kink
    mu = 1e-2
    result = jax.jit(lambda: pi.Smoothed(method, (1e-1, mu))(problem))()
    assert result.converged

    def derivative(z):  # F_mu'(z), by hand
        r = 0.5 * (z + np.sqrt(z * z + 4 * mu * mu))
        return (z - 0.5) + (1 + r) * 0.5 * (1 + z / np.sqrt(z * z + 4 * mu * mu))

    root = scipy.optimize.brentq(derivative, -1, 1, xtol=1e-15)
    np.testing.assert_allclose(result.z[:, 0], root, atol=1e-9)
    assert abs(root) < mu  # within mu of the kink minimum z = 0
    # the criterion's g_0 is the smoothed energy's gradient at the forward pass, not at the warm start
    g0 = abs(jax.grad(lambda z: jnp.sum(smooth(problem.sample_energies, mu)(z)))(problem.z0)[0, 0])
    np.testing.assert_allclose(result.grad_norm0, g0, rtol=1e-12)


def _float64(tree):
    return jax.tree_util.tree_map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, tree)


def _problem(unit, width=8, length=5, batch=4):
    exp = experiment.build({"seed": 0, "model": model_section(unit, width), "task": {"name": "adding", "length": length}})
    x, y, m = (a.astype(jnp.float64) for a in length_task("adding")(length).batch(jax.random.key(0), batch, "train"))
    return pc_time.problem(_float64(exp.model), x, y, m, exp.task.loss)


def test_elm_neuron_inference_converges_smoothed_and_its_equilibria_converge_like_mu():
    """The ELM neuron's energy has a ReLU kink at its minimum: L-BFGS alone never meets the gradient test;
    on the smoothed energies it does at every width, and the equilibria z_mu form a Cauchy sequence at the
    O(mu) rate smoothing theory gives (the step from 1e-3 to 1e-4 about a tenth of that from 1e-2 to 1e-3;
    measured 0.13 and 0.125 for the next decade), so they approach one point: a Clarke-stationary one."""
    problem = _problem("elm")
    assert kinks(problem.sample_energies, problem.z0)
    inner = pi.lbfgs(pi.Criterion(rtol=1e-8, ftol=None, max_steps=2000))
    widths = (1e-2, 1e-3, 1e-4)
    result = jax.jit(lambda: pi.Smoothed(inner, widths)(problem))()
    assert result.converged and result.smoothing == widths[-1]  # so the exact attempt did not converge
    energy = smooth(lambda z: jnp.sum(problem.sample_energies(z)), widths[-1])
    g = jax.jit(lambda z: optax.tree.norm(jax.grad(energy)(z)))(result.z)  # the gradient test, recomputed here
    assert g <= 1e-8 * float(result.grad_norm0) * 4  # worst sample <= rtol g0, so the 4-sample total <= 4x

    @jax.jit
    def stages():  # the continuation by hand, from the forward pass (one solve compiled for the three widths)
        def stage(z, mu):
            z = inner(pi.smoothed_problem(problem, mu)._replace(z0=z, reference=problem.z0)).z
            return z, z
        return jax.lax.scan(stage, problem.z0, jnp.asarray(widths))[1]

    stacked = stages()
    zs = [jax.tree_util.tree_map(lambda a, i=i: a[i], stacked) for i in range(len(widths))]
    step = [float(optax.tree.norm(jax.tree_util.tree_map(jnp.subtract, a, b))) for a, b in zip(zs, zs[1:])]
    assert step[1] < 0.25 * step[0]


def test_where_the_exact_energy_converges_smoothing_changes_nothing():
    """The ARU's energy has kinks (the floor of its gain, |x| in its controller) but its minimum does not
    sit on one: the exact attempt converges and is returned (smoothing 0), the same solve as without
    smoothing. It is one solve compiled inside two different programs, and XLA need not round two
    programs alike: bit for bit under XLA's default CPU emitters, 60 of 160 elements apart by at most
    3.9e-16 (relative 9.6e-15) under the older emitters the suite compiles with. So the states are
    compared to 1e-12 relative, about a hundred times that difference; ``smoothing == 0`` says that
    the exact attempt is the one returned. An energy without kinks is handed to the inner method as it is."""
    problem = _problem("aru")
    assert kinks(problem.sample_energies, problem.z0)
    inner = pi.lbfgs(pi.Criterion(max_steps=100))
    a, b = jax.jit(lambda: inner(problem))(), jax.jit(lambda: pi.Smoothed(inner, (1e-2,))(problem))()
    assert a.converged and b.smoothing == 0
    for u, v in zip(jax.tree_util.tree_leaves(a.z), jax.tree_util.tree_leaves(b.z)):
        np.testing.assert_allclose(u, v, rtol=1e-12, atol=0)
    quadratic = pi.Problem(lambda z: 0.5 * jnp.sum((z - 0.5) ** 2, axis=1), jnp.zeros((2, 3)), 0)
    descent = pi.Descent(optax.sgd(0.5), pi.Criterion(ftol=None))
    plain, smoothed = descent(quadratic), pi.Smoothed(descent)(quadratic)
    assert smoothed.smoothing is None and smoothed.converged
    np.testing.assert_array_equal(plain.z, smoothed.z)


@pytest.mark.parametrize("widths, message", [((), "non-empty"), ((1e-3, 1e-2), "decrease"), ((1e-2, -1.0), "positive"),
                                             ("1e-2", "non-empty list")])
def test_bad_smoothing_widths_are_one_line_errors(widths, message):
    with pytest.raises(ConfigError, match=message):
        pi.from_config("lbfgs", smoothing=widths)


def test_smoothing_needs_an_iterative_inference():
    with pytest.raises(ConfigError, match="closed-form"):
        pi.from_config("closed-form", smoothing=[1e-2])
    with pytest.raises(ConfigError, match="continues an iterative"):
        pi.Smoothed(pi.Smoothed(pi.lbfgs()))


def test_smoothed_solves_in_float64_inside_a_float32_program_match_a_float64_program():
    """SITH-RNN's max over tau at mu = 1e-3, where float32 can stop resolving L-BFGS's progress: with
    ``x64`` the smoothed solves run on the problem restated in float64 (``Problem.astype``) and the
    result comes back in float32. Measured (width 16, T = 10, 4 samples), under XLA's default CPU
    emitters: float32 gives up after 2041 steps, float64 converges in 1140. Whether float32 gives up
    depends on its rounding: under the older emitters the suite compiles with, the same float32 solve
    converged, so that failure is not asserted here; what ``x64`` promises is. Truth: the same
    continuation (L-BFGS on the smoothed energies at 1e-2, then at 1e-3 from where that ended) in a
    program that is float64 throughout, from the same float32 weights, and the restated energy equal
    to the float32 one to float32 rounding. The reference continuation starts from the forward pass
    (``Smoothed`` starts it where its exact attempt ended): the same smoothed minimum reached from
    another start, and a program without the exact attempt, whose L-BFGS would be compiled once more.
    Sizes cut to width 8, T = 5, 4 samples (nothing asserted depends on the float32 failure): measured,
    the float64 solves take 43 and 54 steps (300 given each, so the exact attempts, which cannot
    converge on the kink, cost little) and the two results are 9.9e-7 apart relative, against the bar
    1e-4 (1.0e-6 at width 16, T = 10)."""
    enough = pi.lbfgs(pi.Criterion(max_steps=300))
    with jax.enable_x64(False):
        exp = experiment.build({"seed": 0, "model": model_section("sith-rnn", 8), "task": {"name": "adding", "length": 5}})
        x, y, m = length_task("adding")(5).batch(jax.random.key(0), 4, "train")
        problem = pc_time.problem(exp.model, x, y, m, exp.task.loss)
        smoothed = pi.Smoothed(enough, x64=True)  # the default widths, 1e-2 and 1e-3
        mixed = jax.jit(lambda: smoothed(problem))()
        f32 = jax.jit(problem.sample_energies)(problem.z0)  # compiled: op by op costs more CPU
    assert mixed.converged and mixed.smoothing == np.float32(1e-3)
    assert {a.dtype for a in jax.tree_util.tree_leaves(mixed.z)} == {np.dtype(np.float32)}
    assert mixed.steps.dtype == np.int32 and mixed.energy.dtype == np.float32
    # the float64 program: every array of the float32 problem cast, the continuation by hand
    wide = problem.astype(jnp.float64)
    np.testing.assert_allclose(jax.jit(wide.sample_energies)(wide.z0), f32, rtol=1e-5)

    @jax.jit
    def reference():
        def stage(z, mu):
            result = enough(pi.smoothed_problem(wide, mu)._replace(z0=z, reference=wide.z0))
            return result.z, result
        return jax.lax.scan(stage, wide.z0, jnp.asarray(smoothed.widths))[1]

    stages = reference()
    assert stages.converged.all()
    last = jax.tree_util.tree_map(lambda a: a[-1], stages.z)
    distance = optax.tree.norm(jax.tree_util.tree_map(lambda a, b: a - b, _float64(mixed.z), last))
    assert distance <= 1e-4 * optax.tree.norm(last)


def test_float64_smoothing_is_checked():
    with pytest.raises(ConfigError, match="smoothing_x64 .* needs rule.smoothing"):
        pi.from_config("lbfgs", smoothing_x64=True)
    with pytest.raises(ConfigError, match="true or false"):
        pi.Smoothed(pi.lbfgs(), x64="yes")
    with pytest.raises(ConfigError, match="restated in float64"):  # a problem without astype
        pi.Smoothed(pi.Descent(optax.sgd(0.02)), (1e-1,), x64=True)(_kink_problem())


def test_smoothed_solves_run_without_the_inner_methods_patience():
    """Patience gives a solve up where a kink stops the gradient from vanishing; the smoothed energies
    have none. With patience 1 the smoothed solves would stop as soon as one step fails to halve the
    gradient; the continuation still converges on the kink problem, as without patience."""
    inner = pi.ErrorCoordinates(pi.lbfgs().solver, pi.Criterion(rtol=1e-10, ftol=None, max_steps=500), patience=1)
    problem = _kink_problem()
    energies = problem.sample_energies
    form = pi.SumOfSquares(problem.z0, lambda z, d: (z - 0.5, 1.0 + jax.nn.relu(z)),
                           lambda e, d: (e + 0.5, 1.0 + jax.nn.relu(e + 0.5)))
    problem = problem._replace(least_squares=form)
    alone = jax.jit(lambda: inner(pi.smoothed_problem(problem, 1e-2)))()
    assert not alone.converged  # patience 1 gives a smoothed solve up
    result = jax.jit(lambda: pi.Smoothed(inner, (1e-1, 1e-2))(problem))()
    assert result.converged and result.smoothing == 1e-2
    np.testing.assert_allclose(energies(result.z), energies(jax.jit(
        lambda: pi.Smoothed(pi.lbfgs(pi.Criterion(rtol=1e-10, ftol=None, max_steps=500)), (1e-1, 1e-2))(problem))().z),
        rtol=1e-9)


def test_both_rules_restate_their_problem_in_float64():
    """``Problem.astype``: the feed-forward and the through-time problems in float64 have the float32
    problems' energies (to float32 rounding) and float64 arrays throughout."""
    from dynlab import ffmodels
    from dynlab.rules import pc

    with jax.enable_x64(False):
        mlp = ffmodels.FeedForward(3, 2, width=5, depth=4, activation="relu", key=jax.random.key(2))
        x, y = jax.random.normal(jax.random.key(3), (6, 3)), jax.random.normal(jax.random.key(4), (6, 2))
        exp = experiment.build({"seed": 0, "model": model_section("elm", 8), "task": {"name": "adding", "length": 5}})
        xs, ys, m = length_task("adding")(5).batch(jax.random.key(0), 4, "train")
        problems = [pc.problem(mlp, x, y), pc_time.problem(exp.model, xs, ys, m, exp.task.loss)]
        energies = [jax.jit(p.sample_energies)(p.z0) for p in problems]  # compiled: op by op costs more CPU
    for p, f32 in zip(problems, energies):
        wide = p.astype(jnp.float64)
        assert {a.dtype for a in jax.tree_util.tree_leaves(wide.z0)} == {np.dtype(np.float64)}
        f64 = jax.jit(wide.sample_energies)(wide.z0)
        assert f64.dtype == np.float64
        np.testing.assert_allclose(f64, f32, rtol=1e-5, atol=1e-7)
