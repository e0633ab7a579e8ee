r"""The integrating mode of slow points: what a line attractor integrates, and how fast it forgets
(Mante, Sussillo, Shenoy & Newsome 2013, Figs. 5–6).

Near a slow point $h^*$ of the map $F(\cdot, \bar x)$, small perturbations of the state and of the
input evolve by the linearisation

$$ \delta h_{t+1} = J\,\delta h_t + B\,\delta x_t, \qquad
   J = \partial F/\partial h, \quad B = \partial F/\partial x \quad \text{at } (h^*, \bar x). $$

Let $\mu_1$ be the eigenvalue of $J$ nearest to 1, the slowest mode (along its right eigenvector
the linearised state moves by $(\mu_1 - 1)$ per step; the eigenvalue of largest modulus may be a
fast unstable or oscillating one), $r$ its right eigenvector ($\lVert r\rVert
= 1$) and $l$ its left eigenvector, $l^\top J = \mu_1 l^\top$, normalised to $l^\top r = 1$ (the row of $R^{-1}$ for
$J = R\,\mathrm{diag}(\mu)\,R^{-1}$). The mode's coordinate $m_t = l^\top \delta h_t$ obeys

$$ m_{t+1} = \mu_1\, m_t + s(d)\,\epsilon_t, \qquad s(d) = l^\top B\, d, $$

for an input perturbation $\delta x_t = \epsilon_t d$ along the direction $d$: a leaky integrator
of $d$ with gain $s(d)$ and memory $\mu_1$ (time constant $-\Delta t / \ln|\mu_1|$ for a step of
$\Delta t$; $|\mu_1| = 1$ integrates perfectly), whose content moves the state along $r$.
In a line attractor the slow points lie along $r$, $|\mu_1| \approx 1$ and the other
eigenvalues are farther from 1; the context selects what is integrated through $l$ (Mante's
*selection vector*): $|s(d)|$ is large for the cued input and small for the other, although
both inputs move the state ($B d \ne 0$). A read-out $w$ sees the integrated value in
proportion to $\cos(r, w)$.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import ArrayLike, Float, PyTree

from dynlab.errors import ConfigError

__all__ = ["integration_modes"]


def integration_modes(step, points: Float[ArrayLike, "p n"], x: PyTree, *, inputs: dict[str, PyTree],
                      readout: Float[ArrayLike, " n"]) -> xr.Dataset:
    r"""The slowest mode of $J$ at every point and what it integrates (module docstring).

    **Arguments:** `step(h, x)`, the map on the flat state (as for
    [`fixed_points`][dynlab.analyses.fixed_points.core.fixed_points]); `points` `[P, N]` (e.g.
    the slow points it found at `x`); `x`, the input they are points at; `inputs`, name ->
    an input direction $d$ (a PyTree like `x`); `readout`, a direction $w$ `[N]` in state space.

    **Returns:** dims `point`, `input`: `mu_abs`, `mu_real`, `mu_imag` ($\mu_1$, the eigenvalue
    nearest to 1), `mu2_abs`, `mu2_real`, `mu2_imag` ($\mu_2$, the next nearest after $\mu_1$ and its
    conjugate), `readout_cos`
    ($|r^{\mathsf H} w| / \lVert w\rVert$), `input_gain` (`point`, `input`: $\lVert B d\rVert$,
    how far the input moves the state in one step) and `selection` (`point`, `input`: $|s(d)|$).

    **Enforces** a finite, non-zero `readout` of the state's length and at least one input
    ([`ConfigError`][dynlab.errors.ConfigError] otherwise).
    """
    points = np.asarray(points)
    w = np.asarray(readout, dtype=np.float64).ravel()
    if points.ndim != 2 or w.shape != (points.shape[1],) or not np.all(np.isfinite(w)) or not np.any(w):
        raise ConfigError(f"readout must be a finite non-zero vector of the state's length "
                          f"{points.shape[-1] if points.ndim else '?'}, got shape {w.shape}")
    if not inputs:
        raise ConfigError("inputs must name at least one input direction")
    names = list(inputs)
    if points.shape[0] == 0:
        points = np.zeros((0, w.size))
    pts = jnp.asarray(points)
    jac = np.asarray(jax.vmap(lambda h: jax.jacfwd(step)(h, x))(pts), np.float64)
    pushed = np.stack([np.asarray(jax.vmap(lambda h, d=inputs[k]: jax.jvp(lambda xx: step(h, xx), (x,), (d,))[1])(pts),
                                  np.float64) for k in names], axis=-1)      # [P, N, K]: B d per input
    mu, mu2, cos, sel = [], [], [], []
    for J, Bd in zip(jac, pushed):
        vals, R = np.linalg.eig(J)
        order = np.lexsort((-vals.imag, np.abs(vals - 1)))       # slowest first; a conjugate pair together
        vals, R = vals[order], R[:, order]
        L = np.linalg.inv(R)                         # rows: left eigenvectors, L[i] @ R[:, i] = 1
        r = R[:, 0] / np.linalg.norm(R[:, 0])
        l = L[0] * np.linalg.norm(R[:, 0])           # rescaled with r: still l @ r = 1
        mu.append(vals[0])
        rest = vals[1:] if vals[0].imag == 0 else vals[2:]
        mu2.append(rest[0] if rest.size else np.nan)
        cos.append(float(np.abs(np.vdot(r, w)) / np.linalg.norm(w)))
        sel.append(np.abs(l @ Bd))
    mu, mu2 = np.asarray(mu, np.complex128), np.asarray(mu2, np.complex128)
    return xr.Dataset(
        {
            "mu_abs": ("point", np.abs(mu), {"long_name": "|mu_1|, mu_1 the eigenvalue nearest to 1"}),
            "mu_real": ("point", mu.real),
            "mu_imag": ("point", mu.imag),
            "mu2_abs": ("point", np.abs(mu2), {"long_name": "|mu_2|, the next nearest to 1 after mu_1 (and its conjugate)"}),
            "mu2_real": ("point", mu2.real),
            "mu2_imag": ("point", mu2.imag),
            "readout_cos": ("point", np.asarray(cos, float), {"long_name": "|cos(r, w)|: the mode's direction against the read-out"}),
            "input_gain": (("point", "input"), np.linalg.norm(pushed, axis=1).reshape(len(points), len(names)),
                           {"long_name": "|B d|: the state's displacement per unit input in one step"}),
            "selection": (("point", "input"), np.asarray(sel, float).reshape(len(points), len(names)),
                          {"long_name": "|l^T B d|: the input's gain into the integrating mode"}),
        },
        coords={"input": names},
    )
