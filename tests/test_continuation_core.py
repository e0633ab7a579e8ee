"""The numerical core of continuation (dynlab.analyses.continuation) against closed-form truths.

Every truth comes from the maps' algebra, not from the code: for h <- tanh(w h + u) a fixed point
is a fold where F'(h) = w (1 - h^2) = 1, so h*^2 = 1 - 1/w and u* = atanh(h*) - w h*; at u = 0
the origin loses stability through mu = w = 1 (a pitchfork, by the symmetry h -> -h) and through
mu = w = -1 (a flip); for h <- tanh(g R(theta) h) the origin's multipliers are g e^{+-i theta}.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dynlab.analyses.continuation import ContinuationSettings, continue_branch


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
