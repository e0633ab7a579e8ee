r"""The registered analysis ``context-modes``: Mante, Sussillo, Shenoy & Newsome (2013)'s reading of
a network trained on context-dependent integration (the task ``context-integration``).

In each context (cue $c$ on, both evidence streams at their coherence-0 mean, fixation off: the
input during a stimulus without evidence), the slow points of the state map are searched from
the states the network visits during the stimulus of held-out trials of that context
([`fixed_points_from_visited`][dynlab.analyses.fixed_points.core.fixed_points_from_visited]).
At each, the slowest mode of the Jacobian and what it integrates
([`integration_modes`][dynlab.analyses.fixed_points.integration.integration_modes]): $\mu_1$, the
eigenvalue nearest to 1; $|\cos(r, w)|$, its right eigenvector against the choice axis $w$; and
the selection $|l^\top B d|$ of each stream's evidence $d$ (its "left" channel minus its "right")
through the left eigenvector $l$. Mante's solution: per context a line of slow points along the
choice axis with $|\mu_1|$ near 1, integrating the cued stream and not the other, although both
move the state.

**The choice axis** $w$ is the least-squares linear read-out of the choice output (class 2 minus
class 1) from the visited states (all held-out trials, every step), so it is defined for any
unit, whatever part of its state the read-out sees. Chosen here, as the paper's networks read
their state linearly: for a unit whose output is a linear function of its state (``rnn``,
``gru``, ``rate``) it is exactly $W_{out}^\top(e_2 - e_1)$ on the span of the visited states.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.analyses.fixed_points.core import fixed_points_from_visited
from dynlab.analyses.fixed_points.integration import integration_modes
from dynlab.config import Count
from dynlab.errors import ConfigError
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register
from dynlab.tasks.cognitive.context_integration import ContextIntegrationTask

CONTEXTS = (0, 1)
"""Context ``c`` cues stream ``c + 1``."""


def _task(task) -> ContextIntegrationTask:
    if not isinstance(task, ContextIntegrationTask):
        name = "none" if task is None else type(task).__name__
        raise ConfigError(f"context-modes reads a network trained on context-dependent integration, and its task "
                          f"({name}) is not that task: train on (or give --task) context-integration")
    return task


def choice_axis(states: np.ndarray, choice: np.ndarray) -> np.ndarray:
    r"""The least-squares linear read-out $w$ of ``choice`` ``[S]`` from ``states`` ``[S, N]``, both
    centred (module docstring)."""
    s = states - states.mean(0)
    return np.linalg.lstsq(s, choice - choice.mean(), rcond=None)[0]


def _summary_vars(modes: list[xr.Dataset]) -> dict:
    """Per context, medians over its slow points; and over contexts, the weakest (the scalars a study compares)."""
    def median(values) -> float:
        return float(np.median(values)) if np.size(values) else np.nan

    cued = [median(m.selection.isel(input=c)) for c, m in zip(CONTEXTS, modes)]
    other = [median(m.selection.isel(input=1 - c)) for c, m in zip(CONTEXTS, modes)]
    mu = [median(m.mu_abs) for m in modes]
    cos = [median(m.readout_cos) for m in modes]
    ratio = [c / o if o > 0 else np.inf for c, o in zip(cued, other)]
    near = [abs(np.log(x)) if x > 0 else np.nan for x in mu]
    return {
        "n_slow": ("context", [int(m.sizes["point"]) for m in modes], {"long_name": "slow points found"}),
        "mu1_abs": ("context", mu, {"long_name": "median |mu_1| over the context's slow points"}),
        "readout_cos": ("context", cos, {"long_name": "median |cos(r, w)|: the mode against the choice axis"}),
        "selection_cued": ("context", cued, {"long_name": "median |l^T B d| of the cued stream"}),
        "selection_other": ("context", other, {"long_name": "median |l^T B d| of the other stream"}),
        "selection_ratio": ("context", ratio, {"long_name": "cued over other stream's selection"}),
        "mu1_farthest": ((), mu[int(np.nanargmax(near))] if np.isfinite(near).any() else np.nan,
                         {"long_name": "the context's median |mu_1| farthest from 1 (in log)"}),
        "readout_cos_min": ((), float(np.min(cos)), {"long_name": "the lower context's median |cos(r, w)|"}),
        "selection_ratio_min": ((), float(np.min(ratio)), {"long_name": "the lower context's cued / other selection"}),
    }


def context_modes_figure(ds: xr.Dataset):
    """|mu_1| of every slow point by context, and each stream's selection into the mode."""

    fig, (ax1, ax2) = subplots(1, 2, figsize=(9, 3.5))
    for c in ds.context.values:
        mu = ds.point_mu_abs.sel(context=c).values
        ax1.plot(np.full(np.isfinite(mu).sum(), c) + np.linspace(-0.15, 0.15, np.isfinite(mu).sum()),
                 mu[np.isfinite(mu)], "o", alpha=0.6, label=f"context {c}")
    ax1.axhline(1.0, color="k", lw=0.8)
    ax1.axhspan(0.95, 1.05, color="0.9", zorder=0)
    ax1.set(xticks=list(ds.context.values), xlabel="context (cued stream = context + 1)", ylabel="|μ₁| at each slow point",
            title="slowest mode")
    width = 0.35
    x = np.arange(ds.sizes["context"])
    ax2.bar(x - width / 2, ds.selection_cued.values, width, label="cued stream")
    ax2.bar(x + width / 2, ds.selection_other.values, width, label="other stream")
    ax2.set(xticks=x, xlabel="context", ylabel="median |lᵀ B d|", title="what the mode integrates")
    ax2.legend(frameon=False)
    fig.tight_layout()
    return fig


