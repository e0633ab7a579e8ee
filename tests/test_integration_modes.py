"""The integrating mode of slow points (`dynlab.analyses.fixed_points.integration`) against maps whose
eigenvectors are built by hand: an affine map h -> R diag(mu) R^-1 h + B x, whose leading eigenvalue,
right and left eigenvectors and input gains are known without any eigensolver, and a tanh map whose
Jacobian at its fixed point 0 is the matrix itself."""

import jax.numpy as jnp
import numpy as np
import pytest

from dynlab.analyses.fixed_points import integration_modes
from dynlab.errors import ConfigError

RNG = np.random.default_rng(0)
N = 6
MU = np.array([0.99, 0.6, -1.2, -0.4, 0.3, 0.1])  # the slowest mode (nearest 1) is not the largest
R = RNG.normal(size=(N, N))                      # columns: right eigenvectors
A = R @ np.diag(MU) @ np.linalg.inv(R)
B = RNG.normal(size=(N, 2))


def affine(h, x):
    return jnp.asarray(A, h.dtype) @ h + jnp.asarray(B, h.dtype) @ x[0] + x[1]


def test_leading_mode_and_selection_of_a_built_map():
    l1 = np.linalg.inv(R)[0] * np.linalg.norm(R[:, 0])      # left eigenvector with l @ (r / |r|) = 1
    r1 = R[:, 0] / np.linalg.norm(R[:, 0])
    w = RNG.normal(size=N)
    points = RNG.normal(size=(3, N))                          # the map is affine: the same J everywhere
    x = (jnp.zeros(2), jnp.asarray(0.0))
    d = {"first": (jnp.array([1.0, 0.0]), jnp.asarray(0.0)), "second": (jnp.array([0.0, 1.0]), jnp.asarray(0.0))}
    ds = integration_modes(affine, jnp.asarray(points), x, inputs=d, readout=w)
    np.testing.assert_allclose(ds.mu_abs, 0.99, rtol=1e-5)
    np.testing.assert_allclose(ds.mu_imag, 0.0, atol=1e-6)
    np.testing.assert_allclose(ds.mu2_real, 0.6, rtol=1e-5)
    np.testing.assert_allclose(ds.readout_cos, abs(r1 @ w) / np.linalg.norm(w), rtol=1e-4)
    np.testing.assert_allclose(ds.selection.sel(input="first"), abs(l1 @ B[:, 0]), rtol=1e-4)
    np.testing.assert_allclose(ds.selection.sel(input="second"), abs(l1 @ B[:, 1]), rtol=1e-4)
    np.testing.assert_allclose(ds.input_gain.sel(input="second"), np.linalg.norm(B[:, 1]), rtol=1e-5)


def test_an_input_orthogonal_to_the_left_eigenvector_is_not_integrated():
    # a tanh map h -> tanh(A h + b x): at h = 0, x = 0 its Jacobian is A and B = b; b chosen in the span
    # of the other right eigenvectors moves the state but never reaches the leading mode
    b_out = R[:, 1] + R[:, 2]
    step = lambda h, x: jnp.tanh(jnp.asarray(A) @ h + jnp.asarray(np.stack([R[:, 0], b_out], 1)) @ x)  # noqa: E731
    ds = integration_modes(step, jnp.zeros((1, N)), jnp.zeros(2), readout=R[:, 0],
                           inputs={"along": jnp.array([1.0, 0.0]), "outside": jnp.array([0.0, 1.0])})
    assert ds.selection.sel(input="outside").item() < 1e-5 < ds.input_gain.sel(input="outside").item()
    np.testing.assert_allclose(ds.selection.sel(input="along"), np.linalg.norm(R[:, 0]), rtol=1e-4)
    np.testing.assert_allclose(ds.readout_cos, 1.0, rtol=1e-5)


@pytest.mark.parametrize("readout, inputs", [(np.zeros(N), {"a": jnp.ones(2)}), (np.ones(N + 1), {"a": jnp.ones(2)}),
                                             (np.ones(N), {})])
def test_bad_readout_or_no_input_is_one_config_error(readout, inputs):
    with pytest.raises(ConfigError):
        integration_modes(lambda h, x: h, jnp.zeros((1, N)), jnp.zeros(2), inputs=inputs, readout=readout)
