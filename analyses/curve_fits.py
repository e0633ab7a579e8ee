r"""Decay laws $y(x)$ compared by AICc: power law, exponential, logarithmic.

The ELM scaling-law paper (Spieler, Martius & Levina, App. A.4, Figs. 17 and 20) asks whether a
reducible error $y$ falls with a resource $x$ (e.g. per-neuron parameters $k_e$) as a power
law, an exponential or a logarithm. Each family has an amplitude $A$ and one shape parameter:

| family        | $y(x)$                     | shape parameter                  |
|---------------|----------------------------|----------------------------------|
| `power_law`   | $A\, x^{-\alpha}$          | exponent $\alpha$                |
| `exponential` | $A\, e^{-x/\tau}$          | decay length $\tau$ (units of x) |
| `logarithmic` | $A \ln(x_0 / x)$           | zero crossing $x_0 > \max x$     |

The logarithmic law is $a - b \ln x$ written as $b \ln(x_0/x)$ with $b = A > 0$ and
$x_0 = e^{a/b}$: every decreasing logarithm that stays positive on the data, and nothing else
(its logarithm must exist; see below). Power law and exponential may also grow
($\alpha < 0$, $\tau < 0$).

**Fitting space and likelihood.** As in the paper, every family is fitted by least squares on
$\ln y$ (log space): the residuals $r_j = \ln y_j - \ln \hat y(x_j)$ are taken as independent
Gaussian with one unknown variance $\sigma^2$, i.e. multiplicative log-normal noise on $y$,
which suits errors spanning decades. The maximum-likelihood $\hat\sigma^2 = \mathrm{RSS}/n$
gives

$$ \ln \hat L = -\tfrac{n}{2}\left[\ln\!\left(2\pi\,\mathrm{RSS}/n\right) + 1\right], \qquad
   \mathrm{AIC} = -2\ln \hat L + 2k, \qquad
   \mathrm{AICc} = \mathrm{AIC} + \frac{2k(k+1)}{n-k-1}, $$

with $k$ = the family's parameters **plus one for $\sigma^2$** ($k = 3$ here) and $n$ points
(at least $k + 2$). All families are fitted to the same numbers $\ln y_j$, so their AICc are
comparable; $\Delta_m = \mathrm{AICc}_m - \min \mathrm{AICc}$ and the Akaike weights
$w_m = e^{-\Delta_m/2} / \sum_j e^{-\Delta_j/2}$ rank them.

**Solvers.** Power law and exponential are linear in log space ($\ln y = \ln A - \alpha \ln x$,
$\ln y = \ln A - x/\tau$): ordinary least squares, the power law via
[`dynlab.analyses.spectra.power_law_exponent`][]. For the logarithm,
$\ln y = \ln A + \ln\ln(x_0/x)$: for fixed $x_0$ the best $\ln A$ is the mean of
$\ln y_j - \ln\ln(x_0/x_j)$, leaving a one-dimensional search over
$u = \ln\ln(x_0 / \max x)$ (a grid on $[-12, 12]$, then bounded Brent refinement).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import xarray as xr
from jax.typing import ArrayLike

from dynlab.analyses.spectra.power_law import power_law_exponent
from dynlab.errors import ConfigError
from dynlab.provenance import stamp_attrs

__all__ = ["FAMILIES", "DecayFit", "aicc", "akaike_weights", "compare_decay_laws", "fit_decay_law"]

FAMILIES = ("power_law", "exponential", "logarithmic")
_FORMULA = {
    "power_law": "A * x**(-shape)",
    "exponential": "A * exp(-x / shape)",
    "logarithmic": "A * log(shape / x)",
}
_SHAPE_NAME = {"power_law": "exponent alpha", "exponential": "decay length tau", "logarithmic": "zero crossing x0"}
_N_PARAMS = 3  # amplitude, shape, and the residual variance sigma^2


class DecayFit(NamedTuple):
    """One family's least-squares fit in log space: $y \\approx$ `predict(x)`."""

    family: str
    amplitude: float
    shape: float
    rss: float  # sum of squared log residuals

    def predict(self, x: ArrayLike) -> np.ndarray:
        x = np.asarray(x, np.float64)
        if self.family == "power_law":
            return self.amplitude * x ** (-self.shape)
        if self.family == "exponential":
            return self.amplitude * np.exp(-x / self.shape)
        return self.amplitude * np.log(self.shape / x)


