r"""The effective representation information $I_{\rm rep}$ of the ELM scaling-law paper, and its fit.

Spieler, Martius & Levina, "Scaling laws and tradeoffs in recurrent networks of expressive
neurons" (§4.2, App. A.4 and B) model a layer of $N$ neurons as a noisy Gaussian channel. With
per-neuron effective parameters $k_e$, connectivity parameters $k_c$ and a layer budget $P$:

- (A1) $y = f(x) + n$, $n \sim \mathcal N(0, \sigma_n^2 I_N)$, $f \sim \mathcal N(0, C_f)$;
- (A2) the eigenvalues of $C_f$ are $\lambda_i = \sigma_f^2\, i^{-\beta}$;
- (A3) $\sigma_n^2(k_e) = \sigma_f^2 \max\!\big((\gamma k_e)^{-\alpha}, q_\infty\big)$;
- (A4) $N = P / (k_e + k_c)$.

Then (paper Eqs. 5–8)

$$ I(f; y) = \tfrac12 \log_2 \det\!\big(I_N + \sigma_n^{-2} C_f\big)
           = \tfrac12 \sum_{i=1}^{N} \log_2\!\big(1 + s\, i^{-\beta}\big)                 \tag{5, 6}$$

$$ s(k_e) = \min\!\big((\gamma k_e)^{\alpha},\ q_\infty^{-1}\big)                           \tag{7}$$

$$ I_{\rm rep}(k_e) = \tfrac12 \sum_{i=1}^{P/(k_e + k_c)}
   \log_2\!\Big(1 + \min\!\big((\gamma k_e)^{\alpha}, q_\infty^{-1}\big)\, i^{-\beta}\Big)   \tag{3, 8}$$

Larger $k_e$ raises every channel's SNR but, at fixed $P$, leaves fewer channels: $I_{\rm rep}$
has an interior maximum in $k_e$ ([`optimal_k_e`][]). Two landmarks (paper §B.3, §B.4):

- the **floor crossover** $k_e^* = \gamma^{-1} q_\infty^{-1/\alpha}$, above which $s$ is pinned
  at $q_\infty^{-1}$ (curves for different budgets then fall together, Fig. 6a);
- the **$\alpha$-crossing** $k_\times = 1/\gamma$, $N_\times = P / (1/\gamma + k_c)$: there
  $s = 1$ for every $\alpha$, so curves that differ only in $\alpha$ cross (Fig. 6b, §B.4).

In the low-SNR regime $I_{\rm rep} \approx \frac{(\gamma k_e)^\alpha}{2 \ln 2}\sum_{i\le N} i^{-\beta}$
(Eq. 9), so at fixed $N$ the log–log slope of $I_{\rm rep}$ in $k_e$ is $\approx \alpha$.

**Non-integer widths (our choice; the paper is silent).** $P/(k_e + k_c)$ is rarely an integer.
The sum over $i \le N$ is taken with weights $w_i = \operatorname{clip}(N - i + 1, 0, 1)$: the
first $\lfloor N \rfloor$ modes in full and mode $\lfloor N\rfloor + 1$ with weight
$N - \lfloor N \rfloor$, i.e. the integer-$N$ sums joined linearly. This is exact at integer $N$
and makes $I_{\rm rep}$ continuous in $k_e$, so that its optimum is well defined; `width="floor"`
uses $\lfloor N \rfloor$ instead (what the paper's experiments do when rounding $N$ down).

**Joint fit to measured losses** ([`fit_i_rep`][], App. A.4 and Fig. 16). Measured losses $L_j$
(test BPC on Enwik8) are modelled as an affine map of $-I_{\rm rep}$,

$$ L_j \approx c_0 - c_1\, I_{\rm rep}(k_{e,j}; N_j, \alpha_{g_j}, \beta_{g_j}, \gamma_{g_j},
   q_{\infty, g_j}), \qquad c_1 \ge 0, $$

sharing $(\alpha, \beta, \gamma, q_\infty)$ across all experiments $g$ except those given their
own value (the paper: four reference values, one $\alpha$ per neuron-integration ablation and
one $\beta$ per connectivity ablation, 8 theory parameters in all). The sum of squared loss
residuals is minimised by differential evolution over the theory parameters, then polished
by Nelder–Mead, as in the paper. For any theory parameters the best $(c_0, c_1)$ is a linear
least-squares problem with $c_1 \ge 0$ and is solved exactly inside the objective (the
minimum of the same objective, with two fewer dimensions for the global search).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np
import xarray as xr
from jax.typing import ArrayLike

from dynlab.analyses.curve_fits import aicc
from dynlab.errors import ConfigError
from dynlab.provenance import stamp_attrs
from dynlab.statistics import Interval

__all__ = [
    "PARAMETERS",
    "IrepParams",
    "Optimum",
    "alpha_crossing",
    "channel_information",
    "fit_i_rep",
    "floor_crossover",
    "i_rep",
    "i_rep_curves",
    "optimal_k_e",
    "snr",
]

PARAMETERS = ("alpha", "beta", "gamma", "q_inf")
Width = Literal["interpolate", "floor"]
_LOG_SEARCH = ("gamma", "q_inf")  # searched as log10 by the fit
DEFAULT_BOUNDS = {"alpha": (0.05, 3.0), "beta": (0.01, 3.0), "gamma": (1e-7, 1.0), "q_inf": (1e-4, 10.0)}
OPTIMUM_DRAWS = 200
"""Parameter draws for the interval of the fitted optimum `k_e_opt` without a bootstrap."""
OPTIMUM_GRID, OPTIMUM_WINDOW = 400, 8.0
"""Each draw's optimum is located on 400 log-spaced points from 1/8 to 8 times the fitted optimum
(steps of 1%), or, if any draw's lies at an end of that window, on 1600 points of `k_range`."""
_MODE_BLOCK = 512  # modes summed per block: bounds memory at [channels, block]


