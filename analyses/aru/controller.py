r"""``controller`` (ARU Fig. 5a/b): the controller states of an ARU layer under constant drives in their
principal components, with their limit points, and the $(n_t, s_t)$ paths, with its figure."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.aru.frozen_map import aru_layer
from dynlab.analyses.aru.plotting import drive_colors, title
from dynlab.analyses.aru.traces import step_drive_traces, with_zero
from dynlab.errors import ConfigError, require_positive
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register
from dynlab.units.aru import gamma


def plot_controller(ds: xr.Dataset, neuron: int = 0):
    """Fig. 5a/b: one neuron's controller trajectories in PC space with every neuron's limit points;
    its (n_t, s_t) paths with onset (▲) and end (■) over the γ'(ξ; n, s) = 1 - ε level curves."""
    fig, (ax_pc, ax_ns) = subplots(1, 2, figsize=(11, 4.4))
    drives = ds.drive.values
    colors, sm = drive_colors(drives)
    after = ds.time.values >= 0
    for i, c in enumerate(colors):
        traj = ds.pc.isel(drive=i, neuron=neuron).values[after]
        ax_pc.plot(traj[:, 0], traj[:, 1] if traj.shape[1] > 1 else 0 * traj[:, 0], color=c, lw=0.8)
        lim = ds.limit_pc.isel(drive=i).values
        ax_pc.scatter(lim[:, 0], lim[:, 1] if lim.shape[1] > 1 else 0 * lim[:, 0], color=c, s=6, alpha=0.5)
        ax_pc.scatter(*ds.limit_pc.isel(drive=i, neuron=neuron).values[:2], color=c, marker="s", s=30,
                      edgecolors="k")
    evr = ds.explained_variance_ratio.values
    ax_pc.set(xlabel=f"PC1 ({100 * evr[0]:.0f}%)", ylabel=f"PC2 ({100 * evr[1]:.0f}%)" if evr.size > 1 else "",
              title=f"controller states, neuron {neuron} (lines), limit points of all neurons (dots)")
    fig.colorbar(sm, ax=ax_pc, label="ξ")
    level = 1 - float(ds.attrs.get("eps", 0.01))
    for i, c in enumerate(colors):
        gp = ds.gamma_prime.isel(drive=i).values
        if gp.min() < level < gp.max():
            ax_ns.contour(ds.n_mesh, ds.s_mesh, gp.T, levels=[level], colors=[c], linestyles="--", linewidths=0.8)
        n, s = ds.n_t.isel(drive=i, neuron=neuron).values[after], ds.s_t.isel(drive=i, neuron=neuron).values[after]
        ax_ns.plot(n, s, color=c, lw=1)
        ax_ns.scatter(n[0], s[0], marker="^", color=c, edgecolors="k", s=30)
        ax_ns.scatter(n[-1], s[-1], marker="s", color=c, edgecolors="k", s=30)
    ax_ns.set(xlabel="gain n", ylabel="saturation s", title=f"(n_t, s_t) of neuron {neuron}; dashed: γ'(ξ) = {level:g}")
    title(fig, ds, f"controller analysis, {ds.attrs.get('inputs', '')}")
    return fig


