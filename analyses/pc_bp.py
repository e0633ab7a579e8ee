r"""PC versus BP across width and depth: gradient cosines, $s-1$, $\mathcal L/\mathcal F^*$, loss curves.

The paper's comparison (Innocenti et al., Figs. 1–3, §A.8): for every width $N$, depth $L$ and
seed, a PC network and a BP network start from *identical* weights and are trained as two
separate runs on one fixed batch; at every step $t$

$$ \cos_t = \frac{\langle g^{PC}_t, g^{BP}_t \rangle}{\|g^{PC}_t\|\,\|g^{BP}_t\|}, \qquad
   g^{PC}_t = \nabla_\theta \mathcal F^*(\theta^{PC}_t) \text{ (or } \partial_\theta\mathcal F(z_T, \theta^{PC}_t)
   \text{ after numerical inference)}, \quad g^{BP}_t = \nabla_\theta \mathcal L(\theta^{BP}_t), $$

over the flattened vector of all parameters (0 when $\|g^{PC}\|\|g^{BP}\| < 10^{-10}$, as in
the public code). Also recorded per step: both losses, the PC energy, $s(\theta)-1$ and
$\mathcal L/\mathcal F^*$ (linear networks; $s$ as the mean eigenvalue of $S$ and as its largest,
:mod:`dynlab.analyses.pc_closed_form`), and for numerical inference whether it converged,
its step count and — for linear networks — the distance of the inferred activities to the exact
ones. A step whose inference did not converge keeps its cosine only in ``cosine_unconverged``;
``cosine`` is NaN there, so no summary uses it unknowingly.

Where the paper is silent: seeds vary the weight initialisation only (the task's fixed batch is
the same for every seed); both runs use the same optimiser with the parameterisation's per-layer
rates (:func:`dynlab.ffmodels.learning_rates`).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab import ffmodels
from dynlab.analyses import pc_closed_form as cf
from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.rules import pc
from dynlab.rules.bp import bp_grads


def cosine(g1, g2, eps: float = 1e-10) -> jax.Array:
    """Cosine similarity of two gradient PyTrees over all their leaves (0 if a norm vanishes)."""
    a = jax.tree_util.tree_leaves(eqx.filter(g1, eqx.is_inexact_array))
    b = jax.tree_util.tree_leaves(eqx.filter(g2, eqx.is_inexact_array))
    dot = sum(jnp.vdot(x, y) for x, y in zip(a, b))
    na = jnp.sqrt(sum(jnp.vdot(x, x) for x in a))
    nb = jnp.sqrt(sum(jnp.vdot(y, y) for y in b))
    return jnp.where(na * nb > eps, dot / jnp.maximum(na * nb, eps), 0.0)


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    """Everything except the grid axes (hashable: it is static in the compiled cell)."""

    param: str = "mf"
    alpha: float | None = 0.5
    gamma0: float = 1.0
    residual: bool = True
    activation: str = "linear"
    steps: int = 100
    energy: Literal["closed-form", "inference"] = "closed-form"
    optimizer: Literal["gd", "adam"] = "adam"
    lr: float | None = None
    inference: Literal["discrete", "ode"] = "discrete"
    activity_optimizer: str = "sgd"
    beta: float = 0.3
    inference_steps: int = 500
    atol: float = 0.0
    rtol: float = 1e-4
    x64: bool = False

    def __post_init__(self):
        ffmodels.parameterisation(self.param, alpha=self.alpha, gamma0=self.gamma0)  # validates name, alpha, gamma0
        require_positive("steps", self.steps)
        require_positive("inference_steps", self.inference_steps)
        if self.energy not in ("closed-form", "inference"):
            raise ConfigError(f"unknown energy {self.energy!r}; valid: closed-form, inference")
        if self.optimizer not in ("gd", "adam"):
            raise ConfigError(f"unknown optimizer {self.optimizer!r}; valid: gd, adam")
        if self.inference not in ("discrete", "ode"):
            raise ConfigError(f"unknown inference {self.inference!r}; valid: discrete, ode")
        if self.activation not in ffmodels.ACTIVATIONS:
            raise ConfigError(f"unknown activation {self.activation!r}; valid: {', '.join(ffmodels.ACTIVATIONS)}")
        if self.energy == "closed-form" and self.activation != "linear":
            raise ConfigError(f"energy 'closed-form' needs a linear network, got activation {self.activation!r}; "
                              "use energy 'inference'")
        pc.activity_optimizer(self.activity_optimizer, self.beta)
        if self.lr is not None:
            require_positive("lr", self.lr, integer=False)

    @property
    def base_lr(self) -> float:
        """η0: the given ``lr``, else the paper's (Adam 1e-3, GD 0.025)."""
        return self.lr if self.lr is not None else (1e-3 if self.optimizer == "adam" else 0.025)


