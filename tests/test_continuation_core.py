"""The numerical core of continuation (dynlab.analyses.continuation) against closed-form truths.

Every truth comes from the maps' algebra, not from the code: for h <- tanh(w h + u) a fixed point
is a fold where F'(h) = w (1 - h^2) = 1, so h*^2 = 1 - 1/w and u* = atanh(h*) - w h*; at u = 0
the origin loses stability through mu = w = 1 (a pitchfork, by the symmetry h -> -h) and through
mu = w = -1 (a flip); for h <- tanh(g R(theta) h) the origin's multipliers are g e^{+-i theta}.
"""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab.analyses.continuation import ContinuationSettings, continue_branch, fold_curve, trace


class ScalarTanh(eqx.Module):
    """h <- tanh(w h + u), continued in u (the weight an array, so one compilation serves every w)."""

    w: jax.Array

    def __call__(self, h, u):
        return jnp.tanh(self.w * h + u)


def scalar_tanh(w: float) -> ScalarTanh:
    with jax.enable_x64(True):
        return ScalarTanh(jnp.asarray(w, jnp.float64))


def fold_truth(w: float) -> tuple[float, float]:
    """The upper fold (h* > 0, u* < 0) of h <- tanh(w h + u)."""
    h = np.sqrt(1.0 - 1.0 / w)
    return float(np.arctanh(h) - w * h), float(h)


@pytest.mark.parametrize(("w", "u_published"), [(1.5, 0.207546), (2.0, 0.532840), (3.0, 1.303274)])
def test_folds_of_the_scalar_tanh_map(w, u_published):
    u_star, h_star = fold_truth(w)
    assert abs(abs(u_star) - u_published) < 1e-6  # the closed form agrees with the values
    span = (-1.0 - w, 1.0 + w)
    branch, points = continue_branch(scalar_tanh(w), np.array([-0.999]), span[0], span)
    folds = sorted((p for p in points if p.kind == "fold"), key=lambda p: p.p)
    assert len(folds) == 2
    assert [pt.p for pt in folds] == pytest.approx([u_star, -u_star], abs=1e-8)
    assert [pt.h[0] for pt in folds] == pytest.approx([h_star, -h_star], abs=1e-6)
    assert all(abs(pt.multiplier - 1) < 1e-6 for pt in folds)
    # the S-shaped branch: from one end of the span to the other, stable, saddle, stable
    assert branch.p[0] == pytest.approx(span[0]) and branch.p[-1] == pytest.approx(span[1])
    assert np.all(np.abs(np.tanh(w * branch.h[:, 0] + branch.p) - branch.h[:, 0]) < 1e-9)
    changes = np.flatnonzero(np.diff(branch.n_unstable))
    assert list(branch.n_unstable[[0, changes[0] + 1, -1]]) == [0, 1, 0] and len(changes) == 2
    # each fold sits where the stability changes
    assert sorted(pt.index for pt in folds) == sorted(changes.tolist())


def test_a_branch_ends_on_the_boundary_of_its_span():
    branch, points = continue_branch(scalar_tanh(0.5), np.array([0.0]), 0.0, (-0.3, 0.4))
    assert branch.p[0] == pytest.approx(-0.3, abs=1e-12) and branch.p[-1] == pytest.approx(0.4, abs=1e-12)
    assert np.all(np.diff(branch.p) > 0) and points == ()  # contracting (w < 1): no bifurcation
    assert np.all(branch.n_unstable == 0)


def test_a_seed_that_is_not_a_fixed_point_is_refused():
    flat = ContinuationSettings(newton_max_iter=1)
    with pytest.raises(ValueError, match="no fixed point"):
        continue_branch(scalar_tanh(3.0), np.array([5.0]), 0.0, (-1.0, 1.0), flat)


def test_pitchfork_in_w_and_both_switched_halves():
    """h <- tanh(w h) at u = 0: the origin is a branch point at w = 1; switching follows h = +-h(w)."""
    diagram = trace(lambda h, w: jnp.tanh(w * h), np.zeros((1, 1)), 0.5, (0.5, 1.5))
    bps = [pt for pt in diagram.points if pt.kind == "branch-point"]
    assert len(bps) == 1 and bps[0].p == pytest.approx(1.0, abs=1e-8) and abs(bps[0].h[0]) < 1e-8
    assert abs(bps[0].multiplier - 1) < 1e-6
    assert len(diagram.branches) == 2  # the origin, and one curve through it holding both halves
    switched = diagram.branches[1]
    assert np.all(switched.p >= 1.0 - 1e-12)
    # both halves reach w = 1.5, where h solves h = tanh(1.5 h) (by bisection, independently)
    lo, hi = 0.1, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.tanh(1.5 * mid) > mid else (lo, mid)
    ends = np.sort(switched.h[[0, -1], 0])
    assert switched.p[[0, -1]] == pytest.approx([1.5, 1.5], abs=1e-12)
    assert ends == pytest.approx([-lo, lo], abs=1e-9)
    # the origin is stable below w = 1 and unstable above; the switched branch is stable
    origin = diagram.branches[0]
    assert np.all(origin.n_unstable == (origin.p > 1.0))
    assert np.all(switched.n_unstable == 0)