class IrepParams(NamedTuple):
    r"""The theory parameters of Eq. 8.

    - `alpha` $> 0$: noise-decay (expressivity) exponent;
    - `beta` $\ge 0$: spectral decay exponent of the signal covariance ($\beta = 0$: flat);
    - `gamma` $> 0$: effectivity constant ($s = 1$ at $k_e = 1/\gamma$);
    - `q_inf` $\ge 0$: normalised noise floor ($0$: no floor).
    """

    alpha: float
    beta: float
    gamma: float
    q_inf: float


def _check_params(params: IrepParams) -> IrepParams:
    try:
        p = IrepParams(*(float(v) for v in params))
    except (TypeError, ValueError):
        raise ConfigError(f"params must be IrepParams(alpha, beta, gamma, q_inf) of numbers; got {params!r}.") from None
    if not (p.alpha > 0 and p.beta >= 0 and p.gamma > 0 and p.q_inf >= 0) or not all(np.isfinite(p)):
        raise ConfigError(f"need alpha > 0, beta >= 0, gamma > 0, q_inf >= 0 (finite); got {p}.")
    return p


def _check_width(width: str) -> None:
    if width not in ("interpolate", "floor"):
        raise ConfigError(f"width must be 'interpolate' or 'floor'; got {width!r}.")


def snr(k_e: ArrayLike, alpha: ArrayLike, gamma: ArrayLike, q_inf: ArrayLike) -> np.ndarray:
    r"""Per-neuron leading-mode SNR, Eq. 7: $s(k_e) = \min((\gamma k_e)^\alpha, q_\infty^{-1})$ ($q_\infty = 0$: no cap)."""
    k_e, alpha, gamma, q_inf = (np.asarray(a, np.float64) for a in (k_e, alpha, gamma, q_inf))
    with np.errstate(divide="ignore"):
        return np.minimum((gamma * k_e) ** alpha, 1.0 / q_inf)


def channel_information(s: ArrayLike, n_neurons: ArrayLike, beta: ArrayLike, *, width: Width = "interpolate") -> np.ndarray:
    r"""Eq. 6 in bits: $\tfrac12 \sum_{i \le N} w_i \log_2(1 + s\, i^{-\beta})$, broadcast over the arguments.

    $w_i = \operatorname{clip}(N - i + 1, 0, 1)$ for `width="interpolate"` (non-integer $N$,
    see the module docstring), $w_i = [i \le \lfloor N \rfloor]$ for `"floor"`. The sum is exact
    (no tail approximation), accumulated over blocks of modes, each over the channels with
    modes left in it (the cost is about $\sum N$, not (channels) $\times \max N$).
    """
    _check_width(width)
    s, n, beta = np.broadcast_arrays(*(np.asarray(a, np.float64) for a in (s, n_neurons, beta)))
    if np.any(n < 0) or np.any(s < 0) or not np.all(np.isfinite(n)):
        raise ConfigError("n_neurons must be finite and >= 0, and s >= 0.")
    n_all = (n if width == "interpolate" else np.floor(n)).ravel()
    # Repeated channels (e.g. seeds of one configuration in a fit) are summed once.
    (s_flat, n_eff, beta_flat), inverse = np.unique(
        np.stack([s.ravel(), n_all, beta.ravel()]), axis=1, return_inverse=True
    )
    total = np.zeros(n_eff.size)
    modes = int(np.ceil(n_eff.max())) if n_eff.size else 0
    for start in range(0, modes, _MODE_BLOCK):
        rows = np.flatnonzero(n_eff > start)  # only the channels that still have modes here
        i = np.arange(start + 1, min(start + _MODE_BLOCK, modes) + 1, dtype=np.float64)
        weight = np.clip(n_eff[rows, None] - i + 1.0, 0.0, 1.0)
        terms = np.log1p(s_flat[rows, None] * np.exp(-beta_flat[rows, None] * np.log(i)))
        total[rows] += np.sum(weight * terms, axis=-1)
    return total[inverse.ravel()].reshape(s.shape) / (2.0 * np.log(2.0))


def i_rep(k_e: ArrayLike, budget: ArrayLike, k_c: ArrayLike, params: IrepParams, *, width: Width = "interpolate") -> np.ndarray:
    r"""$I_{\rm rep}(k_e)$ in bits, Eq. 8, with $N = P/(k_e + k_c)$; `k_e`, `budget` ($P$), `k_c` broadcast."""
    p = _check_params(params)
    k_e, budget, k_c = (np.asarray(a, np.float64) for a in (k_e, budget, k_c))
    if np.any(k_e <= 0) or np.any(k_c < 0) or np.any(budget <= 0):
        raise ConfigError("need k_e > 0, k_c >= 0 and budget > 0.")
    return channel_information(snr(k_e, p.alpha, p.gamma, p.q_inf), budget / (k_e + k_c), p.beta, width=width)


def floor_crossover(params: IrepParams) -> float:
    r"""$k_e^* = \gamma^{-1} q_\infty^{-1/\alpha}$ (§B.3): the SNR is pinned at $1/q_\infty$ above it ($\infty$ if $q_\infty = 0$)."""
    p = _check_params(params)
    return float(np.inf) if p.q_inf == 0 else float(p.q_inf ** (-1.0 / p.alpha) / p.gamma)


def alpha_crossing(params: IrepParams, budget: ArrayLike, k_c: ArrayLike) -> tuple[float, np.ndarray]:
    r"""$(k_\times, N_\times) = (1/\gamma,\ P/(1/\gamma + k_c))$ (§B.4): where curves differing only in $\alpha$ cross."""
    p = _check_params(params)
    k_x = 1.0 / p.gamma
    return k_x, np.asarray(budget, np.float64) / (k_x + np.asarray(k_c, np.float64))