def make_model(cfg: CompareConfig, width: int, depth: int, input_size: int, output_size: int, seed: int):
    """The cell's initial network (the same for PC and BP)."""
    model = ffmodels.FeedForward(input_size, output_size, width=width, depth=depth, param=cfg.param, alpha=cfg.alpha,
                                 gamma0=cfg.gamma0, residual=cfg.residual, activation=cfg.activation,
                                 key=jax.random.key(seed))
    return ffmodels.astype(model, jnp.float64 if cfg.x64 else jnp.float32)


def _pc_step(cfg: CompareConfig, model, x, y):
    """PC gradient and diagnostics at ``model``."""
    nan = jnp.asarray(jnp.nan, x.dtype)
    linear = model.activation == "linear"
    if cfg.energy == "closed-form":
        res, grads = cf.energy_and_grads(model, x, y)
        info = dict(energy=res.energy, loss_pc=res.loss, s_minus_1=res.s_minus_1, s_max_minus_1=res.s_max_minus_1,
                    converged=jnp.asarray(True),
                    inference_steps=jnp.asarray(0), activity_distance=nan)
        return grads, info
    z_exact = cf.exact_activities(model, x, y) if linear else None
    if cfg.inference == "ode":
        inf = pc.infer_ode(model, x, y, max_steps=cfg.inference_steps, atol=cfg.atol, rtol=cfg.rtol)
    else:
        inf = pc.infer(model, x, y, optimizer=pc.activity_optimizer(cfg.activity_optimizer, cfg.beta),
                       max_steps=cfg.inference_steps, atol=cfg.atol, rtol=cfg.rtol)
    energy, grads = pc.weight_grads(model, inf.z, x, y)
    if linear:
        res = cf.closed_form(model, x, y)
        s1, sm1, dist = res.s_minus_1, res.s_max_minus_1, jnp.linalg.norm(inf.z - z_exact) / jnp.linalg.norm(z_exact)
    else:
        s1, sm1, dist = nan, nan, nan
    info = dict(energy=energy, loss_pc=pc.loss(model, x, y), s_minus_1=s1, s_max_minus_1=sm1, converged=inf.converged,
                inference_steps=inf.steps, activity_distance=dist)
    return grads, info


@eqx.filter_jit
def run_cell(model, x, y, cfg: CompareConfig):
    """Train PC and BP from ``model`` for ``cfg.steps`` steps (one ``lax.scan``); per-step metrics."""
    optimizer = ffmodels.optimizer(model, cfg.optimizer, cfg.base_lr)
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def step(carry, _):
        p_pc, s_pc, p_bp, s_bp = carry
        g_pc, info = _pc_step(cfg, eqx.combine(p_pc, static), x, y)
        loss_bp, g_bp = bp_grads(eqx.combine(p_bp, static), x, y)
        g_pc, g_bp = eqx.filter(g_pc, eqx.is_inexact_array), eqx.filter(g_bp, eqx.is_inexact_array)
        u_pc, s_pc = optimizer.update(g_pc, s_pc, p_pc)
        u_bp, s_bp = optimizer.update(g_bp, s_bp, p_bp)
        out = dict(info, loss_bp=loss_bp, cosine=cosine(g_pc, g_bp))
        return (eqx.apply_updates(p_pc, u_pc), s_pc, eqx.apply_updates(p_bp, u_bp), s_bp), out

    state = optimizer.init(params)
    _, out = jax.lax.scan(step, (params, state, params, state), None, length=cfg.steps)
    return out