def test_flip_and_the_period_two_cycle_born_there():
    """h <- tanh(w h): a flip of the origin at w = -1, and a 2-cycle {a, -a} for w < -1."""
    F = lambda h, w: jnp.tanh(w * h)  # noqa: E731
    diagram = trace(F, np.zeros((1, 1)), -0.5, (-1.5, -0.5))
    flips = [pt for pt in diagram.points if pt.kind == "flip"]
    assert len(flips) == 1 and flips[0].p == pytest.approx(-1.0, abs=1e-8)
    assert abs(flips[0].multiplier + 1) < 1e-6
    cycles = [b for b in diagram.branches if b.period == 2]
    assert len(cycles) == 1
    cycle = cycles[0]
    away = np.abs(cycle.h[:, 0]) > 1e-3
    h, w = cycle.h[away, 0], cycle.p[away]
    assert np.all(w <= -1.0 + 1e-12)
    assert np.max(np.abs(np.tanh(w * np.tanh(w * h)) - h)) < 1e-9  # a fixed point of F o F ...
    assert np.min(np.abs(np.tanh(w * h) - h)) > 1e-3  # ... and not of F
    assert np.max(np.abs(np.tanh(w * h) + h)) < 1e-9  # F maps a to -a


def test_neimark_sacker_of_a_rotation():
    """h <- tanh(g R(1) h): the origin's multipliers are g e^{+-i}, so a pair leaves the unit circle at g = 1."""
    theta = 1.0
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    _, points = continue_branch(lambda h, g: jnp.tanh(g * (rot @ h)), np.zeros(2), 0.5, (0.5, 1.5))
    assert [pt.kind for pt in points] == ["neimark-sacker"]
    assert points[0].p == pytest.approx(1.0, abs=1e-8)
    assert points[0].multiplier == pytest.approx(np.exp(1j * theta), abs=1e-6)


def test_a_complex_pair_that_turns_real_off_the_circle_is_no_neimark_sacker_point():
    """h <- tanh(A(p) h), A = [[1.5, 1], [p, 1.5]]: the origin's multipliers 1.5 +- sqrt(p) are a
    complex pair of modulus sqrt(2.25 - p) > 1 for p < 0 and two reals in (1.05, 1.95) for p in
    (0, 0.2]: the pair meets on the real axis outside the circle, and nothing crosses it. The count
    of complex multipliers outside the circle changes at p = 0 all the same (it gave a spurious
    Neimark-Sacker crossing, then a 'could not be located' warning, before detection also asked the
    count inside to change the other way)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'could not be located' warning either
        branch, points = continue_branch(lambda h, p: jnp.tanh(jnp.array([[1.5, 1.0], [p, 1.5]]) @ h),
                                         np.zeros(2), -0.2, (-0.2, 0.2))
    assert len(points) == 0
    assert branch.p.min() == pytest.approx(-0.2) and branch.p.max() == pytest.approx(0.2)
    assert np.all(branch.n_unstable == 2)  # both multipliers outside the circle all along


def test_fold_curve_in_w_and_its_cusp_at_w_1_u_0():
    F2 = lambda h, u, w: jnp.tanh(w * h + u)  # noqa: E731
    _, points = continue_branch(lambda h, u: F2(h, u, 2.0), np.array([0.9]), 1.0, (-1.5, 1.5))
    fold = next(pt for pt in points if pt.kind == "fold")
    curve, cusps = fold_curve(F2, fold, 2.0, (0.5, 3.0))
    # every point of the curve is a fold of its own w: h^2 = 1 - 1/w, u = atanh(h) - w h
    assert np.max(np.abs(curve.h[:, 0] ** 2 - (1 - 1 / curve.q))) < 1e-9
    assert np.max(np.abs(np.arctanh(curve.h[:, 0]) - curve.q * curve.h[:, 0] - curve.p)) < 1e-9
    assert np.all(curve.q >= 1.0 - 1e-9) and curve.q[[0, -1]] == pytest.approx([3.0, 3.0])  # no fold below w = 1
    assert len(cusps) == 1
    assert (cusps[0].q, cusps[0].p) == pytest.approx((1.0, 0.0), abs=1e-6)


class Copies(eqx.Module):
    """h <- Q tanh(w * (Q^T h) + u): N copies of the scalar map (weights w), mixed by an orthogonal Q.

    In y = Q^T h the copies decouple, so the folds are those of the scalar maps: the copy with the
    largest w > 1 folds first, at its closed-form u*."""

    w: jax.Array
    q: jax.Array

    def __call__(self, h, u):
        return self.q @ jnp.tanh(self.w * (self.q.T @ h) + u)


def copies(n: int, mixed: bool) -> tuple[eqx.Module, np.ndarray, float]:
    """The map (mixed by a random Q, or decoupled: ScalarTanh with a vector of weights), a seed on
    the upper branch just above the fold of the w = 2 copy, and that seed's u."""
    rng = np.random.default_rng(0)
    w = np.concatenate([[2.0], 0.9 * 0.99 ** np.arange(n - 1)])
    q = np.linalg.qr(rng.standard_normal((n, n)))[0] if mixed else np.eye(n)
    u0 = fold_truth(2.0)[0] + 2e-4
    y = np.ones(n)
    for _ in range(400):
        y = np.tanh(w * y + u0)
    with jax.enable_x64(True):
        F = Copies(jnp.asarray(w), jnp.asarray(q)) if mixed else ScalarTanh(jnp.asarray(w))
    return F, q @ y, u0


