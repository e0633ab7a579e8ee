"""The ELM network scaling paper's fixed-budget claims (Spieler, Martius & Levina, Figs. 3, 12, 16,
App. A.4), judged on the datasets of the ``elm-budget`` program ([`dynlab.scenarios.elm_budget`][]):
``budget``, ``i_rep_fit``, ``axes`` and ``rho_rec_zero``."""

from __future__ import annotations

import math

import numpy as np

from dynlab.claims import Claim, Estimate, NotTestable, scale_text


def _interior_gap(datasets) -> Estimate:
    r"""Statistic: by how much the best interior d_m beats the better end of the d_m range, at the budget
    where it does so least: per seed $\min_b \big(\min(L_{b,1}, L_{b,\text{last}}) - \min_{1<j<\text{last}}
    L_{b,j}\big)$ (> 0: every budget has an interior optimum), then the mean over seeds with its
    Student-t interval. A fraction of budgets would sit on its threshold of 1 whenever the claim holds."""
    ds = datasets["budget"]
    if ds.sizes["d_m"] < 3:
        raise NotTestable("an interior optimum needs at least 3 values of d_m")
    loss = ds.loss.transpose("seed", "budget", "d_m").values
    ends = np.minimum(loss[..., 0], loss[..., -1])
    gap = ends - loss[..., 1:-1].min(axis=-1)
    ok = np.isfinite(gap).all(axis=0)
    if not ok.any():
        raise NotTestable("no budget with a finite loss at every d_m and seed")
    per_seed = gap[:, ok].min(axis=1)
    return Estimate.mean_of(per_seed, f"per seed: the smallest gap over {int(ok.sum())} budget(s)")


OPTIMUM_DRAWS = 2000
"""Draws of the fitted optima for the interval of their rank correlation with the budget (claim ``optimum-moves-up``)."""


def _optimum_moves(datasets) -> Estimate:
    r"""Statistic: Spearman correlation between the budget and the fitted optimum k_e_opt (one per budget),
    with a 95% interval from the optima's own intervals (``k_e_opt_ci_low/high`` of ``i_rep_fit.nc``):
    each $\ln k_{e,\rm opt}$ is drawn as a normal with the standard error its interval implies
    (half-width / 1.96 in log), independently across budgets, and the interval is the 2.5-97.5%
    percentiles of the draws' rank correlation, widened to contain the value. The fit shares its
    parameters across budgets, so the optima are positively correlated and their differences vary less
    than independent draws say: the interval is wider than needed, which makes a word rarer, not
    wronger. An optimum at an end of ``k_range`` has no interval; then the value is a point estimate."""
    from dynlab.statistics import spearman

    fit = datasets.get("i_rep_fit")
    if fit is None:
        raise NotTestable("the I_rep fit was not run (params.fit = false)")
    budgets = fit.curve_budget.values
    if np.unique(budgets).size < 2:
        raise NotTestable("needs at least 2 budgets")
    value = float(spearman(budgets, fit.k_e_opt.values)[0])
    low, high = (np.log(fit[f"k_e_opt_ci_{side}"].values) if f"k_e_opt_ci_{side}" in fit else np.full(budgets.size, np.nan)
                 for side in ("low", "high"))
    if not (np.isfinite(low).all() and np.isfinite(high).all()) or not math.isfinite(value):
        return Estimate(value, note="a rank correlation of fitted optima, one without an interval (at an end of "
                                    "k_range)")
    se = (high - low) / (2 * 1.959964)
    draws = np.log(fit.k_e_opt.values) + se * np.random.default_rng(0).standard_normal((OPTIMUM_DRAWS, budgets.size))
    rho = np.array([spearman(budgets, np.exp(d))[0] for d in draws])
    q_low, q_high = np.nanquantile(rho, [0.025, 0.975])
    return Estimate(value, min(float(q_low), value), max(float(q_high), value), population=f"{budgets.size} budgets' "
                    "fitted optima", method=f"percentiles over {OPTIMUM_DRAWS} draws of the optima from their "
                    "intervals, independent across budgets (conservative)")


def _pearson(datasets) -> Estimate:
    """Statistic: the Pearson r between the fit and the losses, with its Fisher-z interval over the points
    ([`dynlab.statistics.fisher_interval`][]; none below 4 points)."""
    from dynlab.statistics import fisher_interval

    fit = datasets.get("i_rep_fit")
    if fit is None:
        raise NotTestable("the I_rep fit was not run (params.fit = false)")
    n = fit.sizes["point"]
    r = float(fit.pearson_r)
    if n < 4:
        return Estimate(r, note=f"{n} points: too few for an interval")
    ci = fisher_interval(r, n)
    return Estimate(r, float(ci.low), float(ci.high), level=ci.level, population=ci.population, method=ci.method)


def _sweep_text(sweep: dict | None, fixed: str, axis: str) -> str:
    if sweep is None:
        return "not run"
    return f"{fixed} = {sweep[fixed]}, {axis} {', '.join(str(v) for v in sorted(sweep[axis]))}"