def context_modes_summary(ds: xr.Dataset) -> str:
    lines = ["context  slow points  |mu_1|   |cos(r, w)|  selection cued / other"]
    for c in ds.context.values:
        s = ds.sel(context=c)
        lines.append(f"{int(c):>7}  {int(s.n_slow):>11}  {float(s.mu1_abs):.4f}   {float(s.readout_cos):.3f}        "
                     f"{float(s.selection_cued):.3g} / {float(s.selection_other):.3g}")
    return "\n".join(lines)


def slow_modes(model, task, *, trials: int = 256, ics: int = 64, q_max: float = 1e-4, seed: int = 0):
    """Per context, the slow points (the fixed-points dataset) and their modes (the
    [`integration_modes`][dynlab.analyses.fixed_points.integration.integration_modes] dataset), as
    ``{context: (points, modes)}``, and the choice axis [`choice_axis`][] (module docstring; the
    arguments as [`context_modes`][]'s)."""
    from dynlab.analyses.state_map import run_in, state_map

    task = _task(task)
    smap = state_map(model)
    x, _, _ = task.batch(jax.random.key(seed + 1), trials, split="test")
    zeros = jnp.zeros(x.shape[1], x.dtype)
    states = np.asarray(jax.jit(jax.vmap(lambda xs: run_in(smap, (xs, zeros))))(x))        # [B, T, N]
    outputs = np.asarray(jax.jit(jax.vmap(model))(x))                                      # [B, T, classes]
    x = np.asarray(x)
    if not np.isfinite(states).all():
        raise ConfigError("the network's states left the finite range on the task's trials; no slow points to find")
    w = choice_axis(states.reshape(-1, states.shape[-1]), (outputs[..., 2] - outputs[..., 1]).ravel())
    evidence_channels = [c for pair in task.streams for c in pair]
    stimulus = np.abs(x[..., evidence_channels]).sum(-1) > 0
    evidence = {}
    for i, (a, b) in enumerate(task.streams):
        d = np.zeros(task.input_size, np.float32)
        d[a], d[b] = 1.0, -1.0
        evidence[f"stream {i + 1}"] = (jnp.asarray(d), jnp.asarray(0.0))
    found = {}
    for context in CONTEXTS:
        cue = task.cues[context]
        rows = x[:, :, cue].max(axis=1) > 0
        visited = states[rows][stimulus[rows]]
        if len(visited) < ics:
            raise ConfigError(f"context {context}: {len(visited)} stimulus states in {trials} trials, fewer than "
                              f"ics = {ics}: give more trials")
        u = np.zeros(task.input_size, np.float32)
        u[evidence_channels] = 0.5
        u[cue] = 1.0
        u = (jnp.asarray(u), jnp.asarray(0.0))
        points = fixed_points_from_visited(smap.step, jnp.asarray(visited), u, ics=ics, q_max=q_max, seed=seed)
        found[context] = points, integration_modes(smap.step, jnp.asarray(points.points.values, jnp.float32), u,
                                                   inputs=evidence, readout=w)
    return found, w


@register("analysis", "context-modes", "Mante et al. 2013: per context, the slow points' slowest mode |mu_1|, "
          "its alignment with the choice axis and which stream it integrates", figure=context_modes_figure,
          summary=context_modes_summary,
          headline=(("mu1_farthest", "slowest mode |μ₁| (the context farther from 1)"),
                    ("selection_ratio_min", "cued / other stream integrated (the lower context)")),
          outputs=(*Output.each("point_mu_abs point_readout_cos", "real", ("context", "point")),
                   *Output.each("point_selection point_input_gain", "real", ("context", "point", "input")),
                   Output("n_slow", "count", ("context",), description="slow points found"),
                   *Output.each("mu1_abs readout_cos selection_cued selection_other selection_ratio", "real",
                                ("context",)),
                   *Output.each("mu1_farthest readout_cos_min selection_ratio_min")))
def context_modes(model, *, task="context-integration", trials: Count = 256, ics: Count = 64, q_max: float = 1e-4,
                  seed: int = 0) -> xr.Dataset:
    r"""Per context, the slow points at the cue with zero evidence and their integrating modes (module docstring).

    Args:
        task: the context-integration task the model was trained on (default: the model's own).
        trials: held-out trials (drawn from ``seed``) whose stimulus-period states start the searches and fit the choice axis.
        ics: initial states of each context's slow-point search.
        q_max: the largest speed $q = \frac12\lVert F(h) - h\rVert^2$ of a slow point kept.
        seed: the trials and the searches.

    **Returns:** dims ``context``, ``point`` (numbered 0, 1, …: each context's points, padded with NaN), ``input``
    (``stream 1``, ``stream 2``): ``point_mu_abs``, ``point_readout_cos``, ``point_selection``
    and ``point_input_gain`` per point; per context the medians ``mu1_abs``, ``readout_cos``,
    ``selection_cued``, ``selection_other``, their ratio ``selection_ratio`` and ``n_slow``; and
    the weakest context's, the scalars a study compares: ``mu1_farthest``, ``readout_cos_min``,
    ``selection_ratio_min``.
    """
    found, _ = slow_modes(model, task, trials=trials, ics=ics, q_max=q_max, seed=seed)
    modes = [found[c][1] for c in CONTEXTS]
    per_point = xr.concat([m[["mu_abs", "readout_cos", "selection", "input_gain"]].assign_coords(
        point=np.arange(m.sizes["point"])) for m in modes], dim="context", join="outer")
    ds = xr.Dataset({f"point_{k}": v for k, v in per_point.data_vars.items()} | _summary_vars(modes),
                    coords={"context": list(CONTEXTS)})
    return stamp(ds, analysis="context-modes", config={"trials": trials, "ics": ics, "q_max": q_max, "seed": seed})