def controller_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze controller`` prints: the explained variance of the PCs and (n, s) at
    onset and at the end per drive, with the limit residual."""
    evr = ds.explained_variance_ratio.values
    lines = ["explained variance: " + ", ".join(f"PC{i + 1} {100 * v:.1f}%" for i, v in enumerate(evr))]
    for i, xi in enumerate(ds.drive.values):
        lines.append(f"xi = {xi:<6g} n onset {float(ds.n_onset[i].mean()):.4f} -> end {float(ds.n_inf[i].mean()):.4f}, "
                     f"s onset {float(ds.s_onset[i].mean()):+.4f} -> end {float(ds.s_inf[i].mean()):+.4f} "
                     f"(means over neurons); limit residual {float(ds.limit_residual[i]):.2g}")
    return "\n".join(lines)


@register(
    "analysis",
    "controller",
    "ARU Fig. 5a/b: controller-state PCA with limit points; (n, s) paths",
    figure=plot_controller,
    summary=controller_summary,
    outputs=(
        Output("pc", "field", ("drive", "time", "neuron", "component")),
        Output("limit_pc", "real", ("drive", "neuron", "component")), Output("limit_residual", "real", ("drive",)),
        Output("explained_variance_ratio", "fraction", ("component",)),
        *Output.each("n_t s_t", "field", ("drive", "time", "neuron")),
        *Output.each("n_onset s_onset n_inf s_inf", "real", ("drive", "neuron")),
        Output("gamma_prime", "field", ("drive", "n_mesh", "s_mesh")),
    ),
)
def controller_analysis(
    model,
    *,
    drives: Sequence[float] = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0),
    onset: int = 50,
    duration: int = 300,
    n_pc: int = 2,
    eps: float = 0.01,
    mesh: int = 61,
    task=None,
    seed: int = 0,
) -> xr.Dataset:
    r"""The controllers of an ARU layer under constant drives (Fig. 5a/b).

    The model runs ``onset`` steps without drive, then ``duration`` steps under each constant drive
    $\xi$ ($\xi = 0$ included), on zero input (or ``task``'s inputs). Every neuron's controller
    state $g^i_t \in \mathbb{R}^{n_g}$, over all neurons, steps and drives, enters one PCA (centred,
    eigenvectors of the $n_g \times n_g$ covariance); ``pc`` holds the trajectories in the first
    ``n_pc`` components and ``limit_pc`` the states after the last step, the limit points of
    Fig. 5a (``limit_residual`` = $\max_i \lVert g^i_T - g^i_{T-1}\rVert$ says whether they are
    reached). ``n_onset``/``s_onset`` (the first driven step) and ``n_inf``/``s_inf`` (the last step)
    are Fig. 5b's triangles and squares; ``gamma_prime`` (``drive``, ``n_mesh``, ``s_mesh``) is
    $\gamma'(\xi; n, s)$ on a mesh spanning the paths, whose level set $1 - \epsilon$ (``eps``) the
    paper overlays.

    Args:
        drives: constant drives xi (0 is always added).
        onset: undriven steps before the drive.
        duration: driven steps.
        n_pc: principal components kept.
        eps: level curves gamma' = 1 - eps.
        mesh: points per axis of the gamma' mesh.
        task: the task whose inputs drive the model (default: zero input).
        seed: seed of the task's inputs.
    """
    require_positive("n_pc", n_pc)
    require_positive("mesh", mesh)
    require_positive("eps", eps, integer=False)
    drives = with_zero(drives)
    cell = aru_layer(model)
    if n_pc > cell.n_g:
        raise ConfigError(f"n_pc must be at most n_g = {cell.n_g}, got {n_pc}")
    T, H = onset + duration, cell.hidden
    tr = step_drive_traces(model, drives, onset, duration, task, seed)
    g = tr["g"].reshape(-1, cell.n_g)
    centre = g.mean(0)
    evals, evecs = np.linalg.eigh(np.cov(g, rowvar=False))
    order = np.argsort(evals)[::-1]
    evals, evecs = np.clip(evals[order], 0, None), evecs[:, order[:n_pc]]
    pc = (tr["g"] - centre) @ evecs  # [D, T, H, n_pc]

    n_all, s_all = tr["n"], tr["s"]
    n_mesh = np.linspace(min(n_all.min(), 0.5), max(n_all.max(), 1.0), mesh)
    s_mesh = np.linspace(min(s_all.min(), 0.0), max(s_all.max(), 1.0), mesh)
    d_gamma = jax.vmap(jax.vmap(jax.vmap(jax.grad(gamma), (None, None, 0)), (None, 0, None)), (0, None, None))
    gp = np.asarray(d_gamma(jnp.asarray(drives, jnp.float32), jnp.asarray(n_mesh, jnp.float32),
                            jnp.asarray(s_mesh, jnp.float32)))
    time = np.arange(T) - onset
    ds = xr.Dataset(
        {
            "pc": (("drive", "time", "neuron", "component"), pc, {"long_name": "controller state in PC space"}),
            "limit_pc": (("drive", "neuron", "component"), pc[:, -1], {"long_name": "limit point in PC space"}),
            "limit_residual": ("drive", np.linalg.norm(tr["g"][:, -1] - tr["g"][:, -2], axis=-1).max(-1),
                               {"long_name": "max_i |g_T - g_(T-1)|"}),
            "explained_variance_ratio": ("component", evals[:n_pc] / evals.sum()),
            "n_t": (("drive", "time", "neuron"), n_all, {"long_name": "gain n_t"}),
            "s_t": (("drive", "time", "neuron"), s_all, {"long_name": "saturation s_t"}),
            "n_onset": (("drive", "neuron"), n_all[:, onset], {"long_name": "gain at onset"}),
            "s_onset": (("drive", "neuron"), s_all[:, onset], {"long_name": "saturation at onset"}),
            "n_inf": (("drive", "neuron"), n_all[:, -1], {"long_name": "gain at the last step"}),
            "s_inf": (("drive", "neuron"), s_all[:, -1], {"long_name": "saturation at the last step"}),
            "gamma_prime": (("drive", "n_mesh", "s_mesh"), gp, {"long_name": "gamma'(xi; n, s)"}),
        },
        coords={
            "drive": ("drive", drives, {"long_name": "constant drive xi"}),
            "time": ("time", time, {"long_name": "steps since onset", "units": "steps"}),
            "neuron": ("neuron", np.arange(H)),
            "component": ("component", np.arange(1, n_pc + 1)),
            "n_mesh": ("n_mesh", n_mesh, {"long_name": "gain n"}),
            "s_mesh": ("s_mesh", s_mesh, {"long_name": "saturation s"}),
        },
    )
    return stamp(ds, analysis="controller", seed=seed, config=dict(onset=onset, duration=duration, eps=eps,
        hidden=H, n_g=cell.n_g, inputs="zero input" if task is None else f"task {type(task).__name__}"))