def aicc(rss: ArrayLike, n_points: int, n_params: int) -> np.ndarray:
    r"""AICc of a least-squares fit with Gaussian residuals of unknown variance.

    $\mathrm{AICc} = n\left[\ln(2\pi\,\mathrm{RSS}/n) + 1\right] + 2k + \frac{2k(k+1)}{n-k-1}$,
    where `n_params` $= k$ counts every fitted parameter including the residual variance.
    Needs $n \ge k + 2$.
    """
    n, k = int(n_points), int(n_params)
    if k < 1 or n < k + 2:
        raise ConfigError(f"AICc needs n_points >= n_params + 2 (n_params >= 1); got n_points={n}, n_params={k}.")
    rss = np.asarray(rss, np.float64)
    with np.errstate(divide="ignore"):
        return n * (np.log(2 * np.pi * rss / n) + 1) + 2 * k + 2 * k * (k + 1) / (n - k - 1)


def akaike_weights(aicc_values: ArrayLike) -> np.ndarray:
    r"""$w_m = e^{-\Delta_m/2} / \sum_j e^{-\Delta_j/2}$ with $\Delta_m = \mathrm{AICc}_m - \min_j \mathrm{AICc}_j$."""
    a = np.asarray(aicc_values, np.float64)
    if a.ndim != 1 or a.size == 0 or np.isnan(a).all():
        raise ConfigError("aicc_values must be a non-empty 1-D array with at least one finite value.")
    rel = np.exp(-0.5 * (a - np.nanmin(a)))
    rel = np.where(np.isnan(rel), 0.0, rel)
    return rel / rel.sum()