def _located_fold(F, seed, u0, settings):
    _, points = continue_branch(F, seed, u0, (u0 - 5e-4, u0), settings)
    folds = [pt for pt in points if pt.kind == "fold"]
    assert len(folds) == 1
    return folds[0]


def test_dense_and_matrix_free_locate_the_same_fold():
    """On 64 mixed copies, the dense (LU, full spectra) and matrix-free (GMRES, Arnoldi) paths agree to 1e-8."""
    F, seed, u0 = copies(64, mixed=True)
    u_star, h_star = fold_truth(2.0)
    dense = _located_fold(F, seed, u0, ContinuationSettings())
    free = _located_fold(F, seed, u0, ContinuationSettings(dense_max=16, full_spectrum_max=16))
    assert abs(dense.p - free.p) < 1e-8 and abs(dense.p - u_star) < 1e-8
    assert np.max(np.abs(dense.h - free.h)) < 1e-6
    assert (np.asarray(F.q).T @ free.h)[0] == pytest.approx(h_star, abs=1e-6)  # the w = 2 copy folds
    assert abs(free.multiplier - 1) < 1e-6


def test_matrix_free_fold_at_n_2048():
    """The matrix-free path (the default above dense_max = 1024) on 2048 decoupled copies."""
    F, seed, u0 = copies(2048, mixed=False)
    fold = _located_fold(F, seed, u0, ContinuationSettings())
    assert fold.p == pytest.approx(fold_truth(2.0)[0], abs=1e-8)
    assert fold.h[0] == pytest.approx(fold_truth(2.0)[1], abs=1e-6)


def test_seeds_on_one_branch_are_merged():
    """The three fixed points of tanh(2h + u) at u = 0 lie on one S-shaped branch in u: traced once."""
    F = scalar_tanh(2.0)
    lo, hi = 0.1, 1.0  # the positive root of h = tanh(2h), by bisection
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.tanh(2 * mid) > mid else (lo, mid)
    seeds = np.array([[lo], [0.0], [-lo]])
    diagram = trace(F, seeds, 0.0, (-1.0, 1.0))
    assert len(diagram.branches) == 1
    u_star = fold_truth(2.0)[0]
    assert sorted(pt.p for pt in diagram.points if pt.kind == "fold") == pytest.approx([u_star, -u_star], abs=1e-8)
    assert len(diagram.points) == 2


def test_period_doubling_cascade_of_the_logistic_map():
    """h <- p h (1 - h): flips at p = 3 (period 1 -> 2), 1 + sqrt(6) (2 -> 4) and 3.544090 (4 -> 8, the
    published value of the cascade), each cycle continued from the flip that created it."""
    settings = ContinuationSettings(max_period=4)
    diagram = trace(lambda h, p: p * h * (1 - h), np.array([[1 - 1 / 2.9]]), 2.9, (2.9, 3.55), settings)
    assert sorted(b.period for b in diagram.branches) == [1, 2, 4]
    flips = sorted((diagram.branches[pt.branch].period, pt.p) for pt in diagram.points if pt.kind == "flip")
    assert [k for k, _ in flips] == [1, 2, 4]  # each once, though a cycle shows a flip at each of its points
    assert [p for _, p in flips] == pytest.approx([3.0, 1 + np.sqrt(6), 3.544090], abs=1e-6)
    assert flips[1][1] == pytest.approx(1 + np.sqrt(6), abs=1e-8)
    four = next(b for b in diagram.branches if b.period == 4)
    h, p = four.h[:, 0], four.p
    away = np.abs(p - flips[1][1]) > 1e-2
    step = lambda x: p[away] * x * (1 - x)  # noqa: E731
    assert np.max(np.abs(step(step(step(step(h[away])))) - h[away])) < 1e-9  # a fixed point of F^4 ...
    assert np.min(np.abs(step(step(h[away])) - h[away])) > 1e-3  # ... not of F^2
