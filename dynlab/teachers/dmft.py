r"""Dynamical mean-field theory of the chaotic rate network: the truth its largest Lyapunov
exponent is held to (Sompolinsky, Crisanti & Sommers 1988; Engelken, Wolf & Abbott 2023).

For $\dot x = -x + J\phi(x)$, $J_{ij} \sim \mathcal N(0, g^2/N)$, $\phi = \tanh$, as $N \to \infty$
(time in units of $\tau$; the teacher's map $h' = (1-\alpha)h + \alpha J\phi(h)$ with $\alpha =
\Delta t/\tau = 1/30$ is its Euler step):

1. **Autocorrelation.** $\Delta(s) = \langle x(t)x(t+s)\rangle$ obeys
   $\Delta'' = \Delta - g^2 C_\phi(\Delta;\Delta_0)$, with $C_f(\Delta;\Delta_0) = E[f(z_1)f(z_2)]$
   for Gaussians of variance $\Delta_0$ and covariance $\Delta$: a particle in the potential
   $V(\Delta) = -\Delta^2/2 + g^2 C_\Phi(\Delta;\Delta_0)$, $\Phi = \ln\cosh$. The chaotic solution
   starts at rest at $\Delta_0$ and comes to rest at 0, so $V(\Delta_0) = V(0)$ fixes $\Delta_0$.
2. **Lyapunov exponent.** Differentiating the equation of motion (Price's theorem,
   $\partial C_\phi/\partial\Delta = C_{\phi'}$) shows that $\Delta'$ solves
   $H\psi = E\psi$ with $E = 0$, for $H = -\partial_s^2 + 1 - g^2 C_{\phi'}(\Delta(s);\Delta_0)$.
   $\Delta'$ has a node at $s = 0$, so the ground state lies below: $E_0 < 0$, and the largest
   exponent is $\lambda_{max} = -1 + \sqrt{1 - E_0}$ (positive for every $g > 1$).
3. **Onset.** Near $g = 1$, $\phi(x) \approx x - x^3/3$ turns the particle's equation into
   $\Delta'' = a\Delta - \tfrac23\Delta^3$ with $a = \Delta_0^2/3$, solved by
   $\Delta = \Delta_0\,\mathrm{sech}(\sqrt a\, s)$, and $H$ into the Pöschl–Teller operator
   $-\partial_s^2 + a(1 - 6\,\mathrm{sech}^2\sqrt a\, s)$ with levels $-3a$ and $0$ (the latter
   $\Delta'$). With $\Delta_0 \approx (g^2 - 1)/2 \approx g - 1$: $\lambda_{max} \approx 3a/2 \approx (g-1)^2/2$.

Gaussian expectations by Gauss–Hermite quadrature (``nodes`` nodes per variable); $\Delta(s)$ by
``scipy.integrate.solve_ivp`` until the particle has nearly stopped, then its exponential
approach to the hilltop, $\Delta \propto e^{-\kappa s}$ with $\kappa^2 = 1 - g^2 C_{\phi'}(0;\Delta_0)$;
$E_0$ from a finite-difference $H$ on $[-L, L]$ (``scipy.linalg.eigh_tridiagonal``).

**Checked against published values** (``tests/test_dmft.py``): D. G. Clark's independent solution
(trapezoid quadrature, lag grid 0.025; "Lyapunov spectrum of random neural networks", data of
its Fig. 4c, ``github.com/davidclark1/rnn-lyapunov``, ``data/max_exponent_operator.json``) gives
$\lambda_{max}\tau$ = 0.016963, 0.046746, 0.112458 at $g$ = 1.25, 1.5, 2; this module 0.016963,
0.046746, 0.112459 (defaults), and 0.23642 against 0.23546 at $g = 3$. For larger $g$ the
variance $\Delta_0$ grows and 81 Gauss–Hermite nodes no longer resolve $\phi' = \mathrm{sech}^2$
(about $1/\sqrt{\Delta_0}$ wide in units of the standard deviation): at $g = 10$ they even put
the hilltop's curvature $\kappa^2$ below 0, which is refused (more ``nodes``, or another rule).
The same reference gives 0.046330 and 0.045913 for the Euler map at $\Delta t/\tau$ = 0.25 and
0.5, so at the teacher's 1/30 the map's value is the flow's to about 0.1%.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.linalg import eigh_tridiagonal

from dynlab.errors import ConfigError


def _log_cosh(x):
    return np.logaddexp(x, -x) - np.log(2.0)


def _dtanh(x):
    return 1.0 - np.tanh(x) ** 2


@functools.lru_cache(maxsize=8)
def _hermite_nodes(nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss–Hermite nodes and weights for the standard normal (computed once per ``nodes``)."""
    z, w = hermegauss(nodes)
    w = w / w.sum()
    z.flags.writeable = w.flags.writeable = False
    return z, w