VARIABLES = {
    "cosine": "cosine similarity of PC and BP gradients (NaN where inference did not converge)",
    "cosine_unconverged": "cosine similarity at every step, converged or not",
    "loss_pc": "MSE loss (1/2P sum |y - f|^2) of the PC-trained network",
    "loss_bp": "MSE loss (1/2P sum |y - f|^2) of the BP-trained network",
    "energy": "PC energy: F* (closed form) or F(z_T) after inference, at the PC network",
    "s_minus_1": "energy rescaling s(theta) - 1 = tr(S - I)/d_out, the mean eigenvalue (linear networks)",
    "s_max_minus_1": "lambda_max(S) - 1, the largest eigenvalue (jpc's s; linear networks)",
    "loss_over_energy": "L / F (equals s for scalar output at equilibrium)",
    "converged": "inference met its convergence criterion",
    "inference_steps": "inference steps taken (0 for the closed form)",
    "activity_distance": "|z_T - z*| / |z*| of inferred to exact activities (linear networks)",
}


@register("analysis", "pc-bp", "PC vs BP gradient cosine, s - 1, L/F* and losses over a width x depth grid")
def compare_pc_bp(
    task,
    widths: list[int],
    depths: list[int],
    seeds: int | list[int] = 3,
    *,
    progress: Callable[[int, int, dict], None] | None = None,
    **options,
) -> xr.Dataset:
    r"""Run the PC/BP comparison over ``widths`` × ``depths`` × ``seeds``; an ``xr.Dataset``.

    Args:
        task: a fixed-batch task (``pc-toy``, ``pc-mnist``) or a pair ``(x[P, D], y[P, d_out])``.
        widths, depths: the grid (positive integers; depths ≥ 2).
        seeds: a number of seeds (``0..seeds-1``) or a list of seeds.
        progress: called as ``progress(cells_done, cells_total, {"N": .., "L": .., "cos": ..})``.
        **options: the fields of :class:`CompareConfig` (``param``, ``alpha``, ``gamma0``,
            ``residual``, ``activation``, ``steps``, ``energy``, ``optimizer``, ``lr``,
            ``inference``, ``activity_optimizer``, ``beta``, ``inference_steps``, ``atol``, ``rtol``,
            ``x64``).

    Returns variables over (``width``, ``depth``, ``seed``, ``step``) — see :data:`VARIABLES` —
    plus ``mean_cosine`` over (``width``, ``depth``) (mean over seeds and steps, converged steps
    only), the coordinate ``L_over_N`` and, when $s-1$ is defined, the log–log slope of the
    per-cell mean $s-1$ against $L/N$ (attr ``rescaling_slope``; the theory says 1).
    """
    cfg = CompareConfig(**options)
    widths, depths = _int_list("widths", widths), _int_list("depths", depths)
    if min(depths) < 2:
        raise ConfigError(f"depths must be at least 2, got {min(depths)}")
    seeds = list(range(seeds)) if isinstance(seeds, int) and not isinstance(seeds, bool) else _int_list("seeds", seeds, zero=True)
    if not seeds:
        raise ConfigError("seeds must be a positive integer or a non-empty list")
    x, y = task.fixed_batch("train") if hasattr(task, "fixed_batch") else task
    dtype = jnp.float64 if cfg.x64 else jnp.float32
    shape = (len(widths), len(depths), len(seeds), cfg.steps)
    data = {k: np.full(shape, np.nan) for k in VARIABLES if k not in ("cosine_unconverged",)}
    data["cosine_unconverged"] = np.full(shape, np.nan)
    seconds = np.zeros(shape[:2])
    total, done = len(widths) * len(depths), 0
    x64_mode = jax.enable_x64(True) if cfg.x64 else _null()
    with x64_mode:
        xj, yj = jnp.asarray(x, dtype), jnp.asarray(np.reshape(y, (np.shape(y)[0], -1)), dtype)
        for i, n in enumerate(widths):
            for j, depth in enumerate(depths):
                t0 = time.perf_counter()
                for k, seed in enumerate(seeds):
                    model = make_model(cfg, n, depth, xj.shape[1], yj.shape[1], seed)
                    out = jax.device_get(run_cell(model, xj, yj, cfg))
                    conv = np.asarray(out["converged"], bool)
                    cos = np.asarray(out["cosine"], np.float64)
                    data["cosine_unconverged"][i, j, k] = cos
                    data["cosine"][i, j, k] = np.where(conv, cos, np.nan)
                    for name in ("loss_pc", "loss_bp", "energy", "s_minus_1", "s_max_minus_1", "inference_steps", "activity_distance"):
                        data[name][i, j, k] = np.asarray(out[name], np.float64)
                    data["converged"][i, j, k] = conv
                    data["loss_over_energy"][i, j, k] = np.asarray(out["loss_pc"], np.float64) / np.asarray(out["energy"], np.float64)
                seconds[i, j] = time.perf_counter() - t0
                done += 1
                if progress is not None:
                    progress(done, total, {"N": n, "L": depth, "cos": float(np.nanmean(data["cosine"][i, j]))})
    return _dataset(data, seconds, widths, depths, seeds, cfg, task)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _int_list(name, values, zero=False):
    values = list(values)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < (0 if zero else 1):
            raise ConfigError(f"{name} must be {'non-negative' if zero else 'positive'} integers, got {v!r}")
    if not values:
        raise ConfigError(f"{name} must not be empty")
    return [int(v) for v in values]