class Optimum(NamedTuple):
    """The maximiser of $I_{\\rm rep}$ over $k_e$ at one budget (arrays shaped like the budgets)."""

    k_e: np.ndarray
    n_neurons: np.ndarray
    i_rep: np.ndarray
    interior: np.ndarray  # False where the maximum sits on an end of k_range


def optimal_k_e(
    budget: ArrayLike,
    k_c: ArrayLike,
    params: IrepParams,
    *,
    k_range: tuple[float, float],
    n_grid: int = 400,
    width: Width = "interpolate",
) -> Optimum:
    r"""$\arg\max_{k_e} I_{\rm rep}(k_e; P, k_c)$ over $k_e \in$ `k_range`, for each budget $P$.

    A log-spaced grid of `n_grid` points locates the best grid point; bounded Brent refinement
    in $\ln k_e$ between its neighbours gives the optimum. `interior` is False when the best
    grid point is an end of the range (the maximum may lie outside it). `budget` and `k_c`
    broadcast.
    """
    from scipy.optimize import minimize_scalar

    p = _check_params(params)
    lo, hi = (float(v) for v in k_range)
    if not 0 < lo < hi:
        raise ConfigError(f"k_range must be (k_min, k_max) with 0 < k_min < k_max; got {k_range!r}.")
    if isinstance(n_grid, bool) or not isinstance(n_grid, int) or n_grid < 3:
        raise ConfigError(f"n_grid must be an integer >= 3; got {n_grid!r}.")
    budget, k_c = np.broadcast_arrays(np.asarray(budget, np.float64), np.asarray(k_c, np.float64))
    grid = np.geomspace(lo, hi, n_grid)
    curves = i_rep(grid, budget[..., None], k_c[..., None], p, width=width)  # [..., n_grid]
    k_opt = np.empty(budget.shape)
    best = np.argmax(curves, axis=-1)
    for idx in np.ndindex(budget.shape):
        j = int(best[idx])
        res = minimize_scalar(
            lambda u: -float(i_rep(np.exp(u), budget[idx], k_c[idx], p, width=width)),
            bounds=(np.log(grid[max(j - 1, 0)]), np.log(grid[min(j + 1, n_grid - 1)])),
            method="bounded",
            options={"xatol": 1e-9},
        )
        k_opt[idx] = np.exp(res.x) if -res.fun >= curves[idx][j] else grid[j]
    return Optimum(
        k_e=k_opt,
        n_neurons=budget / (k_opt + k_c),
        i_rep=i_rep(k_opt, budget, k_c, p, width=width),
        interior=(best > 0) & (best < n_grid - 1),
    )


def _param_attrs(p: IrepParams) -> dict:
    return {name: float(v) for name, v in zip(PARAMETERS, p)}


def i_rep_curves(
    k_e: ArrayLike,
    budgets: ArrayLike,
    k_c: float,
    params: IrepParams,
    *,
    k_range: tuple[float, float] | None = None,
    width: Width = "interpolate",
) -> xr.Dataset:
    r"""$I_{\rm rep}(k_e)$ on a grid of $k_e$ for several budgets, with each budget's optimum and the crossings.

    **Arguments:** `k_e` (1-D grid, positive), `budgets` (1-D, $P$), `k_c` (scalar), `params`,
    `k_range` for the optimum search (default: the grid's range), `width` (see the module
    docstring).

    **Returns:** an `xr.Dataset` with coords `budget`, `k_e`:

    - `i_rep` (`budget`, `k_e`) in bits; `n_neurons` ($P/(k_e + k_c)$) and `snr` ($s(k_e)$);
    - `k_e_opt`, `n_opt`, `i_rep_opt`, `opt_interior` (`budget`): [`optimal_k_e`][];
    - `n_cross` (`budget`): $N_\times = P/(1/\gamma + k_c)$;
    - attrs `analysis="i_rep"`, `dynlab_version`, `alpha`, `beta`, `gamma`, `q_inf`, `k_c`,
      `k_floor` ($k_e^*$), `k_cross` ($1/\gamma$), `width`.
    """
    p = _check_params(params)
    k_e = np.asarray(k_e, np.float64)
    budgets = np.asarray(budgets, np.float64)
    if k_e.ndim != 1 or k_e.size < 2 or budgets.ndim != 1 or budgets.size < 1:
        raise ConfigError("k_e must be a 1-D grid of >= 2 values and budgets a non-empty 1-D array.")
    values = i_rep(k_e, budgets[:, None], k_c, p, width=width)
    opt = optimal_k_e(budgets, k_c, p, k_range=k_range or (float(k_e.min()), float(k_e.max())), width=width)
    k_cross, n_cross = alpha_crossing(p, budgets, k_c)
    bits = {"units": "bit"}
    return xr.Dataset(
        {
            "i_rep": (("budget", "k_e"), values, {**bits, "long_name": "effective representation information"}),
            "n_neurons": (("budget", "k_e"), budgets[:, None] / (k_e + k_c), {"long_name": "neurons N = P/(k_e+k_c)"}),
            "snr": ("k_e", snr(k_e, p.alpha, p.gamma, p.q_inf), {"long_name": "per-neuron SNR s(k_e)"}),
            "k_e_opt": ("budget", opt.k_e, {"long_name": "k_e maximising I_rep"}),
            "n_opt": ("budget", opt.n_neurons, {"long_name": "N at the optimum"}),
            "i_rep_opt": ("budget", opt.i_rep, {**bits, "long_name": "maximal I_rep"}),
            "opt_interior": ("budget", opt.interior, {"long_name": "optimum inside k_range"}),
            "n_cross": ("budget", n_cross, {"long_name": "N at the alpha-crossing k_e = 1/gamma"}),
        },
        coords={
            "budget": ("budget", budgets, {"long_name": "layer budget P", "units": "parameters"}),
            "k_e": ("k_e", k_e, {"long_name": "per-neuron effective parameters k_e", "units": "parameters"}),
        },
        attrs=stamp_attrs(analysis="i_rep", config={
            **_param_attrs(p),
            "k_c": float(k_c),
            "k_floor": floor_crossover(p),
            "k_cross": k_cross,
            "width": width,
        }),
    )