def _monotone(var: str, dim: str):
    """Statistic: minus the Spearman correlation of the loss with the swept size (1: the loss falls at every
    step), per seed, then the mean over seeds with its Student-t interval."""
    from dynlab.statistics import spearman

    def measure(datasets) -> Estimate:
        ds = datasets.get("axes")
        if ds is None or var not in ds:
            raise NotTestable(f"not run: set params.{'n_sweep' if dim == 'hidden' else 'k_e_sweep'}")
        loss = ds[var].transpose("seed", dim).values
        sizes = ds[dim].values
        rhos = [-float(spearman(sizes[np.isfinite(row)], row[np.isfinite(row)])[0])
                if np.isfinite(row).sum() >= 3 else np.nan for row in loss]
        if not np.isfinite(rhos).any():
            raise NotTestable(f"fewer than 3 finished points along {dim}")
        mean = np.nanmean(loss, axis=0)
        return Estimate.mean_of(rhos, f"per seed over {dim} {', '.join(str(v) for v in sizes)}; mean losses "
                                      f"{', '.join(f'{v:.3g}' for v in mean)}")

    return measure


def _rho_rec_gap(datasets) -> Estimate:
    """Statistic: loss(rho_rec = 0) - loss(default), per seed at the same cell; mean with a t interval over seeds."""
    ds = datasets.get("rho_rec_zero")
    if ds is None:
        raise NotTestable("not run: set params.rho_rec_zero = true (or no cell of the grid finished to ablate)")
    gap = (ds.loss.sel(network="feed-forward") - ds.loss.sel(network="default")).values
    return Estimate.mean_of(gap, f"P = {ds.attrs['budget']:,}, d_m = {ds.attrs['d_m']}, N = {ds.attrs['N']}")


def claims(params: dict) -> list[Claim]:
    """The scaling paper's fixed-budget claims at these parameters."""
    task = params["task"]
    if task == "charlm":
        corpus = (params["task_options"] or {}).get("corpus", "text/tinyshakespeare.txt")
        task = f"charlm on {corpus}"
    scale = scale_text({
        "task": (task, "Enwik8 (and SHD-Adding)"),
        "budgets P": (", ".join(f"{b:,}" for b in params["budgets"]), "1.6M-6.0M (Enwik8)"),
        "d_m": (list(params["d_ms"]), "5-50"), "seeds": (len(params["seeds"]), 1),
        "training": (f"{params['steps']} steps", "full runs"),
    }) + ("; data: the SHD files if present, else a synthetic SHD-like set "
          "(the dataset's attr 'data' says which)" if params["task"] == "shd-adding" else "")
    return [
        Claim("interior-optimum", "At a fixed budget the loss has an interior optimum in k_e (every budget)",
              "Fig. 3c: a fixed budget gives an interior optimum in N vs k_e",
              "held-out loss at the better end of the d_m range minus the best interior one, at the budget "
              "where it is smallest (per seed; mean over seeds)", _interior_gap, lower=0.0, strict=True,
              why="> 0 at every budget is an interior optimum at every budget", scale=scale),
        Claim("optimum-moves-up", "The optimum moves to larger k_e as the budget grows (Spearman >= 0.8)",
              "Fig. 3/16: (N, d_m) = (512, 15) -> (1024, 25) when P is quadrupled",
              "rank correlation of the fitted k_e_opt with P", _optimum_moves, lower=0.8,
              why="monotone up to one swap between neighbouring budgets", scale=scale),
        Claim("i-rep-fit", "The joint I_rep fit describes the losses (Pearson r >= 0.9)",
              "App. A.4: Pearson r = 0.98 over 103 points", "Pearson r of fitted against measured losses", _pearson,
              lower=0.9, why="the paper's 0.98 with room for fewer, noisier points", scale=scale),
        *(Claim(f"monotone-in-{axis}", f"The loss falls monotonically with {label} alone (Spearman >= 0.75)",
                "Fig. 3a/b: roughly monotonic gains with N and with neuron complexity (SHD-Adding)",
                f"minus the rank correlation of the mean held-out loss with {label} ({where})", _monotone(var, dim),
                lower=0.75, why="roughly monotone: among 4 points one swap of neighbours gives 0.8 (0.79999... in "
                                "floating point), two give 0.4 or less", scale=scale)
          for axis, label, var, dim, where in (
              ("n", "N", "loss_vs_n", "hidden", _sweep_text(params.get("n_sweep"), "d_m", "hidden")),
              ("k_e", "k_e (d_m)", "loss_vs_d_m", "d_m", _sweep_text(params.get("k_e_sweep"), "hidden", "d_ms")))),
        Claim("rho-rec-zero-worse", "A feed-forward network (rho_rec = 0) is worse than the default",
              "Fig. 12: about 0.1 BPC worse (Enwik8)",
              "held-out loss with rho_rec = 0 minus the default's, paired by seed, at the grid's best (P, d_m)",
              _rho_rec_gap, lower=0.0, strict=True, why="worse: a positive loss difference", scale=scale),
    ]