def gaussian_pair(f, delta: float, delta0: float, nodes: int = 81) -> float:
    r"""$E[f(z_1)f(z_2)]$ for Gaussians of variance ``delta0`` and covariance ``delta`` in
    $[0, \Delta_0]$: $z_i = \sqrt{\Delta_0 - \Delta}\,a_i + \sqrt{\Delta}\,c$ with $a_1, a_2, c$
    independent standard normals."""
    z, w = _hermite_nodes(nodes)
    spread, common = np.sqrt(max(delta0 - delta, 0.0)), np.sqrt(max(delta, 0.0))
    inner = (w[None, :] * f(spread * z[None, :] + common * z[:, None])).sum(axis=1)
    return float((w * inner**2).sum())


@dataclasses.dataclass(frozen=True)
class MeanField:
    """The mean-field solution at gain ``g``: ``delta0`` ($\\Delta_0$, the variance of $x$),
    ``s`` and ``delta`` ($\\Delta(s)$ for $s \\ge 0$), ``potential`` ($1 - g^2 C_{\\phi'}$ on ``s``),
    ``e0`` (the ground-state energy of $H$) and ``lambda_max`` (per unit $\\tau$)."""

    g: float
    delta0: float
    s: np.ndarray
    delta: np.ndarray
    potential: np.ndarray
    e0: float
    lambda_max: float


def mean_field(g: float, *, length: float = 60.0, step: float = 0.02, nodes: int = 81) -> MeanField:
    """The mean-field solution of the network of gain ``g`` > 1 (module docstring), on $s \\in [0,$ ``length``$]$
    with grid ``step``."""
    from scipy.optimize import brentq

    from scipy.integrate import solve_ivp

    if not (isinstance(g, (int, float)) and np.isfinite(g) and g > 1.0):
        raise ConfigError(f"the mean-field chaotic solution needs a gain g > 1 (below, the network decays to 0), got {g!r}")

    def potential_difference(d0):
        return (-d0**2 / 2 + g**2 * gaussian_pair(_log_cosh, d0, d0, nodes)) - g**2 * gaussian_pair(_log_cosh, 0.0, d0, nodes)

    delta0 = brentq(potential_difference, 1e-6, 10.0 * g**2)
    force = lambda d: d - g**2 * gaussian_pair(np.tanh, min(max(d, 0.0), delta0), delta0, nodes)  # noqa: E731
    turning = lambda s, y: y[1]  # noqa: E731  the particle stops (numerically, it would roll back)
    turning.terminal, turning.direction = True, 1
    s = np.arange(0.0, length + step / 2, step)
    solved = solve_ivp(lambda _, y: [y[1], force(y[0])], (0.0, length), [delta0 * (1 - 1e-12), 0.0], t_eval=s,
                       events=turning, rtol=1e-10, atol=1e-13)
    delta = solved.y[0]
    kappa_squared = 1.0 - g**2 * gaussian_pair(_dtanh, 0.0, delta0, nodes)
    if not kappa_squared > 0:
        raise ConfigError(f"at g = {g} the quadrature with {nodes} nodes is too coarse for the mean-field solution "
                          f"(the hilltop's curvature 1 - g^2 C_phi'(0) = {kappa_squared:.3g} is not > 0): raise nodes")
    kappa = np.sqrt(kappa_squared)
    last = int(np.argmin(delta)) if len(delta) else 0
    # from the closest approach on (before numerical error turns the particle back): the approach to the hilltop
    tail = delta[last] * np.exp(-kappa * (s[last:] - s[last]))
    delta = np.concatenate([delta[:last], tail])
    potential = np.array([1.0 - g**2 * gaussian_pair(_dtanh, d, delta0, nodes) for d in delta])
    symmetric = np.concatenate([potential[:0:-1], potential])
    n = symmetric.size
    e0 = float(eigh_tridiagonal(2 / step**2 + symmetric, -np.ones(n - 1) / step**2, select="i",
                                select_range=(0, 0))[0][0])
    return MeanField(float(g), float(delta0), s, delta, potential, e0, float(-1.0 + np.sqrt(1.0 - e0)))


def dmft_lambda_max(g: float, **options) -> float:
    """The largest Lyapunov exponent of the infinite network of gain ``g`` > 1, per unit $\\tau$
    ([`mean_field`][]); the per-step exponent of the teacher's map is about ``alpha`` times it."""
    return mean_field(g, **options).lambda_max