def _checked(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ConfigError(f"x and y must be 1-D arrays of one length; got shapes {x.shape} and {y.shape}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ConfigError("x and y must be finite.")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ConfigError("x and y must be positive (the fits are least squares on log y, and use log x).")
    if np.unique(x).size < 3:
        raise ConfigError(f"the fits need at least 3 distinct x values; got {np.unique(x).size}.")
    return x, y


def _log_rss(family: str, amplitude: float, shape: float, x: np.ndarray, log_y: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        fitted = np.log(DecayFit(family, amplitude, shape, np.nan).predict(x))
    return float(np.sum((log_y - fitted) ** 2))


def _log_law(x: np.ndarray, log_y: np.ndarray) -> tuple[float, float]:
    """$(A, x_0)$ minimising $\\sum_j [\\ln y_j - \\ln A - \\ln\\ln(x_0/x_j)]^2$."""
    from scipy.optimize import minimize_scalar

    log_x, log_x_max = np.log(x), np.log(x.max())

    def profile(u: float) -> tuple[float, float]:  # u = ln ln(x0 / x_max); ln A profiled out
        g = np.log(log_x_max + np.exp(u) - log_x)
        log_a = float(np.mean(log_y - g))
        return float(np.sum((log_y - log_a - g) ** 2)), log_a

    grid = np.linspace(-12.0, 12.0, 241)
    j = int(np.argmin([profile(u)[0] for u in grid]))
    lo, hi = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
    u = minimize_scalar(lambda v: profile(v)[0], bounds=(lo, hi), method="bounded", options={"xatol": 1e-10}).x
    return float(np.exp(profile(u)[1])), float(np.exp(log_x_max + np.exp(u)))


def fit_decay_law(x: ArrayLike, y: ArrayLike, family: str) -> DecayFit:
    """Least-squares fit of one family (see the module docstring) to positive `x`, `y` in log space."""
    if family not in FAMILIES:
        raise ConfigError(f"unknown decay-law family {family!r}; valid: {', '.join(FAMILIES)}.")
    x, y = _checked(x, y)
    log_y = np.log(y)
    if family == "power_law":
        fit = power_law_exponent(y, x)
        amplitude, shape = float(fit.amplitude), float(fit.alpha)
    elif family == "exponential":
        slope, intercept = np.polyfit(x, log_y, 1)
        amplitude, shape = float(np.exp(intercept)), (float(-1.0 / slope) if slope != 0 else np.inf)
    else:
        amplitude, shape = _log_law(x, log_y)
    return DecayFit(family, amplitude, shape, _log_rss(family, amplitude, shape, x, log_y))


def compare_decay_laws(x: ArrayLike, y: ArrayLike, *, families: Sequence[str] = FAMILIES) -> xr.Dataset:
    r"""Fit each decay law to $(x_j, y_j)$ in log space and rank them by AICc.

    **Arguments:**

    - `x`, `y`: 1-D positive arrays of one length $n \ge 5$ (e.g. per-neuron parameters $k_e$ and
      the reducible error), at least 3 distinct `x`. Repeated `x` (seeds) are fitted as separate
      points.
    - `families`: a subset of `FAMILIES`.

    **Returns:**

    An `xr.Dataset` with dims `family` and `point`:

    - `amplitude`, `shape` (`family`): $A$ and the shape parameter of each family (coordinates
      `formula` and `shape_name` say which);
    - `rss` (`family`): the sum of squared log residuals; `r2` ($R^2$ of $\ln y$);
    - `aicc`, `delta_aicc`, `akaike_weight` (`family`);
    - `x`, `y` (`point`) and `fitted` (`family`, `point`): the data and each family's $\hat y$;
    - attrs `analysis="decay_law_comparison"`, `dynlab_version`, `best` (the family with the
      smallest AICc), `space="log"`, `likelihood`, `n_points`, `n_params` ($k = 3$).
    """
    families = list(families)
    if not families or any(f not in FAMILIES for f in families) or len(set(families)) != len(families):
        raise ConfigError(f"families must be distinct names from {', '.join(FAMILIES)}; got {families!r}.")
    x, y = _checked(x, y)
    n = x.size
    if n < _N_PARAMS + 2:
        raise ConfigError(f"AICc with {_N_PARAMS} parameters needs at least {_N_PARAMS + 2} points; got {n}.")
    fits = [fit_decay_law(x, y, f) for f in families]
    rss = np.array([f.rss for f in fits])
    scores = aicc(rss, n, _N_PARAMS)
    log_y = np.log(y)
    r2 = 1.0 - rss / np.sum((log_y - log_y.mean()) ** 2)
    fitted = np.stack([f.predict(x) for f in fits])
    one = {"units": "1"}
    return xr.Dataset(
        {
            "amplitude": ("family", [f.amplitude for f in fits], {"long_name": "amplitude A (units of y)"}),
            "shape": ("family", [f.shape for f in fits], {"long_name": "shape parameter (see shape_name)"}),
            "rss": ("family", rss, {**one, "long_name": "sum of squared residuals of log y"}),
            "r2": ("family", r2, {**one, "long_name": "R^2 of log y"}),
            "aicc": ("family", scores, {**one, "long_name": "AICc (Gaussian log residuals)"}),
            "delta_aicc": ("family", scores - scores.min(), {**one, "long_name": "AICc - min AICc"}),
            "akaike_weight": ("family", akaike_weights(scores), {**one, "long_name": "Akaike weight"}),
            "x": ("point", x, {"long_name": "resource x"}),
            "y": ("point", y, {"long_name": "decaying quantity y"}),
            "fitted": (("family", "point"), fitted, {"long_name": "fitted y"}),
        },
        coords={
            "family": ("family", families),
            "formula": ("family", [_FORMULA[f] for f in families]),
            "shape_name": ("family", [_SHAPE_NAME[f] for f in families]),
            "point": ("point", np.arange(n)),
        },
        attrs=stamp_attrs(analysis="decay_law_comparison", config={
            "best": families[int(np.argmin(scores))],
            "space": "log",
            "likelihood": "log y = log yhat(x) + e, e ~ N(0, sigma^2) iid; sigma^2 profiled (RSS/n)",
            "n_points": n,
            "n_params": _N_PARAMS,
        }),
    )