# ---------------------------------------------------------------------------------------------
# Joint affine fit to measured losses
# ---------------------------------------------------------------------------------------------


def _affine(i: np.ndarray, loss: np.ndarray) -> tuple[float, float, float]:
    r"""$(c_0, c_1, \mathrm{SSE})$ of $L \approx c_0 - c_1 I$ by least squares with $c_1 \ge 0$."""
    ic = i - i.mean()
    var = float(ic @ ic)
    c1 = max(0.0, -float(ic @ (loss - loss.mean())) / var) if var > 0 else 0.0
    c0 = float(loss.mean() + c1 * i.mean())
    r = loss - c0 + c1 * i
    return c0, c1, float(r @ r)


class _Layout(NamedTuple):
    """Where each point's theory parameters sit in the search vector."""

    names: list[str]  # one per search dimension, "alpha" or "alpha[group]"
    index: dict[str, np.ndarray]  # parameter -> [points] index into the vector
    group_index: dict[str, np.ndarray]  # parameter -> [groups] index into the vector


def _layout(groups: list[str], point_group: np.ndarray, vary: Mapping[str, Sequence[str]]) -> _Layout:
    names = list(PARAMETERS)
    index, group_index = {}, {}
    for pos, name in enumerate(PARAMETERS):
        per_group = np.full(len(groups), pos)
        for g in vary.get(name, ()):
            per_group[groups.index(g)] = len(names)
            names.append(f"{name}[{g}]")
        group_index[name] = per_group
        index[name] = per_group[point_group]
    return _Layout(names, index, group_index)


def _check_vary(vary, groups: list[str]) -> dict[str, list[str]]:
    vary = dict(vary or {})
    for name, gs in vary.items():
        if name not in PARAMETERS:
            raise ConfigError(f"vary keys must be theory parameters {', '.join(PARAMETERS)}; got {name!r}.")
        if isinstance(gs, str) or not all(g in groups for g in gs) or len(set(gs)) != len(gs):
            raise ConfigError(f"vary[{name!r}] must list distinct groups from {groups}; got {gs!r}.")
        if len(gs) == len(groups):
            raise ConfigError(f"vary[{name!r}] lists every group: leave at least one group on the shared value.")
    return {k: list(v) for k, v in vary.items()}


def _check_bounds(bounds) -> dict[str, tuple[float, float]]:
    merged = {**DEFAULT_BOUNDS, **dict(bounds or {})}
    for name, b in merged.items():
        if name not in PARAMETERS:
            raise ConfigError(f"bounds keys must be theory parameters {', '.join(PARAMETERS)}; got {name!r}.")
        try:
            lo, hi = (float(v) for v in b)
        except (TypeError, ValueError):
            raise ConfigError(f"bounds[{name!r}] must be (low, high); got {b!r}.") from None
        if not (lo < hi) or (name in _LOG_SEARCH and lo <= 0) or (name == "alpha" and lo <= 0) or lo < 0:
            raise ConfigError(f"bounds[{name!r}] must satisfy 0 <= low < high (0 < low for alpha, gamma, q_inf); got {b!r}.")
        merged[name] = (lo, hi)
    return merged


def _linearised_se(information, theta, free, info, scale, residual, dof) -> tuple[dict, np.ndarray]:
    r"""Standard errors of (free search coordinates, $c_0$, $c_1$) and their covariance
    $\hat\sigma^2 (J^\top J)^{-1}$, $J$ the Jacobian of the fitted losses $c_0 - c_1 I(\theta)$ at the
    optimum, $\hat\sigma^2 = \mathrm{SSE}/(n - p)$."""
    p = int(free.sum())
    if dof <= 0:
        return {"theta": np.full(p, np.nan), "offset": np.nan, "scale": np.nan}, np.full((p + 2, p + 2), np.nan)
    cols = []
    for i in np.flatnonzero(free):
        step = np.zeros(theta.size)
        step[i] = 1e-5 * max(1.0, abs(theta[i]))
        cols.append(-scale * (information(theta + step) - information(theta - step)) / (2 * step[i]))
    jac = np.column_stack(cols + [np.ones(info.size), -info])
    cov = float(residual @ residual) / dof * np.linalg.pinv(jac.T @ jac)
    se = np.sqrt(np.diag(cov))
    return {"theta": se[:p], "offset": float(se[p]), "scale": float(se[p + 1])}, cov


def _optimum_draws(theta, free, cov, dof, bounds, optima, n_draws, rng) -> np.ndarray:
    r"""``[n_draws, groups]`` $\ln k_e^*$ (`optima`) at search coordinates drawn from the fit's
    multivariate Student t (centre the optimum, scale the linearised covariance, $n - p$ df),
    clipped to the bounds. The optimum of a curve with kinks (integer widths, the SNR floor)
    moves in jumps, so no derivative describes its error."""
    p = int(free.sum())
    if dof <= 0 or not np.all(np.isfinite(cov)):
        return np.full((2, len(optima(theta[None])[0])), np.nan)
    vals, vecs = np.linalg.eigh(cov[:p, :p])
    z = rng.standard_normal((n_draws, p)) @ (vecs * np.sqrt(np.clip(vals, 0, None))).T
    thetas = np.repeat(theta[None], n_draws, axis=0)
    thetas[:, free] += z * np.sqrt(dof / rng.chisquare(dof, (n_draws, 1)))
    return optima(np.clip(thetas, *bounds))


