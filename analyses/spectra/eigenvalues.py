r"""Eigenvalues of recurrent weights and of the state Jacobian along a trajectory.

- [`weight_eigenvalues`][]: the eigenvalues $\mu_i$ of a recurrent weight matrix $W$. For a
  linear recurrence $h_{t+1} = W h_t$ a mode with eigenvalue $\mu$ decays (or grows) as
  $|\mu|^t$ and rotates by $\arg\mu$ per step; the spectral radius
  $\rho(W) = \max_i |\mu_i|$ decides stability.
- [`jacobian_spectra`][]: the eigenvalues and singular values of the state Jacobian
  $J_t = \partial F / \partial h\,(h_t, x_t)$ along a trajectory of any map.

Computed on the host in float64 (numpy); lists of eigenvalues are sorted by modulus, descending
(see [`dynlab.analyses.spectra`][]).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax.typing import ArrayLike

from dynlab.analyses.lyapunov.core import num_steps
from dynlab.analyses.state_map import eigenvalues_of
from dynlab.errors import ConfigError
from dynlab.provenance import stamp_attrs

# (flat state [N], input x_t) -> next flat state [N]
StepFn = Callable[[jax.Array, Any], jax.Array]


def _sort_by_modulus(eigenvalues: np.ndarray) -> np.ndarray:
    """Sort complex eigenvalues along the last axis by modulus, descending.

    Ties (conjugate pairs, equal moduli) are broken by imaginary part, then real part,
    descending, so that the order is reproducible.
    """
    keys = (-eigenvalues.real, -eigenvalues.imag, -np.abs(eigenvalues))  # last key is primary
    order = np.lexsort(keys, axis=-1)
    return np.take_along_axis(eigenvalues, order, axis=-1)


# ---------------------------------------------------------------------------------------------
# Weight matrices
# ---------------------------------------------------------------------------------------------


def weight_eigenvalues(matrices: Mapping[str, ArrayLike]) -> xr.Dataset:
    r"""Eigenvalues of recurrent weight matrices, sorted by modulus.

    For each named matrix $W \in \mathbb{C}^{N\times N}$ the eigenvalues
    $W v_i = \mu_i v_i$ are computed (float64, `numpy.linalg.eigvals`) and sorted so that
    $|\mu_1| \ge |\mu_2| \ge \dots$; the spectral radius is

    $$\rho(W) = \max_i |\mu_i| = |\mu_1|.$$

    A 1-D array $w$ stands for a diagonal recurrence $W = \operatorname{diag}(w)$, whose
    eigenvalues are its entries.

    **Arguments:**

    - `matrices`: a mapping from a name (e.g. `"layer0"`) to a square 2-D array or a 1-D
      array (diagonal). Real or complex; JAX or numpy.

    **Returns:**

    An `xr.Dataset` with dims `matrix` (the names, in the mapping's order) and `eigenvalue`
    (index $i = 1, \dots, N_{\max}$, the largest $N$ among the matrices):

    - `eig_real`, `eig_imag`, `eig_modulus` (`matrix`, `eigenvalue`): $\operatorname{Re}\mu_i$,
      $\operatorname{Im}\mu_i$, $|\mu_i|$ (named as in [`jacobian_spectra`][]; plain
      `real`/`imag` would be shadowed by `xr.Dataset.real`/`.imag` under attribute access).
      Matrices of different sizes share the `eigenvalue` axis; a matrix with
      $N < N_{\max}$ is padded with NaN after its $N$ eigenvalues
      (`ds.sel(matrix=name).dropna("eigenvalue")` recovers it);
    - `n_eigenvalues` (`matrix`): $N$, the number of eigenvalues of each matrix;
    - `spectral_radius` (`matrix`): $\rho(W)$;
    - attrs `analysis="weight_eigenvalues"`, `dynlab_version`.
    """
    if not isinstance(matrices, Mapping) or not matrices:
        raise ConfigError(
            "matrices must be a non-empty mapping from a name to a weight matrix, "
            "e.g. {'layer0': W_hh}."
        )
    spectra: list[np.ndarray] = []
    for name, matrix in matrices.items():
        w = np.asarray(matrix)
        if w.size == 0 or not np.issubdtype(w.dtype, np.number) or not np.all(np.isfinite(w)):
            raise ConfigError(f"matrices[{name!r}] must be a non-empty, finite numeric array.")
        if w.ndim == 1:
            mu = w.astype(np.complex128)
        elif w.ndim == 2 and w.shape[0] == w.shape[1]:
            mu = np.linalg.eigvals(w.astype(np.result_type(w.dtype, np.float64)))
        else:
            raise ConfigError(
                f"matrices[{name!r}] must be a square 2-D matrix or a 1-D diagonal; "
                f"got shape {w.shape}."
            )
        spectra.append(_sort_by_modulus(mu.astype(np.complex128)))

    sizes = np.array([mu.size for mu in spectra])
    padded = np.full((len(spectra), sizes.max()), np.nan + 0j)
    for row, mu in zip(padded, spectra):
        row[: mu.size] = mu

    dims = ("matrix", "eigenvalue")
    return xr.Dataset(
        {
            "eig_real": (dims, padded.real, {"long_name": "eigenvalue, real part"}),
            "eig_imag": (dims, padded.imag, {"long_name": "eigenvalue, imaginary part"}),
            "eig_modulus": (dims, np.abs(padded), {"long_name": "eigenvalue modulus"}),
            "n_eigenvalues": (
                "matrix", sizes, {"long_name": "number of eigenvalues (matrix size N)"}
            ),
            "spectral_radius": (
                "matrix",
                np.abs(padded[:, 0]),
                {"long_name": "spectral radius (largest eigenvalue modulus)"},
            ),
        },
        coords={
            "matrix": ("matrix", list(matrices), {"long_name": "weight matrix"}),
            "eigenvalue": (
                "eigenvalue",
                np.arange(1, sizes.max() + 1),
                {"long_name": "eigenvalue index (descending modulus)"},
            ),
        },
        attrs=stamp_attrs(analysis="weight_eigenvalues"),
    )


# ---------------------------------------------------------------------------------------------
# State Jacobians along a trajectory
# ---------------------------------------------------------------------------------------------


def _sampled_jacobians(
    step: StepFn, h0: jax.Array, inputs: Any, every: int, steps: int
) -> jax.Array:
    r"""$[J_0, J_e, J_{2e}, \dots]$, shape `[K, N, N]` with $K = \lceil T / e \rceil$.

    One `lax.scan` over blocks: block $k \ge 1$ advances the state by $e$ steps with the
    inputs $x_{(k-1)e}, \dots, x_{ke-1}$ (an inner scan), then differentiates the map at
    $(h_{ke}, x_{ke})$. Only the sampled Jacobians are ever materialised.
    """
    n_samples = -(-steps // every)
    jacobian = jax.jacfwd(step, argnums=0)

    def advance(h: jax.Array, x: Any) -> tuple[jax.Array, None]:
        return step(h, x), None

    def block(h: jax.Array, xs: tuple[Any, Any]) -> tuple[jax.Array, jax.Array]:
        x_block, x_sample = xs
        h, _ = jax.lax.scan(advance, h, x_block)
        return h, jacobian(h, x_sample)

    x_sampled = jax.tree.map(lambda a: a[::every], inputs)
    x_blocks = jax.tree.map(
        lambda a: a[: (n_samples - 1) * every].reshape(n_samples - 1, every, *a.shape[1:]),
        inputs,
    )
    j0 = jacobian(h0, jax.tree.map(lambda a: a[0], inputs))
    _, j_rest = jax.lax.scan(block, h0, (x_blocks, jax.tree.map(lambda a: a[1:], x_sampled)))
    return jnp.concatenate([j0[None], j_rest], axis=0)


def jacobian_spectra(
    step: StepFn,
    h0: ArrayLike,
    inputs: Any,
    *,
    every: int = 1,
    x64: bool = False,
) -> xr.Dataset:
    r"""Eigenvalues and singular values of the state Jacobian along a trajectory.

    Runs $h_{t+1} = F(h_t, x_t)$, $t = 0, \dots, T-1$, with $F$ = `step`, and at every
    `every`-th step $t \in \{0, e, 2e, \dots\} \cap [0, T)$ forms the Jacobian of the state map
    at the state *before* the step (`jax.jacfwd` inside a `lax.scan`),

    $$J_t = \frac{\partial F}{\partial h}(h_t, x_t) \in \mathbb{R}^{N\times N},$$

    and returns its eigenvalues $J_t v = \mu v$ (sorted $|\mu_1| \ge |\mu_2| \ge \dots$) and
    singular values $\sigma_1 \ge \sigma_2 \ge \dots$. For a linear map $F(h) = A h$,
    $J_t = A$; for $F(h, x) = \tanh(W h + U x)$,
    $J_t = \operatorname{diag}(1 - h_{t+1}^2)\, W$. $\sigma_1$ bounds the one-step growth of
    any perturbation, $|\mu_1| \le \sigma_1$; products of the $J_t$ give the Lyapunov
    exponents (`dynlab.analyses.lyapunov`).

    All $K = \lceil T/e \rceil$ sampled Jacobians are held in memory ($K N^2$ numbers), so
    choose `every` accordingly for large $N$. Eigen- and singular values are computed on the
    host in float64 (numpy, batched over time).

    **Arguments:**

    - `step`: `step(h, x) -> h_next`, a pure, jit-able map on a flat state vector `[N]`
      (for a PyTree state, flatten it first, e.g. with `jax.flatten_util.ravel_pytree`).
    - `h0`: the initial state, a 1-D real floating array `[N]`.
    - `inputs`: $x_0, \dots, x_{T-1}$: an array or a PyTree of arrays, all with the leading
      time axis `[T, ...]`; for an autonomous map pass e.g. `jnp.zeros((T, 1))`.
    - `every`: sample the Jacobian every `every` steps (a positive integer).
    - `x64`: run the trajectory and Jacobians in float64 (state and inputs are cast; float64
      is enabled while `step` is traced). Otherwise float32. Matrix products run at full
      ("highest") precision on every backend.

    **Returns:**

    An `xr.Dataset` with coordinates `time` ($t$, in steps), `eigenvalue` and
    `singular_value` (indices $1, \dots, N$):

    - `eig_real`, `eig_imag`, `eig_modulus` (`time`, `eigenvalue`): $\operatorname{Re}\mu_i$,
      $\operatorname{Im}\mu_i$, $|\mu_i|$ of $J_t$;
    - `singular_values` (`time`, `singular_value`): $\sigma_i(J_t)$;
    - `spectral_radius` (`time`): $|\mu_1(J_t)|$;
    - attrs `analysis="jacobian_spectra"`, `dynlab_version`, `state_dim` ($N$), `steps`
      ($T$), `every`, `dtype`, `n_nonfinite` (the number of sampled steps whose Jacobian was
      not finite; their spectra are NaN and a `RuntimeWarning` is emitted).
    """
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ConfigError(f"every must be a positive integer; got {every!r}.")
    every = int(every)
    h0 = jnp.asarray(h0)
    if h0.ndim != 1 or h0.size == 0 or not jnp.issubdtype(h0.dtype, jnp.floating):
        raise ConfigError(
            "h0 must be a non-empty 1-D real floating state vector [N]; "
            f"got shape {h0.shape} and dtype {h0.dtype}."
        )
    steps = num_steps(inputs)

    x64 = x64 or jax.config.jax_enable_x64  # a model loaded under x64 holds float64 arrays: work in them
    dtype = jnp.float64 if x64 else jnp.float32
    x64_mode = jax.enable_x64(True) if x64 else contextlib.nullcontext()
    with x64_mode, jax.default_matmul_precision("highest"):
        h0 = h0.astype(dtype)

        def cast(a: ArrayLike) -> jax.Array:  # floating inputs to the working dtype only
            a = jnp.asarray(a)
            return a.astype(dtype) if jnp.issubdtype(a.dtype, jnp.floating) else a

        inputs = jax.tree.map(cast, inputs)
        out = jax.eval_shape(step, h0, jax.tree.map(lambda a: a[0], inputs))
        if not hasattr(out, "shape") or out.shape != h0.shape:
            raise ConfigError(
                f"step(h, x) must return the next state with the shape of h0 {h0.shape}; "
                f"got {getattr(out, 'shape', type(out))}."
            )
        jacobians = np.asarray(_sampled_jacobians(step, h0, inputs, every, steps), np.float64)

    n_samples, n = jacobians.shape[:2]
    eigenvalues = np.full((n_samples, n), np.nan + 0j)
    singular_values = np.full((n_samples, n), np.nan)
    finite = np.isfinite(jacobians).all(axis=(1, 2))
    if finite.any():
        eigenvalues[finite] = _sort_by_modulus(eigenvalues_of(jacobians[finite]))
        singular_values[finite] = np.linalg.svd(jacobians[finite], compute_uv=False)
    n_nonfinite = int(n_samples - finite.sum())
    if n_nonfinite:
        warnings.warn(
            f"jacobian_spectra: the Jacobian was not finite at {n_nonfinite} of {n_samples} "
            "sampled steps (the trajectory diverged?); their spectra are NaN.",
            RuntimeWarning,
            stacklevel=2,
        )

    index = np.arange(1, n + 1)
    eig_dims = ("time", "eigenvalue")
    return xr.Dataset(
        {
            "eig_real": (
                eig_dims, eigenvalues.real, {"long_name": "Jacobian eigenvalue, real part"}
            ),
            "eig_imag": (
                eig_dims, eigenvalues.imag, {"long_name": "Jacobian eigenvalue, imaginary part"}
            ),
            "eig_modulus": (
                eig_dims, np.abs(eigenvalues), {"long_name": "Jacobian eigenvalue modulus"}
            ),
            "singular_values": (
                ("time", "singular_value"),
                singular_values,
                {"long_name": "Jacobian singular value"},
            ),
            "spectral_radius": (
                "time", np.abs(eigenvalues[:, 0]), {"long_name": "Jacobian spectral radius"}
            ),
        },
        coords={
            "time": (
                "time",
                np.arange(0, steps, every),
                {"long_name": "step t of J_t = dF/dh(h_t, x_t)", "units": "steps"},
            ),
            "eigenvalue": (
                "eigenvalue", index, {"long_name": "eigenvalue index (descending modulus)"}
            ),
            "singular_value": (
                "singular_value", index, {"long_name": "singular value index (descending)"}
            ),
        },
        attrs=stamp_attrs(analysis="jacobian_spectra", config={
            "state_dim": n,
            "steps": steps,
            "every": every,
            "dtype": "float64" if x64 else "float32",
            "n_nonfinite": n_nonfinite,
        }),
    )

