r"""Spectra of recurrent networks: weights, state Jacobians and activity covariance.

Three views of the same question, "which directions does the network amplify or keep?":

- [`weight_eigenvalues`][]: the eigenvalues $\mu_i$ of a recurrent weight matrix $W$. For a
  linear recurrence $h_{t+1} = W h_t$ a mode with eigenvalue $\mu$ decays (or grows) as
  $|\mu|^t$ and rotates by $\arg\mu$ per step; the spectral radius
  $\rho(W) = \max_i |\mu_i|$ decides stability.
- [`jacobian_spectra`][]: the eigenvalues and singular values of the state Jacobian
  $J_t = \partial F / \partial h\,(h_t, x_t)$ along a trajectory
  $h_{t+1} = F(h_t, x_t)$ of any map, i.e. the local linearisation the network actually
  applies at each step (for $F(h, x) = \tanh(W h + U x)$,
  $J_t = \operatorname{diag}(1 - h_{t+1}^2)\, W$).
- [`covariance_spectrum`][]: the eigenvalues $\lambda_1 \ge \lambda_2 \ge \dots$ of the
  covariance of recorded activity and the power-law exponent $\alpha$ of their decay,
  $\lambda_n \propto n^{-\alpha}$ (Stringer et al. 2019), with a bootstrap confidence
  interval, and a truncated power law $\lambda_n \propto n^{-\alpha} e^{-n / n_c}$.
  The fits themselves are [`power_law_exponent`][] and [`truncated_power_law_fit`][].

Eigen- and singular values are computed on the host in float64 (numpy) from the matrices
JAX produces; complex eigenvalues are stored as real, imaginary part and modulus, so the
datasets write to netCDF as they are. Every list of eigenvalues is sorted by modulus,
descending (ties, such as a complex-conjugate pair, by imaginary part, then real part,
descending, so $r e^{+i\theta}$ comes before $r e^{-i\theta}$).

Bad arguments raise `ValueError` with a message saying what is valid.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax.typing import ArrayLike

from dynlab.analyses.lyapunov import num_steps
from dynlab.errors import ConfigError
from dynlab.statistics import (
    BATCH_FACTOR,
    block_resample_indices,
    bootstrap_interval,
    half_sample_interval,
    half_sample_weights,
    integrated_autocorrelation_time,
)

__all__ = [
    "PowerLawFit",
    "TruncatedPowerLawFit",
    "covariance_spectrum",
    "jacobian_spectra",
    "power_law_exponent",
    "truncated_power_law_fit",
    "weight_eigenvalues",
]

# (flat state [N], input x_t) -> next flat state [N]
StepFn = Callable[[jax.Array, Any], jax.Array]


def _dynlab_version() -> str:
    try:
        return importlib.metadata.version("dynlab")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


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
        attrs={"analysis": "weight_eigenvalues", "dynlab_version": _dynlab_version()},
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
        eigenvalues[finite] = _sort_by_modulus(np.linalg.eigvals(jacobians[finite]))
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
        attrs={
            "analysis": "jacobian_spectra",
            "dynlab_version": _dynlab_version(),
            "state_dim": n,
            "steps": steps,
            "every": every,
            "dtype": "float64" if x64 else "float32",
            "n_nonfinite": n_nonfinite,
        },
    )


# ---------------------------------------------------------------------------------------------
# Power-law fits of a spectrum
# ---------------------------------------------------------------------------------------------


class PowerLawFit(NamedTuple):
    r"""A fit $\lambda_n \approx A\, n^{-\alpha}$ (arrays shaped like the batch axes)."""

    alpha: np.ndarray
    amplitude: np.ndarray
    r2: np.ndarray


class TruncatedPowerLawFit(NamedTuple):
    r"""A fit $\lambda_n \approx A\, n^{-\alpha} e^{-n/n_c}$ (arrays shaped like the batch axes).

    `n_c` is $+\infty$ where the best fit has no exponential cut-off.
    """

    alpha: np.ndarray
    n_c: np.ndarray
    amplitude: np.ndarray
    r2: np.ndarray


def _log_fit_inputs(
    eigenvalues: ArrayLike, ranks: ArrayLike, min_points: int
) -> tuple[np.ndarray, np.ndarray]:
    """`log(lambda)` (NaN where lambda <= 0) and the float64 ranks, checked."""
    lam = np.asarray(eigenvalues, np.float64)
    n = np.asarray(ranks, np.float64)
    if n.ndim != 1 or lam.ndim < 1 or lam.shape[-1] != n.size:
        raise ConfigError(
            "eigenvalues must be [..., K] and ranks [K] with the same K; "
            f"got shapes {lam.shape} and {n.shape}."
        )
    if n.size < min_points or np.unique(n).size < min_points or np.any(n <= 0):
        raise ConfigError(
            f"The fit needs at least {min_points} distinct positive ranks; got {n.tolist()}."
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(lam > 0, np.log(lam), np.nan)
    return y, n


def _r_squared(y: np.ndarray, y_fit: np.ndarray) -> np.ndarray:
    residual = np.sum((y - y_fit) ** 2, axis=-1)
    total = np.sum((y - y.mean(axis=-1, keepdims=True)) ** 2, axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - residual / total


def power_law_exponent(eigenvalues: ArrayLike, ranks: ArrayLike) -> PowerLawFit:
    r"""Least-squares power law $\lambda_n \approx A\, n^{-\alpha}$ in log–log coordinates.

    With $x_n = \ln n$ and $y_n = \ln \lambda_n$ over the given ranks, ordinary least squares
    of $y = \ln A - \alpha x$ gives

    $$\alpha = -\frac{\sum_n (x_n - \bar x)(y_n - \bar y)}{\sum_n (x_n - \bar x)^2}, \qquad
      \ln A = \bar y + \alpha \bar x, \qquad
      R^2 = 1 - \frac{\sum_n (y_n - \ln A + \alpha x_n)^2}{\sum_n (y_n - \bar y)^2}.$$

    **Arguments:**

    - `eigenvalues`: $\lambda_n$ at the given ranks, `[..., K]`; leading axes are a batch
      (e.g. bootstrap replicates) fitted independently.
    - `ranks`: the ranks $n$ (1-based), `[K]`, at least 2 distinct positive values.

    **Returns:**

    A [`PowerLawFit`][] `(alpha, amplitude, r2)`, each shaped like the batch axes (0-d for a
    single spectrum). A spectrum with any $\lambda_n \le 0$ has no logarithm: its fit is NaN.
    $R^2$ is measured in log space.
    """
    y, n = _log_fit_inputs(eigenvalues, ranks, min_points=2)
    x = np.log(n)
    xc = x - x.mean()
    y_mean = y.mean(axis=-1)
    alpha = -((y - y_mean[..., None]) @ xc) / (xc @ xc)
    log_amplitude = y_mean + alpha * x.mean()
    r2 = _r_squared(y, log_amplitude[..., None] - alpha[..., None] * x)
    return PowerLawFit(alpha=alpha, amplitude=np.exp(log_amplitude), r2=r2)


def truncated_power_law_fit(eigenvalues: ArrayLike, ranks: ArrayLike) -> TruncatedPowerLawFit:
    r"""Least-squares truncated power law $\lambda_n \approx A\, n^{-\alpha} e^{-n/n_c}$.

    In log space the model is linear in its parameters,

    $$\ln \lambda_n = \ln A - \alpha \ln n - \beta n, \qquad \beta = 1/n_c \ge 0,$$

    so the least-squares fit of $\ln\lambda_n$ is a linear least-squares problem in
    $(\ln A, \alpha, \beta)$ (no iterative optimiser, no starting point). The constraint
    $\beta \ge 0$ (a cut-off, not an exponential growth) is imposed exactly: the objective is
    a convex quadratic, so when the unconstrained minimiser has $\beta < 0$ the constrained
    one lies on $\beta = 0$, which is the plain power law of [`power_law_exponent`][]; then
    $n_c = +\infty$. $R^2$ is measured in log space.

    **Arguments:**

    - `eigenvalues`: $\lambda_n$ at the given ranks, `[..., K]`; leading axes are a batch.
    - `ranks`: the ranks $n$ (1-based), `[K]`, at least 3 distinct positive values.

    **Returns:**

    A [`TruncatedPowerLawFit`][] `(alpha, n_c, amplitude, r2)`, each shaped like the batch
    axes. A spectrum with any $\lambda_n \le 0$ has no logarithm: its fit is NaN.
    """
    y, n = _log_fit_inputs(eigenvalues, ranks, min_points=3)
    design = np.stack([np.ones_like(n), -np.log(n), -n], axis=-1)  # [K, 3]
    # Solve all batch members at once: the design is shared, so one pseudo-inverse does.
    coefficients = y @ np.linalg.pinv(design).T  # [..., 3] = (ln A, alpha, beta)
    power_law = power_law_exponent(eigenvalues, ranks)
    cut_off = coefficients[..., 2] > 0
    log_amplitude = np.where(cut_off, coefficients[..., 0], np.log(power_law.amplitude))
    alpha = np.where(cut_off, coefficients[..., 1], power_law.alpha)
    beta = np.where(cut_off, coefficients[..., 2], 0.0)
    with np.errstate(divide="ignore"):
        n_c = np.where(np.isnan(beta), np.nan, 1.0 / beta)
    y_fit = log_amplitude[..., None] - alpha[..., None] * np.log(n) - beta[..., None] * n
    return TruncatedPowerLawFit(
        alpha=alpha, n_c=n_c, amplitude=np.exp(log_amplitude), r2=_r_squared(y, y_fit)
    )


# ---------------------------------------------------------------------------------------------
# Activity covariance
# ---------------------------------------------------------------------------------------------


FIT_RANK_FACTOR = 0.7
r"""The default fit range ends at rank $\lfloor 0.7\sqrt{M_{\rm eff}}\rfloor$ (and at least 3); see
[`covariance_spectrum`][]."""


def effective_samples(centred: np.ndarray, n_components: int = 8) -> tuple[float, float, float]:
    r"""$(M_{\rm eff}, \hat\tau_2, \hat\tau_1)$ of rows in time order, from the leading `n_components` principal components.

    $\hat\tau_1$ and $\hat\tau_2$ are the largest integrated autocorrelation times
    ([`dynlab.statistics.integrated_autocorrelation_time`][]) of the scores $s_{t,j}$ and of
    their squares $s_{t,j}^2$. A covariance is a mean of products, so $\hat\tau_2$ sets its
    error: $M_{\rm eff} = M/(2\hat\tau_2)$ rows carry independent information on it (for
    Gaussian AR(1) rows $\tau_2 = (1+\rho^2)/(2(1-\rho^2))$, $\tau_1 = (1+\rho)/(2(1-\rho))$:
    4.8 and 9.5 at $\rho = 0.9$). Resampling blocks are made longer than either memory
    ([`covariance_spectrum`][]). White rows give $\hat\tau \approx 1/2$, $M_{\rm eff} \approx M$."""
    m, n = centred.shape
    _, vectors = np.linalg.eigh(centred.T @ centred)
    scores = centred @ vectors[:, ::-1][:, : min(n_components, n)]
    tau_1 = float(np.max(integrated_autocorrelation_time(scores.T)))
    tau_2 = float(np.max(integrated_autocorrelation_time((scores**2).T)))
    return m / (2.0 * tau_2), tau_2, tau_1


def _half_sample_eigenvalues(centred: np.ndarray, block: int, n_half: int, rng: np.random.Generator) -> np.ndarray:
    r"""Covariance eigenvalues (descending) of `n_half` half-samples, `[B, N]`: each the rows of a random half
    of the $\lfloor M/L \rfloor$ non-overlapping blocks of $L$ rows ([`dynlab.statistics.half_sample_weights`][]),
    re-centred. A half-sample's Gram matrix is a sum of block Gram matrices (computed once), so it
    costs $n_b N^2$ (one matrix product for all)."""
    m, n = centred.shape
    n_blocks = m // block
    rows = centred[: n_blocks * block].reshape(n_blocks, block, n)
    gram = np.matmul(np.swapaxes(rows, 1, 2), rows).reshape(n_blocks, n * n)
    sums = rows.sum(axis=1)
    weights = half_sample_weights(n_blocks, n_half, rng)
    size = (n_blocks // 2) * block
    mean = weights @ sums / size
    cov = ((weights @ gram).reshape(-1, n, n) - size * mean[:, :, None] * mean[:, None, :]) / (size - 1)
    return np.linalg.eigvalsh(cov)[:, ::-1]


def _resampled_eigenvalues(centred: np.ndarray, block: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    r"""Covariance eigenvalues (descending) of `n_boot` circular block-bootstrap resamples, `[B, N]`.

    A resample is $\lceil M/L\rceil$ blocks of $L$ consecutive rows (circular) with uniform random
    starts, cut to $M$ rows ([`dynlab.statistics.block_resample_indices`][]); it is re-centred and
    its covariance eigendecomposed in float64. With $L > 1$ the Gram matrix of a resample is a sum
    of block Gram matrices, read off prefix sums of the rows' outer products (exact up to
    rounding of order $\epsilon M \lambda_1$), so a resample costs $\lceil M/L\rceil N^2$ instead of
    $M N^2$; when $M N^2$ is large, or $L = 1$, rows are gathered in batches of bounded memory.
    """
    m, n = centred.shape
    n_blocks = -(-m // block)
    if block > 1 and m * n * n <= (1 << 24):
        extended = np.concatenate([centred, centred[: block]])  # circular blocks
        outer = (extended[:, :, None] * extended[:, None, :]).reshape(len(extended), -1)
        gram = np.concatenate([np.zeros((1, n * n)), np.cumsum(outer, axis=0)])
        sums = np.concatenate([np.zeros((1, n)), np.cumsum(extended, axis=0)])
        block_gram, block_sum = gram[block : block + m] - gram[:m], sums[block : block + m] - sums[:m]
        starts = block_resample_indices(m, block, n_boot, rng)[:, ::block][:, :n_blocks]
        last = m - (n_blocks - 1) * block  # the last block is cut to this many rows
        tail_gram = gram[starts[:, -1] + last] - gram[starts[:, -1]]
        tail_sum = sums[starts[:, -1] + last] - sums[starts[:, -1]]
        counts = np.zeros((n_boot, m))  # how often each full block is drawn, per resample
        np.add.at(counts, (np.repeat(np.arange(n_boot), n_blocks - 1), starts[:, :-1].ravel()), 1.0)
        total = counts @ block_gram + tail_gram
        mean = (counts @ block_sum + tail_sum) / m
        cov = (total.reshape(-1, n, n) - m * mean[:, :, None] * mean[:, None, :]) / (m - 1)
        return np.linalg.eigvalsh(cov)[:, ::-1]
    out = np.empty((n_boot, n))
    batch = max(1, min(n_boot, (1 << 24) // (m * n)))
    for first in range(0, n_boot, batch):
        idx = block_resample_indices(m, block, min(batch, n_boot - first), rng)
        sample = centred[idx]
        sample = sample - sample.mean(axis=1, keepdims=True)
        cov = np.matmul(np.swapaxes(sample, 1, 2), sample) / (m - 1)
        out[first : first + len(idx)] = np.linalg.eigvalsh(cov)[:, ::-1]
    return out


def covariance_spectrum(
    activity: ArrayLike,
    *,
    fit_range: tuple[int, int] | None = None,
    n_boot: int = 200,
    seed: int = 0,
    block_size: int | Literal["auto"] = "auto",
    confidence: float = 0.95,
    rel_floor: float = 1e-10,
    ci_method: Literal["half-sample", "basic", "percentile"] = "half-sample",
) -> xr.Dataset:
    r"""Eigenspectrum of the activity covariance and its power-law decay.

    With activity $X \in \mathbb{R}^{M \times N}$ ($M$ samples of $N$ units; `[trials, T, N]`
    is pooled into $M = \text{trials}\cdot T$ rows, and centred by the pooled mean) the
    covariance and its eigenvalues are

    $$C = \frac{1}{M-1} (X - \bar X)^\top (X - \bar X), \qquad
      C u_n = \lambda_n u_n, \quad \lambda_1 \ge \dots \ge \lambda_N \ge 0,$$

    with the explained-variance ratio $\lambda_n / \sum_m \lambda_m$ and the participation
    ratio $(\sum_n \lambda_n)^2 / \sum_n \lambda_n^2$. $C$ has rank at most
    $r = \min(M-1, N)$: the eigenvalues beyond $r$ are exactly zero and are stored as 0
    (rounding would otherwise leave arbitrary tiny values); rounding negatives are clipped
    to 0.

    Over the ranks $n \in [n_{\min}, n_{\max}]$ (`fit_range`) two fits are made by least
    squares in log–log coordinates (see [`power_law_exponent`][] and
    [`truncated_power_law_fit`][]):

    $$\lambda_n \approx A\, n^{-\alpha}, \qquad \lambda_n \approx A'\, n^{-\alpha'} e^{-n/n_c}.$$

    The default range is $n_{\min} = 1$ and $n_{\max}$ = the smallest of
    $\lfloor r/2 \rfloor$ (that is $\lfloor N/2 \rfloor$ when $M > N$), the number of
    eigenvalues above `rel_floor` $\cdot\lambda_1$, and
    $\max(3, \lfloor 0.7\sqrt{M_{\rm eff}}\rfloor)$ ([`FIT_RANK_FACTOR`][]), where
    $M_{\rm eff} = M/(2\hat\tau_2)$ is the number of effectively independent rows
    ([`effective_samples`][]). Why: sample eigenvalues are biased, to first order
    (Lawley 1956) by $\frac{\lambda_n}{M}\sum_{m \ne n}\frac{\lambda_m}{\lambda_n - \lambda_m}$, which for
    $\lambda_n \propto n^{-\alpha}$ grows like $\frac{n}{M}\ln\frac{N}{n}$ relative to $\lambda_n$: the
    tail of the fitted range is lifted and $\hat\alpha$ comes out too small, and beyond
    $n \sim \sqrt{M_{\rm eff}}$ that bias outgrows the sampling error any interval describes.
    Measured with $\lambda_n = n^{-1}$, $N = 64$ (200 data sets each): i.i.d. rows, $M = 200$,
    ranks 1–32: $\mathrm E\hat\alpha = 1.017$ (sd 0.019), 95% percentile-bootstrap coverage 0.09,
    basic 0.67; ranks 1–16: $0.978$, 0.88 / 0.88; ranks $1$–$\lfloor 0.7\sqrt{M_{\rm eff}}\rfloor$
    (≈ 8): $0.973$ (sd 0.05). AR(1) rows with $\rho = 0.9$, $M = 2000$, ranks 1–32: $1.023$
    (sd 0.018), 0.07 / 0.74; ranks 1–8 by the rule: $0.975$ (sd 0.05). Eigenvalues at the level of float64 rounding carry no
    signal; and when $M \le N$ a bootstrap resample (about $0.63 M$ distinct rows) has rank near
    $0.63 r$, so fitting at most the first half of the nonzero eigenvalues keeps every
    replicate's fit defined. An explicit `fit_range` beyond the rule is fitted as asked, and its
    interval may then miss the truth more often than its level says.

    **Confidence interval.** The rows are resampled `n_boot` times in
    blocks of $L$ consecutive rows (`block_size`; `"auto"`, the default: the rule of
    [`dynlab.statistics.auto_block_length`][], $L = \lceil 10\max(\hat\tau_1, \hat\tau_2)\rceil$
    with the autocorrelation times of [`effective_samples`][], at most $M/10$; about 6 for i.i.d.
    rows), which keeps the temporal
    autocorrelation of a time series within blocks; blocks run across trial boundaries of pooled
    `[trials, T, N]` input. Each replicate's covariance is eigendecomposed (float64) and fitted
    over the same ranks. The interval (`ci_method`):

    - `"half-sample"` (default): `n_boot` half-samples, each the rows of a random half of the
      $\lfloor M/L\rfloor$ non-overlapping blocks; the bias-corrected centre
      $2\hat\alpha - \bar\alpha_h$ $\pm\, t_{n_b-1}$ times the sd of the half-sample exponents
      ([`dynlab.statistics.half_sample_interval`][]). A half-sample is a real sample of half the
      size, so it measures the estimator's small-sample bias directly;
    - `"basic"`: circular block-bootstrap resamples of $M$ rows and the basic interval
      $[2\hat\alpha - q_{1-a}, 2\hat\alpha - q_a]$, which removes the bias the resamples
      reproduce; but a resample's repeated rows spread its eigenvalues more than the data's, so
      it over-corrects;
    - `"percentile"`: $[q_a, q_{1-a}]$, which keeps the bias ($q$ the quantiles of the replicate
      exponents, $a = (1 - c)/2$).

    Measured coverage of the default 95% interval of $\alpha = 1$ ($N = 64$, $\lambda_n = n^{-1}$,
    200 data sets per cell, `n_boot=100`, 5 seeds): AR(1) rows $\rho = 0.9$, $M = 2000$:
    0.92–0.945; i.i.d. $M = 1000$: 0.91–0.96; i.i.d. $M = 200$: 0.89–0.95 (mean 0.91: the
    bias correction itself varies from data set to data set, which the interval does not
    include). The basic bootstrap over the same ranks: 0.86–0.92. The old percentile interval
    over ranks 1–32: 0.09 at i.i.d. $M = 200$, 0.07 for the AR(1) rows. Its population is one
    recording: it describes the error of $\hat\alpha$ from this finite stretch of activity, not
    the variation between networks or seeds. Replicates whose spectrum has a zero eigenvalue in
    the fit range (possible when $M$ is small) are dropped; if more than half are dropped the
    interval is NaN and a `RuntimeWarning` is emitted. `n_boot=0` skips the bootstrap
    (interval NaN).

    **Arguments:**

    - `activity`: `[T, N]` or `[trials, T, N]`, real.
    - `fit_range`: `(n_min, n_max)`, inclusive 1-based ranks, at least 3 of them, all with
      nonzero eigenvalues; `None` for the default above.
    - `n_boot`: the number of half-samples or bootstrap resamples ($\ge 0$).
    - `seed`: the seed of their `numpy.random.default_rng`.
    - `block_size`: $L$, the bootstrap block length in rows ($L = 1$: i.i.d. rows), or
      `"auto"` (from the autocorrelation, above).
    - `confidence`: the level of the interval, in $(0, 1)$.
    - `rel_floor`: eigenvalues at or below `rel_floor` $\cdot\lambda_1$ end the default fit
      range.
    - `ci_method`: `"half-sample"` (default), `"basic"` or `"percentile"`.

    **Returns:**

    An `xr.Dataset` with coordinate `rank` $= 1, \dots, N$ and `bootstrap`
    $= 0, \dots, B-1$:

    - `eigenvalue` (`rank`): $\lambda_n$, descending, in squared activity units;
    - `explained_variance_ratio` (`rank`): $\lambda_n / \sum_m \lambda_m$ (sums to 1);
    - `in_fit_range` (`rank`): whether rank $n$ was used by the fits;
    - `alpha`, `power_law_amplitude` ($A$), `power_law_r2`: the power-law fit;
    - `alpha_ci_low`, `alpha_ci_high`: the bootstrap interval of $\alpha$ (attrs `ci_level`,
      `ci_population`, `ci_method`, `ci_n` say which);
    - `alpha_ci_centre`: the interval's centre (bias-corrected);
    - `alpha_bootstrap` (`bootstrap`): the replicate exponents (half-samples or bootstrap
      resamples; NaN where dropped);
    - `truncated_alpha`, `truncated_n_c`, `truncated_amplitude`, `truncated_r2`: the
      truncated fit ($n_c = +\infty$ when the best fit has no cut-off);
    - `participation_ratio`;
    - attrs `analysis="covariance_spectrum"`, `dynlab_version`, `n_samples` ($M$),
      `n_units` ($N$), `n_trials`, `rank_limit` ($r$), `fit_rank_min`, `fit_rank_max`,
      `n_boot`, `n_boot_valid`, `seed`, `block_size` ($L$ used), `confidence`, `ci_method`,
      `ci_level`, `ci_population`, `ci_n`, `rel_floor`, `effective_samples` ($M_{\rm eff}$),
      `autocorrelation_time` ($\hat\tau_1$, rows), `autocorrelation_time_products` ($\hat\tau_2$).
    """
    x = np.asarray(activity)
    if x.ndim not in (2, 3) or not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ConfigError(
            "activity must be a real array [T, N] or [trials, T, N]; "
            f"got shape {x.shape} and dtype {x.dtype}."
        )
    n_trials = x.shape[0] if x.ndim == 3 else 1
    x = x.reshape(-1, x.shape[-1]).astype(np.float64)
    m, n = x.shape
    if m < 2 or n < 3:
        raise ConfigError(f"activity needs at least 2 samples and 3 units; got M={m}, N={n}.")
    if not np.all(np.isfinite(x)):
        raise ConfigError("activity contains NaN or infinite values.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ConfigError(f"n_boot must be a non-negative integer; got {n_boot!r}.")
    if block_size != "auto" and (isinstance(block_size, bool) or not isinstance(block_size, (int, np.integer))
                                 or block_size < 1):
        raise ConfigError(f"block_size must be a positive integer or 'auto'; got {block_size!r}.")
    if block_size != "auto" and block_size > m:
        raise ConfigError(f"a bootstrap block of {block_size} rows is longer than the data (M = {m} rows).")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1); got {confidence!r}.")
    if ci_method not in ("half-sample", "basic", "percentile"):
        raise ConfigError(f"ci_method must be 'half-sample', 'basic' or 'percentile'; got {ci_method!r}.")

    centred = x - x.mean(axis=0)
    m_eff, tau, tau_rows = effective_samples(centred)
    if block_size == "auto":  # the rule of dynlab.statistics.auto_block_length, on the longer memory
        block_size = int(max(1, min(np.ceil(BATCH_FACTOR * max(tau, tau_rows)), m // 10)))
    eigenvalues = np.linalg.eigvalsh(centred.T @ centred / (m - 1))[::-1]
    rank_limit = min(m - 1, n)
    eigenvalues = np.clip(eigenvalues, 0.0, None)
    eigenvalues[rank_limit:] = 0.0
    if eigenvalues[0] <= 0:
        raise ConfigError("activity has zero variance in every unit; there is no spectrum.")

    default_range = fit_range is None
    if default_range:
        above_floor = int(np.sum(eigenvalues > rel_floor * eigenvalues[0]))
        fit_range = (1, min(rank_limit // 2, above_floor, max(3, int(FIT_RANK_FACTOR * np.sqrt(m_eff)))))
    n_min, n_max = (int(r) for r in fit_range)
    if not 1 <= n_min <= n_max - 2 or n_max > n:
        raise ConfigError(
            f"fit_range must be (n_min, n_max) with 1 <= n_min, n_max - n_min >= 2 and "
            f"n_max <= N = {n}; got {tuple(fit_range)}"
            + (
                f" (the default: half the rank {rank_limit} of the covariance, cut where "
                "eigenvalues fall below rel_floor * lambda_1; pass fit_range explicitly)."
                if default_range
                else "."
            )
        )
    if eigenvalues[n_max - 1] <= 0:
        raise ConfigError(
            f"fit_range {tuple(fit_range)} includes zero eigenvalues: only the first "
            f"{int(np.sum(eigenvalues > 0))} are nonzero (the covariance has rank at most "
            f"min(M - 1, N) = {rank_limit}). Choose n_max at most that."
        )
    ranks = np.arange(n_min, n_max + 1)
    fit = power_law_exponent(eigenvalues[n_min - 1 : n_max], ranks)
    truncated = truncated_power_law_fit(eigenvalues[n_min - 1 : n_max], ranks)

    alpha_boot = np.full(n_boot, np.nan)
    half_sampled = ci_method == "half-sample"
    if half_sampled and m // int(block_size) < 2:
        raise ConfigError(f"half-sampling needs at least 2 blocks of {block_size} rows; the data have M = {m} rows "
                          "(use a shorter block_size)")
    population = (f"half-samples of this recording ({m // int(block_size)} blocks of {int(block_size)} rows)"
                  if half_sampled else f"bootstrap resamples of this recording's rows (blocks of {int(block_size)})")

    def interval(replicates):
        if half_sampled:
            return half_sample_interval(fit.alpha, replicates, n_blocks=m // int(block_size), level=confidence,
                                        population=population)
        return bootstrap_interval(fit.alpha, replicates, level=confidence, method=ci_method, population=population)

    ci = interval(np.full(2, np.nan))
    if n_boot:
        # float64 throughout: the tail of a steep spectrum sits far below float32 resolution of lambda_1.
        rng = np.random.default_rng(seed)
        if half_sampled:
            boot = _half_sample_eigenvalues(centred, int(block_size), int(n_boot), rng)
        else:
            boot = _resampled_eigenvalues(centred, int(block_size), int(n_boot), rng)
        # A resample's zero eigenvalues come out as +-rounding; anything this small is zero.
        in_range = boot[:, n_min - 1 : n_max]
        in_range = np.where(in_range > rel_floor * boot[:, :1], in_range, 0.0)
        alpha_boot = power_law_exponent(in_range, ranks).alpha
        valid = alpha_boot[np.isfinite(alpha_boot)]
        ci = interval(alpha_boot)
        if 2 * valid.size <= n_boot:
            warnings.warn(
                f"covariance_spectrum: only {valid.size} of {n_boot} bootstrap replicates have "
                f"nonzero eigenvalues over ranks {n_min}..{n_max} (too few samples, M={m}); "
                "the confidence interval is NaN. Narrow fit_range.",
                RuntimeWarning,
                stacklevel=2,
            )
    n_boot_valid = int(np.isfinite(alpha_boot).sum())

    total = eigenvalues.sum()
    power = "activity^2"  # squared units of whatever `activity` is measured in
    exponent = {"units": "1"}
    return xr.Dataset(
        {
            "eigenvalue": (
                "rank", eigenvalues, {"long_name": "covariance eigenvalue", "units": power}
            ),
            "explained_variance_ratio": (
                "rank", eigenvalues / total, {"long_name": "explained variance ratio", "units": "1"}
            ),
            "in_fit_range": (
                "rank", (ranks[0] <= np.arange(1, n + 1)) & (np.arange(1, n + 1) <= ranks[-1]),
                {"long_name": "rank used by the power-law fits"},
            ),
            "alpha": ((), fit.alpha, {**exponent, "long_name": "power-law exponent alpha (least-squares fit)"}),
            "alpha_ci_centre": ((), float(ci.estimate), {
                **exponent, "long_name": "centre of the alpha interval (bias-corrected for 'half-sample' "
                                         "and, in effect, for 'basic'; the fit itself for 'percentile')"}),
            "power_law_amplitude": (
                (), fit.amplitude, {"units": power, "long_name": "power-law amplitude A"}
            ),
            "power_law_r2": ((), fit.r2, {"units": "1", "long_name": "power-law fit R^2 (log)"}),
            "alpha_ci_low": (
                (), float(ci.low), {**exponent, "long_name": f"alpha, lower bound of the {ci.label}", **ci.attrs()}
            ),
            "alpha_ci_high": (
                (), float(ci.high), {**exponent, "long_name": f"alpha, upper bound of the {ci.label}", **ci.attrs()}
            ),
            "alpha_bootstrap": (
                "bootstrap", alpha_boot, {**exponent, "long_name": "bootstrap replicate alpha"}
            ),
            "truncated_alpha": (
                (), truncated.alpha, {**exponent, "long_name": "truncated power-law exponent"}
            ),
            "truncated_n_c": (
                (), truncated.n_c, {"units": "rank", "long_name": "truncated power-law cut-off n_c"}
            ),
            "truncated_amplitude": (
                (),
                truncated.amplitude,
                {"units": power, "long_name": "truncated power-law amplitude"},
            ),
            "truncated_r2": (
                (), truncated.r2, {"units": "1", "long_name": "truncated power-law fit R^2 (log)"}
            ),
            "participation_ratio": (
                (), total**2 / np.sum(eigenvalues**2),
                {"units": "1", "long_name": "participation ratio (sum lambda)^2 / sum lambda^2"},
            ),
        },
        coords={
            "rank": ("rank", np.arange(1, n + 1), {"long_name": "eigenvalue rank (descending)"}),
            "bootstrap": ("bootstrap", np.arange(n_boot), {"long_name": "bootstrap replicate"}),
        },
        attrs={
            "analysis": "covariance_spectrum",
            "dynlab_version": _dynlab_version(),
            "n_samples": m,
            "n_units": n,
            "n_trials": n_trials,
            "rank_limit": rank_limit,
            "fit_rank_min": n_min,
            "fit_rank_max": n_max,
            "n_boot": int(n_boot),
            "n_boot_valid": n_boot_valid,
            "seed": int(seed),
            "block_size": int(block_size),
            "confidence": float(confidence),
            **ci.attrs(),
            "ci_label": ci.label,
            "rel_floor": float(rel_floor),
            "effective_samples": float(m_eff),
            "autocorrelation_time": float(tau_rows),
            "autocorrelation_time_products": float(tau),
        },
    )