def _residual_bootstrap(sse, information, theta, info, loss, offset, scale, dof, n_boot, search_bounds, free,
                        group_optima, rng) -> dict:
    r"""Replicates of (free search coordinates, $c_0$, $c_1$, $\ln k_e^*$) from data generated as the
    points were: the fitted losses plus residuals drawn with replacement, centred and scaled by
    $\sqrt{n/(n-p)}$ (so their variance is $\hat\sigma^2$), each refitted by Nelder–Mead from the
    optimum."""
    from scipy.optimize import minimize

    fitted = offset - scale * info
    residual = loss - fitted
    residual = (residual - residual.mean()) * np.sqrt(loss.size / max(dof, 1))
    out = {"theta": [], "offset": [], "scale": [], "log_k_e_opt": []}
    for _ in range(n_boot):
        y = fitted + residual[rng.integers(0, loss.size, loss.size)]
        res = minimize(sse, theta, args=(y,), method="Nelder-Mead", bounds=search_bounds,
                       options={"xatol": 1e-8, "fatol": 1e-12, "maxiter": 1000 * theta.size})
        c0, c1, _ = _affine(information(res.x), y)
        for key, value in (("theta", res.x[free]), ("offset", c0), ("scale", c1),
                           ("log_k_e_opt", np.log(group_optima(res.x)))):
            out[key].append(value)
    return {key: np.array(value) for key, value in out.items()}