def rescaling_slope(ds: xr.Dataset, variable: str = "s_minus_1") -> tuple[float, float]:
    r"""Least-squares slope and intercept of $\log(s-1)$ against $\log(L/N)$ over the cells (mean over seeds and steps).

    ``variable``: ``s_minus_1`` ($\operatorname{tr}(S-I)/d_{out}$) or ``s_max_minus_1`` ($\lambda_{\max}(S) - 1$).
    """
    s1 = ds[variable].mean(("seed", "step")).values.ravel()
    ln = ds["L_over_N"].values.ravel()
    ok = np.isfinite(s1) & (s1 > 0)
    if ok.sum() < 2:
        return float("nan"), float("nan")
    slope, intercept = np.polyfit(np.log(ln[ok]), np.log(s1[ok]), 1)
    return float(slope), float(intercept)


def _dataset(data, seconds, widths, depths, seeds, cfg, task) -> xr.Dataset:
    import dynlab
    from dynlab.config import dumps

    dims = ("width", "depth", "seed", "step")
    variables = {}
    for name, long_name in VARIABLES.items():
        values = data[name]
        if name == "converged":
            values = values.astype(bool)
        elif name == "inference_steps":
            values = values.astype(np.int64)
        variables[name] = (dims, values, {"long_name": long_name})
    w, d = np.meshgrid(np.asarray(widths, float), np.asarray(depths, float), indexing="ij")
    coords = {
        "width": ("width", np.asarray(widths), {"long_name": "width N"}),
        "depth": ("depth", np.asarray(depths), {"long_name": "depth L (number of weight matrices)"}),
        "seed": ("seed", np.asarray(seeds)),
        "step": ("step", np.arange(cfg.steps), {"long_name": "training step"}),
        "L_over_N": (("width", "depth"), d / w, {"long_name": "L / N"}),
    }
    ds = xr.Dataset(variables, coords=coords)
    ds["mean_cosine"] = ds["cosine"].mean(("seed", "step"), skipna=True)
    ds["mean_cosine"].attrs["long_name"] = "cosine averaged over seeds and steps (converged steps only)"
    ds["seconds"] = (("width", "depth"), seconds, {"long_name": "wall-clock seconds per cell (all seeds)", "units": "s"})
    slope, intercept = rescaling_slope(ds)
    slope_max, _ = rescaling_slope(ds, "s_max_minus_1")
    n_unconverged = int((~ds["converged"].values).sum())
    task_name = getattr(task, "describe", lambda: "arrays")()
    config = dataclasses.asdict(cfg)
    config = {k: v for k, v in config.items() if v is not None}
    ds.attrs.update(
        dynlab_version=dynlab.__version__,
        analysis="pc-bp",
        config=dumps({"compare": config, "widths": list(widths), "depths": list(depths), "seeds": list(seeds)}),
        seeds=np.asarray(seeds),
        task=task_name,
        param=cfg.param,
        alpha=float(ffmodels.parameterisation(cfg.param, alpha=cfg.alpha).alpha),
        residual=int(cfg.residual),
        activation=cfg.activation,
        energy=cfg.energy,
        optimizer=cfg.optimizer,
        lr=cfg.base_lr,
        dtype="float64" if cfg.x64 else "float32",
        rescaling_slope=slope,
        rescaling_intercept=intercept,
        rescaling_max_slope=slope_max,
        n_unconverged=n_unconverged,
    )
    return ds