def fit_i_rep(
    loss: ArrayLike,
    k_e: ArrayLike,
    k_c: ArrayLike,
    n_neurons: ArrayLike,
    *,
    group: ArrayLike | None = None,
    budget: ArrayLike | None = None,
    vary: Mapping[str, Sequence[str]] | None = None,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    k_range: tuple[float, float] | None = None,
    n_curve: int = 200,
    seed: int = 0,
    popsize: int = 20,
    maxiter: int = 1000,
    tol: float = 0.01,
    n_boot: int = 0,
    confidence: float = 0.95,
) -> xr.Dataset:
    r"""Joint affine fit $L \approx c_0 - c_1 I_{\rm rep}$ to measured losses (paper App. A.4, Fig. 16).

    Each point $j$ is one trained network: its loss $L_j$, per-neuron effective and connectivity
    parameters $k_{e,j}$, $k_{c,j}$ and width $N_j$ (the integer actually trained;
    $I_{\rm rep}$ is Eq. 6 at $N_j$ with $s(k_{e,j})$, which is Eq. 8 at
    $P_j = N_j(k_{e,j} + k_{c,j})$). Several seeds of one configuration are separate points.

    **Arguments:**

    - `loss`, `k_e`, `k_c`, `n_neurons`: 1-D, one entry per point (`k_c` may be a scalar).
    - `group`: a label per point naming its experiment (one curve: one budget and one
      architecture variant, e.g. `"P=1.6M"`, `"tau_max=1"`); default: one group `"all"`.
    - `budget`: the nominal budget $P$ per point, used only for each group's theory curve and
      optimum (default $N_j(k_{e,j} + k_{c,j})$). A group's curve uses the mean budget and
      mean $k_c$ of its points.
    - `vary`: `{parameter: [groups]}`: those groups get their own value of that theory
      parameter; all others share the reference value. E.g. the paper's
      `{"alpha": ["tau_max=1", "l_mlp=0"], "beta": ["d_s/50=7", "d_s/50=10"]}`.
    - `bounds`: `{parameter: (low, high)}` in natural units, overriding `DEFAULT_BOUNDS`;
      `gamma` and `q_inf` are searched in $\log_{10}$.
    - `k_range`: where theory curves and optima are evaluated (default
      $[\min k_e / 2, 2 \max k_e]$); `n_curve`: curve points.
    - `seed`, `popsize`, `maxiter`, `tol`: differential evolution's (`scipy.optimize`).
    - `n_boot`, `confidence`: every fitted parameter, `offset` and `scale` gets
      `<name>_ci_low`, `<name>_ci_high`: the estimate $\pm\, t_{(1+c)/2,\,n-p}$ standard errors
      ($p$ = the fitted numbers: the theory parameters not pinned by their bounds, plus $c_0$,
      $c_1$), in the search coordinates ($\log_{10}$ for `gamma` and `q_inf`, so theirs are
      multiplicative). The population is the loss noise of these points: the residuals about
      the fitted curve, i.i.d. With `n_boot=0` (default) the standard errors are
      **linearised**: $\hat\sigma^2 (J^\top J)^{-1}$ from the Jacobian of the fitted losses at
      the optimum, $\hat\sigma^2 = \mathrm{SSE}/(n-p)$. With `n_boot` $= B \ge 2$ they are the
      sd of a **residual bootstrap**: $B$ data sets made as the points were (the fitted losses
      plus the residuals drawn with replacement, centred, scaled by $\sqrt{n/(n-p)}$), each
      refitted by Nelder–Mead from the optimum (a local refit). Each group's `k_e_opt` gets the
      percentile interval of the optima of [`OPTIMUM_DRAWS`][] parameter sets drawn from the
      linearised fit (multivariate Student t), or of the bootstrap refits, widened to include
      the estimate: a curve with kinks (integer widths, the SNR floor) moves its optimum in
      jumps, which no derivative describes; NaN for an optimum at an end of `k_range`, where
      the maximum may lie beyond it. Why not the old bootstrap over points: resampling 12
      points with replacement refits on about 8 distinct ones, whose spread is too small; its
      basic intervals covered 0.75–0.92 (`k_e_opt`: 0.55). Measured coverage of the default
      95% intervals on losses generated from the model (12 points, noise sd 1e-3; `alpha`,
      `gamma`, $c_0$, $c_1$ fitted; `benchmarks/coverage_irep.py` prints the table), 200 data sets:
      `alpha` 0.98, `gamma` 0.96, `offset` 0.97, `scale` 0.955, `k_e_opt` 0.92; the residual
      bootstrap (50 refits, 60 data sets): 0.92–0.93 for all five. $n \le p$: NaN
      intervals, and the attrs `uncertainty` says why.

    **Returns:** an `xr.Dataset` with dims `point`, `group`, `k_e_grid`:

    - per point: `loss`, `k_e`, `k_c`, `n_neurons`, `budget`, `i_rep` (bits), `fitted_loss`,
      `residual`; coordinate `point_group`;
    - per group: `alpha`, `beta`, `gamma`, `q_inf` (the values that group uses), `curve_budget`,
      `curve_k_c`, `k_e_opt`, `n_opt`, `loss_opt`, `opt_interior` (theory optimum on
      `k_range`), `k_floor` ($k_e^*$), `k_cross` ($1/\gamma$), `n_cross` ($N_\times$);
    - `curve_loss`, `curve_i_rep` (`group`, `k_e_grid`): the fitted curves;
    - scalars `offset` ($c_0$), `scale` ($c_1$), `sse`, `rmse`, `pearson_r` (measured vs
      fitted), `aicc` (Gaussian residuals, $k$ = theory parameters + 2 + 1 for the variance;
      NaN when there are too few points);
    - attrs `analysis="i_rep_fit"`, `dynlab_version`, `equation`, `alpha_ref`, `beta_ref`,
      `gamma_ref`, `q_inf_ref` (the shared reference values), `free_parameters`, `vary`,
      `bounds` (JSON), `seed`, `popsize`, `maxiter`, `de_nfev`, `de_message`, `polish_nfev`,
      `polish_message`.
    """
    import scipy.stats
    from scipy.optimize import differential_evolution, minimize

    loss = np.asarray(loss, np.float64)
    if loss.ndim != 1 or loss.size < 3:
        raise ConfigError(f"loss must be a 1-D array of at least 3 points; got shape {loss.shape}.")
    try:
        k_e, k_c, n_neurons = (np.broadcast_to(np.asarray(a, np.float64), loss.shape).copy() for a in (k_e, k_c, n_neurons))
        budget = n_neurons * (k_e + k_c) if budget is None else np.broadcast_to(np.asarray(budget, np.float64), loss.shape)
    except ValueError:
        raise ConfigError(f"k_e, k_c, n_neurons and budget must have one entry per loss ({loss.size}).") from None
    arrays = {"loss": loss, "k_e": k_e, "k_c": k_c, "n_neurons": n_neurons, "budget": budget}
    if not all(np.all(np.isfinite(a)) for a in arrays.values()):
        raise ConfigError("loss, k_e, k_c, n_neurons and budget must be finite.")
    if np.any(k_e <= 0) or np.any(k_c < 0) or np.any(n_neurons < 1) or np.any(budget <= 0):
        raise ConfigError("need k_e > 0, k_c >= 0, n_neurons >= 1 and budget > 0 at every point.")
    labels = np.full(loss.shape, "all", dtype=object) if group is None else np.asarray(group).astype(str)
    if labels.shape != loss.shape:
        raise ConfigError(f"group must have one label per loss ({loss.size}); got shape {labels.shape}.")
    groups = list(dict.fromkeys(labels.tolist()))
    point_group = np.array([groups.index(g) for g in labels])
    vary = _check_vary(vary, groups)
    bounds = _check_bounds(bounds)
    for name, value in {"n_curve": n_curve, "popsize": popsize, "maxiter": maxiter}.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise ConfigError(f"{name} must be an integer >= 2; got {value!r}.")
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0 or n_boot == 1:
        raise ConfigError(f"n_boot must be 0 (point estimates) or an integer >= 2; got {n_boot!r}.")
    if not 0 < confidence < 1:
        raise ConfigError(f"confidence must lie in (0, 1); got {confidence!r}.")

    layout = _layout(groups, point_group, vary)
    base = [n.split("[")[0] for n in layout.names]
    search_bounds = [tuple(np.log10(bounds[b])) if b in _LOG_SEARCH else bounds[b] for b in base]
    is_log = np.array([b in _LOG_SEARCH for b in base])

    def natural(theta: np.ndarray) -> np.ndarray:
        return np.where(is_log, 10.0 ** theta, theta)

    def information(theta: np.ndarray) -> np.ndarray:
        v = natural(theta)
        s = snr(k_e, v[layout.index["alpha"]], v[layout.index["gamma"]], v[layout.index["q_inf"]])
        return channel_information(s, n_neurons, v[layout.index["beta"]])

    def sse(theta: np.ndarray, y: np.ndarray = loss) -> float:
        return _affine(information(theta), y)[2]

    de = differential_evolution(
        sse, search_bounds, seed=int(seed), popsize=popsize, maxiter=maxiter, tol=tol, polish=False
    )
    polish = minimize(sse, de.x, method="Nelder-Mead", bounds=search_bounds,
                      options={"xatol": 1e-10, "fatol": 1e-14, "maxiter": 4000 * len(base)})
    theta = polish.x if polish.fun <= de.fun else de.x
    info = information(theta)
    offset, scale, sse_value = _affine(info, loss)
    fitted = offset - scale * info
    values = natural(theta)

    # Theory curves and optima per group, with that group's parameters.
    k_range = k_range or (float(k_e.min()) / 2, float(k_e.max()) * 2)
    grid = np.geomspace(*k_range, n_curve)
    per_group = {name: values[layout.group_index[name]] for name in PARAMETERS}
    curve_budget = np.array([budget[point_group == g].mean() for g in range(len(groups))])
    curve_k_c = np.array([k_c[point_group == g].mean() for g in range(len(groups))])

    def group_optima(theta_b: np.ndarray) -> np.ndarray:
        v = natural(theta_b)
        return np.array([optimal_k_e(curve_budget[g], curve_k_c[g],
                                     IrepParams(*(v[layout.group_index[name]][g] for name in PARAMETERS)),
                                     k_range=k_range).k_e for g in range(len(groups))])

    # Uncertainty: (theta_free, offset, scale) +- t_{n-p} SE, SE from the Jacobian or a residual bootstrap.
    low_b, high_b = np.array(search_bounds, dtype=float).T
    free = high_b - low_b > 1e-6 * np.maximum(1.0, np.abs(low_b))  # a parameter pinned by its bounds is not fitted
    dof = loss.size - int(free.sum()) - 2
    population = (f"the loss noise of these {loss.size} points (i.i.d. residuals about the fitted curve, "
                  f"{max(dof, 0)} degrees of freedom)")
    def grid_optima(thetas: np.ndarray) -> np.ndarray:  # [D, search dims] -> [D, groups] ln k_e at the best grid point
        centre = group_optima(theta)
        out = np.empty((len(thetas), len(groups)))
        for g in range(len(groups)):
            window = (max(k_range[0], centre[g] / OPTIMUM_WINDOW), min(k_range[1], centre[g] * OPTIMUM_WINDOW))
            for fine in (np.geomspace(*window, OPTIMUM_GRID), np.geomspace(*k_range, 4 * OPTIMUM_GRID)):
                for first in range(0, len(thetas), 16):  # bounded memory: 16 x grid channels at a time
                    v = natural(thetas[first : first + 16])
                    par = {name: v[:, layout.group_index[name][g], None] for name in PARAMETERS}
                    curves = channel_information(snr(fine, par["alpha"], par["gamma"], par["q_inf"]),
                                                 curve_budget[g] / (fine + curve_k_c[g]), par["beta"])
                    best = np.argmax(curves, axis=1)
                    out[first : first + 16, g] = np.where((best > 0) & (best < fine.size - 1), np.log(fine[best]),
                                                          np.nan)
                if np.isfinite(out[:, g]).all():
                    break  # every draw's optimum inside the window; else once more over all of k_range
            out[:, g] = np.where(np.isfinite(out[:, g]), out[:, g], np.log(k_range[1]))  # at an end: beyond it
        return out

    log_k_opt = np.log(group_optima(theta))
    rng = np.random.default_rng(seed)
    if n_boot:
        replicates = _residual_bootstrap(sse, information, theta, info, loss, offset, scale, dof, n_boot,
                                         search_bounds, free, group_optima, rng)
        spread = {key: np.std(value, axis=0, ddof=1) for key, value in replicates.items()}
        optimum_draws = replicates["log_k_e_opt"]
        method = f"residual bootstrap ({n_boot} refits from the optimum): its sd x Student t, {dof} df"
        optimum_method = f"residual bootstrap ({n_boot} refits from the optimum), percentile"
    else:
        spread, cov = _linearised_se(information, theta, free, info, scale, loss - (offset - scale * info), dof)
        optimum_draws = _optimum_draws(theta, free, cov, dof, (low_b, high_b), grid_optima, OPTIMUM_DRAWS, rng)
        method = f"linearised (Jacobian at the optimum), Student t, {dof} df"
        optimum_method = (f"percentiles over {OPTIMUM_DRAWS} parameter draws from the linearised fit "
                          f"(multivariate Student t, {dof} df; optima on a log grid in steps of 1%)")
    curve_i = np.empty((len(groups), n_curve))
    opt = {key: np.empty(len(groups)) for key in ("k_e", "n", "i", "interior", "k_floor", "n_cross")}
    for g in range(len(groups)):
        params = IrepParams(*(per_group[name][g] for name in PARAMETERS))
        curve_i[g] = i_rep(grid, curve_budget[g], curve_k_c[g], params)
        o = optimal_k_e(curve_budget[g], curve_k_c[g], params, k_range=k_range)
        opt["k_e"][g], opt["n"][g], opt["i"][g], opt["interior"][g] = o.k_e, o.n_neurons, o.i_rep, o.interior
        opt["k_floor"][g] = floor_crossover(params)
        opt["n_cross"][g] = alpha_crossing(params, curve_budget[g], curve_k_c[g])[1]

    n_free = len(layout.names) + 2
    try:
        score = float(aicc(sse_value, loss.size, n_free + 1))
    except ConfigError:
        score = float("nan")
    with np.errstate(invalid="ignore", divide="ignore"):
        r = float(np.corrcoef(loss, fitted)[0, 1]) if np.std(fitted) > 0 else float("nan")
    params_units = {"units": "1"}
    loss_attrs = {"long_name": "measured loss"}
    intervals: dict = {}
    t = scipy.stats.t.ppf((1 + confidence) / 2, dof) if dof > 0 else np.nan

    def add(name, dims, estimate, se, long_name, transform=lambda v: v):
        ci = Interval(transform(estimate), transform(estimate - t * se), transform(estimate + t * se), confidence,
                      population, method, int(n_boot) if n_boot else loss.size)
        attrs = ci.attrs()
        intervals[f"{name}_ci_low"] = (dims, ci.low, {"long_name": f"{long_name}: lower bound, {ci.label}", **attrs})
        intervals[f"{name}_ci_high"] = (dims, ci.high, {"long_name": f"{long_name}: upper bound, {ci.label}", **attrs})

    theta_se = np.zeros(theta.size)  # pinned parameters: no error
    theta_se[free] = spread["theta"]
    for pos, name in enumerate(PARAMETERS):
        cols = layout.group_index[name]
        add(name, "group", theta[cols], theta_se[cols], f"fitted {name}",
            (lambda v: 10.0**v) if name in _LOG_SEARCH else (lambda v: v))
    add("offset", (), offset, spread["offset"], "c0")
    add("scale", (), scale, spread["scale"], "c1")
    # an optimum at an end of k_range has no interval: the maximum may lie beyond it
    inside = opt["interior"].astype(bool) & (dof > 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        q_low, q_high = np.nanquantile(optimum_draws, [(1 - confidence) / 2, (1 + confidence) / 2], axis=0)
    q_low, q_high = np.fmin(q_low, log_k_opt), np.fmax(q_high, log_k_opt)  # the estimate itself may sit on a kink
    ci = Interval(np.exp(log_k_opt), np.where(inside, np.exp(q_low), np.nan), np.where(inside, np.exp(q_high), np.nan),
                  confidence, population, optimum_method, len(optimum_draws))
    for side, bound in (("low", ci.low), ("high", ci.high)):
        intervals[f"k_e_opt_ci_{side}"] = ("group", bound, {"long_name": f"k_e at the theory optimum: {side} bound, "
                                                                         f"{ci.label}", **ci.attrs()})
    return xr.Dataset(
        {
            "loss": ("point", loss, loss_attrs),
            "k_e": ("point", k_e, {"long_name": "per-neuron effective parameters k_e"}),
            "k_c": ("point", k_c, {"long_name": "per-neuron connectivity parameters k_c"}),
            "n_neurons": ("point", n_neurons, {"long_name": "neurons N"}),
            "budget": ("point", budget, {"long_name": "layer budget P"}),
            "i_rep": ("point", info, {"units": "bit", "long_name": "I_rep at the fitted parameters"}),
            "fitted_loss": ("point", fitted, {"long_name": "offset - scale * I_rep"}),
            "residual": ("point", loss - fitted, {"long_name": "loss - fitted_loss"}),
            **{name: ("group", per_group[name], {**params_units, "long_name": f"fitted {name}"}) for name in PARAMETERS},
            "curve_budget": ("group", curve_budget, {"long_name": "budget P of the group's theory curve"}),
            "curve_k_c": ("group", curve_k_c, {"long_name": "k_c of the group's theory curve"}),
            "k_e_opt": ("group", opt["k_e"], {"long_name": "k_e at the theory optimum"}),
            "n_opt": ("group", opt["n"], {"long_name": "N at the theory optimum"}),
            "loss_opt": ("group", offset - scale * opt["i"], {"long_name": "fitted loss at the theory optimum"}),
            "opt_interior": ("group", opt["interior"].astype(bool), {"long_name": "optimum inside k_range"}),
            "k_floor": ("group", opt["k_floor"], {"long_name": "floor crossover k_e* = q_inf^(-1/alpha)/gamma"}),
            "k_cross": ("group", 1.0 / per_group["gamma"], {"long_name": "alpha-crossing k_x = 1/gamma"}),
            "n_cross": ("group", opt["n_cross"], {"long_name": "alpha-crossing N_x = P/(1/gamma + k_c)"}),
            "curve_i_rep": (("group", "k_e_grid"), curve_i, {"units": "bit", "long_name": "I_rep on the grid"}),
            "curve_loss": (("group", "k_e_grid"), offset - scale * curve_i, {"long_name": "fitted loss on the grid"}),
            "offset": ((), offset, {"long_name": "c0 in loss = c0 - c1 * I_rep"}),
            "scale": ((), scale, {"long_name": "c1 in loss = c0 - c1 * I_rep (per bit)"}),
            "sse": ((), sse_value, {"long_name": "sum of squared loss residuals"}),
            "rmse": ((), float(np.sqrt(sse_value / loss.size)), {"long_name": "root mean squared residual"}),
            "pearson_r": ((), r, {**params_units, "long_name": "Pearson r, measured vs fitted loss"}),
            "aicc": ((), score, {**params_units, "long_name": "AICc (Gaussian loss residuals)"}),
            **intervals,
        },
        coords={
            "point": ("point", np.arange(loss.size)),
            "point_group": ("point", labels.astype(str)),
            "group": ("group", groups),
            "k_e_grid": ("k_e_grid", grid, {"long_name": "k_e of the theory curves"}),
        },
        attrs=stamp_attrs(analysis="i_rep_fit", seed=int(seed), config={
            "equation": "loss = offset - scale * I_rep(k_e; N, alpha, beta, gamma, q_inf)  [paper Eq. 6-8]",
            **{f"{name}_ref": float(values[pos]) for pos, name in enumerate(PARAMETERS)},
            "free_parameters": ", ".join(layout.names + ["offset", "scale"]),
            "vary": json.dumps(vary),
            "bounds": json.dumps(bounds),
            "popsize": int(popsize),
            "maxiter": int(maxiter),
            "de_nfev": int(de.nfev),
            "de_message": str(de.message),
            "polish_nfev": int(polish.nfev),
            "polish_message": str(polish.message),
            "n_boot": int(n_boot),
            "dof": int(dof),
            "uncertainty": (f"{confidence:.0%} intervals (<name>_ci_low/_ci_high), {method}, over {population}"
                            if dof > 0 else f"none: {loss.size} points leave no degrees of freedom for the "
                                            f"{int(free.sum()) + 2} fitted numbers (intervals NaN)"),
        }),
    )
