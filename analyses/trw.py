r"""Temporal receptive windows (TRW) by scrambling, recurrence plots, impulse responses, dilation.

Sarkar & Howard (Methods; notes §3). For a layer with output $o^l(t) \in \mathbb{R}^N$:

* **Recurrence matrix** (Eq. 10): the Pearson correlation across neurons of two time points,
  $\rho_{ij} = \hat z_i \cdot \hat z_j$, $\hat z_t = (o_t - \langle o_t\rangle)/\lVert o_t - \langle o_t\rangle\rVert$
  ($\langle\cdot\rangle$ = mean over neurons). A time point whose population vector is constant has
  $\hat z = 0$ (its row of $\rho$ is 0 rather than undefined).
* **Scrambling**: the input stream $x$ ($T = 729 = 3^6$ steps: the 9 sequences concatenated) is cut
  into blocks of $s$ steps which are permuted, $P_s[x]$; the layer's response is un-shuffled,
  $P_s^{-1}[o^l(P_s[x])]$, and compared with the intact response through the correlation of the
  two recurrence matrices, $C_l(s) = \operatorname{corr}(\rho^l, \rho^l_\text{shuff}(s))$, over the
  off-diagonal entries (``entries="offdiag"``, default; the diagonal is 1 in both) or all $T^2$.
  ``n_shuffle`` permutations per scale $s = 3^0 \dots 3^6$.
* **TRW** $s_{50}$: the scale at which the mean $C_l(s)$ first reaches ``frac`` (1/2) of its
  maximum over $s$, linearly interpolated in $\log_3 s$. If it is reached already at the smallest
  scale, $s_{50}$ is that scale and ``s50_censored`` is set: the true value is *at or below the
  smallest scale* (left-censored; the curve's maximum is always reached, so $s_{50}$ is never
  beyond the largest scale). $s_{50}$ is a **point estimate** for one stream (one grammar seed)
  and one network. How far it moves with the stream depends on the network and the layer: over 10
  grammar seeds its sd in $\log_3$ steps was 0.20, 0.23, 0.09 and 0.04 in layers 0–3 of a fresh
  SITH-RNN (seed 0, 50 shuffles per scale; `benchmarks/trw_spread.py` prints the table), and
  0.16–0.26 on the networks measured in issue 38. The spread over shuffles
  (``correlation_std``) only describes the permutations of this one stream. For an error bar,
  repeat the analysis over task seeds (and training seeds)
  and use [`dynlab.statistics.t_interval`][] over them.

The correlation of two $T \times T$ recurrence matrices is computed without forming them when
$N < T$: with $y_i = \hat z_i - \bar z$ and $a_i = y_i\cdot\bar z$,
$\rho_{ij} = y_i\cdot y_j + a_i + a_j + \lVert\bar z\rVert^2$, whose non-constant part has mean 0, so
$\sum_{ij}\tilde\rho_{ij}\tilde\rho'_{ij} = \lVert Y^\top Y'\rVert_F^2 + 2T\, a\cdot a'$ (diagonal terms
subtracted for ``offdiag``): $O(T N^2)$ instead of $O(T^2 N)$, and no cancellation of a large mean
when the population vectors are all alike.

**Warm-up** (``warmup``): by default (``"stream"``) the intact stream is presented once before the
measured one, intact or scrambled, and its outputs are discarded, so both responses start from the
same ongoing state. Without it (``"none"``) every response starts from the zero state, and the
onset transient of layers with slow cells (τ up to 81 steps per layer, compounding over layers)
dominates their recurrence matrices: measured on a trained SITHCon (sith-trw, seed 0), C > 0.5 for
layers 2–4 exactly when the permutation leaves the first block first (1/n of the shuffles:
0.01 / 0.04 / 0.10 / 0.34 at s = 9 … 243), so their s50 was 3^5.1–3^5.3 whatever the layer;
with the warm-up 0.69 / 1.97 / 3.20 / 4.09 (40 shuffles).

"Layers" of a model: for a unit whose one Cell holds several internal layers
([`dynlab.units.stack.LayerStack`][]: SITHCon, Nets 1–5) its internal layers' outputs;
for any other cell, that cell's output over time. Layers are numbered 1, 2, … through the model.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from dynlab.config import Count, Fraction
from dynlab.errors import ConfigError, require_positive
from dynlab.units.base import TauExtensible
from dynlab.units.stack import LayerStack
from dynlab.analyses.trw_figures import accuracy_vs_dilation as dilation_figure, trw_curves
from dynlab.provenance import stamp_attrs
from dynlab.outputs import Output
from dynlab.registry import register

TASK = "hierarchical-language"
"""The task whose stream the analysis scrambles (its default ``task``)."""

# ---------------------------------------------------------------------------------------------
# numerical cores


def normalise_rows(o: jax.Array, eps: float = 1e-12) -> jax.Array:
    r"""$\hat z_t$: each time point's population vector centred over neurons and scaled to unit norm."""
    z = o - jnp.mean(o, axis=-1, keepdims=True)
    n = jnp.linalg.norm(z, axis=-1, keepdims=True)
    return jnp.where(n > eps, z / jnp.where(n > eps, n, 1.0), 0.0)


def recurrence_matrix(o: jax.Array) -> jax.Array:
    """Eq. 10: ``[T, N] -> [T, T]`` Pearson correlations of population vectors."""
    z = normalise_rows(o)
    return z @ z.T


def recurrence_correlation(za: jax.Array, zb: jax.Array, entries: str = "offdiag") -> jax.Array:
    """Pearson correlation of the recurrence matrices of normalised outputs ``za, zb [T, N]``."""
    T, N = za.shape
    if N >= T:  # forming the matrices is cheaper
        ra, rb = za @ za.T, zb @ zb.T
        if entries == "offdiag":
            m = ~jnp.eye(T, dtype=bool)
            ra, rb = ra[m], rb[m]
        ra, rb = ra.ravel() - ra.mean(), rb.ravel() - rb.mean()
        return jnp.sum(ra * rb) / jnp.sqrt(jnp.sum(ra**2) * jnp.sum(rb**2))
    # rho_ij = y_i.y_j + a_i + a_j + |mean z|^2 with y = z - mean z, a_i = y_i . mean z: the constant
    # drops out of a correlation and the rest has mean 0 over all entries, so no large mean is
    # subtracted from large sums (float32 cancellation when all population vectors are alike)
    ya, yb = za - za.mean(0), zb - zb.mean(0)
    aa, ab = ya @ za.mean(0), yb @ zb.mean(0)
    s_ab = jnp.sum((ya.T @ yb) ** 2) + 2 * T * jnp.dot(aa, ab)
    s_aa = jnp.sum((ya.T @ ya) ** 2) + 2 * T * jnp.dot(aa, aa)
    s_bb = jnp.sum((yb.T @ yb) ** 2) + 2 * T * jnp.dot(ab, ab)
    sum_a = sum_b = 0.0
    n = T * T
    if entries == "offdiag":
        da, db = jnp.sum(ya**2, 1) + 2 * aa, jnp.sum(yb**2, 1) + 2 * ab  # the diagonal of rho, shifted
        s_ab, s_aa, s_bb = s_ab - jnp.sum(da * db), s_aa - jnp.sum(da**2), s_bb - jnp.sum(db**2)
        sum_a, sum_b, n = -jnp.sum(da), -jnp.sum(db), n - T
    cov = s_ab - sum_a * sum_b / n
    return cov / jnp.sqrt(jnp.maximum((s_aa - sum_a**2 / n) * (s_bb - sum_b**2 / n), 1e-30))


def block_permutation(key, T: int, s) -> jax.Array:
    """Indices ``idx[T]`` of a random permutation of the ``T // s`` blocks of ``s`` steps.

    The scrambled stream is ``x[idx]``; ``s`` may be traced (one compilation for all scales):
    blocks are ordered by a random key per block, steps within a block keep their order.
    """
    t = jnp.arange(T)
    r = jax.random.uniform(key, (T,))[t // s]
    return jnp.argsort(r, stable=True)


def check_scales(T: int, scales) -> list[int]:
    scales = [int(s) for s in scales]
    for s in scales:
        if s <= 0 or T % s:
            raise ConfigError(f"scrambling scale {s} does not divide the stream length {T}; use divisors of {T} "
                              f"(e.g. {', '.join(str(3**i) for i in range(int(math.log(T, 3)) + 1) if T % 3**i == 0)})")
    return scales


WARMUPS = ("stream", "none")


class _AfterWarmup(eqx.Module):
    """``layer_fn`` run on ``warm`` then ``x``, returning only the outputs for ``x``."""

    layer_fn: Callable
    warm: jax.Array

    def __call__(self, x):
        W = self.warm.shape[0]
        return tuple(o[W:] for o in self.layer_fn(jnp.concatenate([self.warm, x])))


class _ModelLayers(eqx.Module):
    """[`model_layers`][] as a pytree: the model's arrays are arguments of a compiled program, not
    constants in it, so another model of the same structure reuses the program."""

    model: eqx.Module
    method: str = eqx.field(static=True)

    def __call__(self, xs):
        return model_layers(self.model, self.method)(xs)


@eqx.filter_jit
def _scrambled(layer_fn, x, keys, scales, entries: str, batch_size: int) -> jax.Array:
    """``C[shuffle, layer]`` of [`scramble_correlations`][] for one scale per key, the intact stream's
    run included. Compiled once per structure of ``layer_fn`` (a pytree such as ``_ModelLayers``: one
    program for every model of one architecture, e.g. a trained network and its untrained control; a
    plain function: per function)."""
    T = x.shape[0]
    ref = [normalise_rows(o) for o in layer_fn(x)]

    def one(args):
        k, s = args
        idx = block_permutation(k, T, s)
        inv = jnp.argsort(idx)
        outs = layer_fn(x[idx])
        return jnp.stack([recurrence_correlation(r, normalise_rows(o[inv]), entries) for r, o in zip(ref, outs)])

    return jax.lax.map(one, (keys, scales), batch_size=batch_size)


def scramble_correlations(layer_fn, x, scales, n_shuffle: int, key, *, entries: str = "offdiag",
                          warmup: str = "stream", batch_size: int = 200) -> jax.Array:
    """``C[layer, scale, shuffle]`` for ``layer_fn: x[T, D] -> tuple of [T, N_l]`` (any function).

    ``warmup``: ``"stream"`` runs ``x`` itself before every measured stream and drops those outputs;
    ``"none"`` starts from ``layer_fn``'s initial state (module docstring). Shuffles are evaluated
    with ``lax.map`` in batches of ``batch_size`` (``vmap`` inside a batch), all scales and
    shuffles under one compilation.
    """
    if entries not in ("offdiag", "all"):
        raise ConfigError(f"entries must be 'offdiag' or 'all', got {entries!r}")
    if warmup not in WARMUPS:
        raise ConfigError(f"warmup must be one of {', '.join(map(repr, WARMUPS))}, got {warmup!r}")
    require_positive("n_shuffle", n_shuffle)
    T = x.shape[0]
    scales = check_scales(T, scales)
    if warmup == "stream":
        layer_fn = _AfterWarmup(layer_fn, x)
    keys = jax.random.split(key, len(scales) * n_shuffle)
    ss = jnp.repeat(jnp.asarray(scales), n_shuffle)
    c = _scrambled(layer_fn, x, keys, ss, entries, batch_size)  # [S*n, L]
    return c.reshape(len(scales), n_shuffle, -1).transpose(2, 0, 1)


_S50_NOTE = ("point estimate for this one stream and network (no interval). Its spread over grammar seeds depends on the "
             "network and the layer: sd (log3 steps) over 10 grammar seeds 0.20, 0.23, 0.09, 0.04 in layers 0-3 of a "
             "fresh SITH-RNN (seed 0, 50 shuffles; benchmarks/trw_spread.py), 0.16-0.26 on the networks of issue 38; "
             "the spread over shuffles (correlation_std) describes only this stream. Repeat over task and training "
             "seeds for an error bar")


def s50(scales, curve, frac: float = 0.5) -> tuple[float, bool]:
    """``(s50, censored)``: first crossing of ``frac * max(curve)``, interpolated in log3 s."""
    x = np.log(np.asarray(scales, np.float64)) / np.log(3.0)
    c = np.asarray(curve, np.float64)
    thr = frac * np.nanmax(c)
    above = np.nonzero(c >= thr)[0]
    i = int(above[0])
    if i == 0:
        return float(scales[0]), True
    x0, x1, c0, c1 = x[i - 1], x[i], c[i - 1], c[i]
    return float(3.0 ** (x0 + (thr - c0) / (c1 - c0) * (x1 - x0))), False


# ---------------------------------------------------------------------------------------------
# models


def _is_stack(cell) -> bool:
    return isinstance(cell, LayerStack)


def _scan_cell(cell, u):
    def body(s, x):
        s, o = cell(s, x)
        return s, o

    return jax.lax.scan(body, cell.init_state(), u)[1]


def layer_names(model) -> list[str]:
    names = []
    for i, cell in enumerate(model.cells):
        if _is_stack(cell):
            names += [f"cell{i}.layer{l + 1}" for l in range(cell.layers)]
        else:
            names.append(f"cell{i}")
    return names


def model_layers(model, method: str = "sequence"):
    """``fn(xs[T, D]) -> tuple of [T, N_l]``: every layer's outputs over time (see the module doc).

    ``method``: layer stacks use their long-sequence fast path (``"sequence"``: associative scan /
    FFT, for few long inputs) or a scan of their step (``"scan"``: for many short inputs under
    ``vmap``, e.g. the scrambled streams).
    """

    def fn(xs):
        u = xs if model.encoder is None else jax.vmap(model.encoder)(xs)
        outs = []
        for cell in model.cells:
            if _is_stack(cell):
                o = cell.sequence(u) if method == "sequence" else cell.scan_layers(u)
                outs += list(o)
                u = o[-1]
            else:
                u = _scan_cell(cell, u)
                outs.append(u)
        return tuple(outs)

    return fn


def final_logits(model, xs, method: str = "sequence"):
    """Read-out at the last step for one input ``xs[T, D]`` (``method`` as in [`model_layers`][])."""
    return model.readout(model_layers(model, method)(xs)[-1][-1])


@functools.partial(jax.jit, static_argnames="method")
def _batch_logits(model, xs, method: str):
    """[`final_logits`][] of each sequence of ``xs[B, T, D]``: vmapped steps (``"scan"``) or one
    sequence at a time (``"sequence"``). Jitted once here, so that a model of the same structure
    and a batch of the same shape reuse the compiled program (other seeds, other trained weights)."""
    if method == "scan":
        return jax.vmap(lambda x: final_logits(model, x, "scan"))(xs)
    return jax.lax.map(lambda x: final_logits(model, x), xs)


def extended_model(model, factor: float, how: str = "shift"):
    """``model`` with every τ-extensible cell's τ window scaled by ``factor`` (``how="shift"``,
    default; [`dynlab.units.sith.SITH.shift`][]) or its τ range extended at the slow end
    (``how="extend"``); other cells unchanged."""
    cells = tuple(c.extend_taus(factor, how) if isinstance(c, TauExtensible) and c.tau_extensible else c
                  for c in model.cells)
    return eqx.tree_at(lambda m: m.cells, model, cells)


def default_task(model, task=None):
    """The hierarchical-language task the TRW stream comes from: ``task`` when it is one, a fresh
    one for ``None`` or its name; any other task is a one-line [`ConfigError`][]."""
    from dynlab.tasks.hierarchical import HierarchicalLanguageTask

    if task is None or task == TASK:
        task = HierarchicalLanguageTask()
    if not isinstance(task, HierarchicalLanguageTask):
        raise ConfigError(f"the trw analysis runs on the {TASK!r} stream, got the task "
                          f"{getattr(task, 'describe', lambda: task)()!r}")
    if model.input_size != task.input_size:
        raise ConfigError(f"the TRW stream has {task.input_size} input channels but the model expects "
                          f"{model.input_size}; build the model for the hierarchical-language task")
    return task


def trw_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze trw`` prints: s50 per layer (a bound where censored), and the
    timescales selected where the units pool over tau."""
    lines = []
    for i in range(ds.sizes["layer"]):
        censored = bool(ds.s50_censored[i])
        cens = " (censored: at or below the smallest scale, a bound)" if censored else ""
        sel = ""
        if "tau_selected_quantile" in ds:
            q = ds.tau_selected_quantile[i].values
            sel = f"; tau at the max over tau: median {q[1]:.1f} (10-90%: {q[0]:.1f}-{q[2]:.1f})"
        lines.append(f"{ds.layer_name.values[i]:<16} s50 {'≤' if censored else '='} {float(ds.s50[i]):8.2f} steps "
                     f"= 3^{float(ds.log3_s50[i]):.2f}{cens}{sel}")
    return "\n".join(lines)


@register(
    "analysis",
    "trw",
    "temporal receptive windows: block scrambling, recurrence-matrix correlation, s50 per layer",
    figure=trw_curves,
    summary=trw_summary,
    outputs=(
        Output("correlation", "field", ("layer", "scale", "shuffle")),
        *Output.each("correlation_mean correlation_std", "real", ("layer", "scale")),
        *Output.each("s50 log3_s50", "real", ("layer",)), Output("s50_censored", "field", ("layer",)),
        Output("tau_selected_quantile", "real", ("layer", "quantile"), optional=True,
               description="SITH layers only: quantiles of the selected time cell's tau"),
    ),
)
def trw_analysis(model, *, task=TASK, n_shuffle: Count = 200, scales: Sequence[int] | None = None, dilation: int = 0,
                 mode: Literal["pulse", "hold"] | None = None, entries: Literal["offdiag", "all"] = "offdiag",
                 warmup: Literal["stream", "none"] = "stream", frac: Fraction = 0.5, seed: int = 0,
                 batch_size: Count = 200, extend: bool = True, how: Literal["shift", "extend"] = "shift") -> xr.Dataset:
    """TRW scrambling analysis of any dynlab model on the hierarchical-language stream.

    Args:
        task: a ``hierarchical-language`` task (its grammar seed and mode); default a fresh one.
        n_shuffle: permutations per scale (paper: 200).
        mode: dilation mode, pulse or hold (default: the task's).
        entries: recurrence-matrix entries correlated (offdiag or all).
        warmup: present the intact stream once before each measured one (stream) or start from the zero
            state (none).
        frac: s50 threshold as a fraction of the maximum.
        scales: block lengths (default $3^0 \\dots 3^6$ times the dilation factor); each must divide
            the stream length.
        dilation: exponent m; the stream is dilated by $3^m$ (τ-extensible units rescaled when
            ``extend``: ``how="shift"`` scales their τ window, ``"extend"`` extends their τ range).
        extend: with a dilation, rescale the τ-extensible units by $3^m$ (``how`` says how); without
            it they run unchanged on the dilated stream.
        how: how τ-extensible units are rescaled for a dilation: shift (scale their τ window) or
            extend (extend their τ range).
        seed, batch_size: see the module docstring / [`scramble_correlations`][].

    Returns a dataset with ``correlation[layer, scale, shuffle]``, its mean and std over shuffles,
    ``s50[layer]`` (steps), ``log3_s50``, ``s50_censored``; for What × When units (every cell pools
    over τ) also ``tau_selected_quantile[layer, quantile]`` ([`selected_timescales`][]).
    """
    from dynlab.tasks.hierarchical import check_exponent

    task = default_task(model, task)
    m = check_exponent("dilation", dilation)
    x = jnp.asarray(task.stream(m, mode))
    T = x.shape[0]
    if scales is None:
        scales = [3**i * 3**m for i in range(7) if T % (3**i * 3**m) == 0]
    scales = check_scales(T, scales)
    if m and extend:
        model = extended_model(model, 3**m, how)
    c = np.asarray(scramble_correlations(_ModelLayers(model, "scan"), x, scales, n_shuffle, jax.random.key(seed),
                                         entries=entries, warmup=warmup, batch_size=batch_size))
    mean = c.mean(-1)
    res = [s50(scales, row, frac) for row in mean]
    names = layer_names(model)
    ds = xr.Dataset(
        {
            "correlation": (("layer", "scale", "shuffle"), c,
                            {"long_name": "correlation of recurrence matrices, intact vs un-shuffled", "units": "1"}),
            "correlation_mean": (("layer", "scale"), mean, {"long_name": "mean correlation over shuffles"}),
            "s50": ("layer", np.array([r[0] for r in res]), {"long_name": "temporal receptive window s50", "units": "steps",
                                                             "uncertainty": _S50_NOTE}),
            "log3_s50": ("layer", np.log(np.array([r[0] for r in res])) / np.log(3),
                         {"long_name": "log3 s50", "uncertainty": _S50_NOTE}),
            "s50_censored": ("layer", np.array([r[1] for r in res]),
                             {"long_name": "s50 left-censored: at or below the smallest scale tested"}),
            "correlation_std": (("layer", "scale"), c.std(-1, ddof=1) if n_shuffle > 1 else np.full(mean.shape, np.nan),
                                {"long_name": "sd over shuffles of one stream (permutation spread, not the error of "
                                              "s50 over streams or seeds)"}),
        },
        coords={"layer": ("layer", np.arange(1, len(names) + 1), {"long_name": "layer (1 = first)"}),
                "layer_name": ("layer", names),
                "scale": ("scale", np.asarray(scales), {"long_name": "scrambling block length", "units": "steps"}),
                "shuffle": np.arange(n_shuffle)},
        attrs=stamp_attrs(analysis="trw", seed=seed, config=dict(
            n_shuffle=n_shuffle, entries=entries, warmup=warmup, frac=frac, dilation=m,
            mode=task.mode if mode is None else mode, stream_length=T)),
    )
    if all(_pools_over_tau(c) for c in model.cells):  # model is already rescaled for the dilation
        sel = selected_timescales(model, task=task, dilation=m, mode=mode, rescale=False, warmup=warmup)
        ds = ds.assign(tau_selected_quantile=sel.tau_selected_quantile)
    return ds


def _pools_over_tau(cell) -> bool:
    return _is_stack(cell) and cell.g is not None


@eqx.filter_jit
def _pooled_sequence(cell, u):
    """``cell.pooled_sequence(u)`` compiled as one program (op by op, its FFT path costs more CPU)."""
    return cell.pooled_sequence(u)


@eqx.filter_jit
def _impulse_response(cell, steps: int, feature: int):
    """``cell.impulse_response(steps, feature)`` compiled as one program, once per cell structure and
    (``steps``, ``feature``): a lambda made on each call would be compiled on each call."""
    return cell.impulse_response(steps, feature)


def selected_timescales(model, *, task=None, dilation: int = 0, mode: str | None = None, how: str = "shift",
                        rescale: bool = True, warmup: str = "stream", quantiles=(0.1, 0.5, 0.9)) -> xr.Dataset:
    r"""Which time cell each layer's max over τ picks on the intact stream (What × When units).

    For every layer of every τ-pooled layer stack (SITHCon, Nets 2–5) and every time step and
    feature, $\tau$ at $\arg\max_i \sum_b g_{ab} M_{b,i}(t)$: the timescale whose memory the layer
    passes on. A layer's temporal receptive window is at least that of the cells it selects (and,
    through the layers below, their sum), so this explains the s50 of [`trw_analysis`][]. Units
    without a τ grid (Net 2) report the selected index instead. ``dilation``: the stream dilated
    by $3^m$ (``mode``: the task's by default), τ-extensible units rescaled (``how``) when ``rescale``.
    ``warmup="stream"``: measured on a second presentation of the stream, as [`trw_analysis`][].

    Returns ``tau_selected[layer, time, feature]`` (NaN while a feature's memory is still empty) and
    its ``tau_selected_quantile[layer, quantile]`` over time and features.
    """
    task = default_task(model, task)
    if warmup not in WARMUPS:
        raise ConfigError(f"warmup must be one of {', '.join(map(repr, WARMUPS))}, got {warmup!r}")
    x = jnp.asarray(task.stream(dilation, mode))
    W = x.shape[0] if warmup == "stream" else 0
    if W:
        x = jnp.concatenate([x, x])
    if dilation and rescale:
        model = extended_model(model, 3**dilation, how)
    u = x if model.encoder is None else jax.vmap(model.encoder)(x)
    sel, names = [], []
    for i, cell in enumerate(model.cells):
        if not _pools_over_tau(cell):
            raise ConfigError(f"cell {i} ({type(cell).__name__}) has no max over tau; selected timescales need "
                              "a What x When unit (sithcon, rnn-blockdiag, rnn-diag-*, sith-rnn)")
        feats, outs = _pooled_sequence(cell, u)
        feats = np.asarray(feats)[:, W:]  # [layers, T, n_f, n_tau]
        idx = feats.argmax(-1)
        tau = np.asarray(cell.taus, np.float64)[idx] if isinstance(cell, TauExtensible) else idx.astype(np.float64)
        peak = np.abs(feats).max(-1)  # a memory still empty (nothing seen yet) selects nothing
        sel.append(np.where(peak > 1e-6 * max(float(peak.max()), 1e-30), tau, np.nan))
        names += [f"cell{i}.layer{l + 1}" for l in range(cell.layers)]
        u = outs[-1]
    sel = np.concatenate(sel)
    q = np.nanquantile(sel.reshape(len(sel), -1), quantiles, axis=1).T
    return xr.Dataset(
        {"tau_selected": (("layer", "time", "feature"), sel, {"long_name": "tau of the time cell at the max over tau",
                                                              "units": "steps"}),
         "tau_selected_quantile": (("layer", "quantile"), q, {"long_name": "quantiles over time and features",
                                                              "units": "steps"})},
        coords={"layer": np.arange(1, len(names) + 1), "layer_name": ("layer", names), "quantile": list(quantiles)},
        attrs=stamp_attrs(analysis="selected-timescales", config=dict(dilation=int(dilation), how=how)),
    )


def recurrence_plots(model, *, task=None, dilation: int = 0, window: int | None = None) -> xr.Dataset:
    """Recurrence matrices (Eq. 10) of the input and every layer on the intact stream.

    ``window``: only the first ``window`` steps (default: all). Dims ``layer`` (0 = input),
    ``time``, ``time2``.
    """
    task = default_task(model, task)
    x = jnp.asarray(task.stream(dilation))
    outs = (x,) + model_layers(model)(x)
    W = x.shape[0] if window is None else int(window)
    rho = np.stack([np.asarray(recurrence_matrix(o[:W])) for o in outs])
    return xr.Dataset({"rho": (("layer", "time", "time2"), rho, {"long_name": "Pearson correlation of population vectors"})},
                      coords={"layer": np.arange(len(outs)), "layer_name": ("layer", ["input"] + layer_names(model))},
                      attrs=stamp_attrs(analysis="recurrence"))


# ---------------------------------------------------------------------------------------------
# impulse responses and their collapse under t -> t / tau_i


def collapse_score(curves: np.ndarray, taus: np.ndarray, n_grid: int = 64) -> float:
    r"""How well ``curves[t, i]`` collapse onto one function of $t/\tau_i$ (1 = perfectly).

    Each curve is divided by its peak $|\cdot|$ and interpolated on a common log grid of
    $x = t/\tau_i$ covered by all of them; the score is $1 - \sum (c_i - \bar c)^2 / \sum (c_i - \langle c\rangle)^2$
    (an $R^2$ of the mean curve; $\bar c$ = mean over neurons at each $x$, $\langle c\rangle$ = grand mean).
    """
    T, n = curves.shape
    t = np.arange(T, dtype=np.float64)
    taus = np.asarray(taus, np.float64)
    lo, hi = (1.0 / taus).max(), ((T - 1) / taus).min()
    if not hi > lo:
        raise ConfigError("impulse responses too short for a collapse score: use more steps")
    grid = np.geomspace(lo, hi, n_grid)
    c = np.stack([np.interp(grid * taus[i], t, curves[:, i] / max(np.abs(curves[:, i]).max(), 1e-30)) for i in range(n)])
    within = ((c - c.mean(0)) ** 2).sum()
    total = ((c - c.mean()) ** 2).sum()
    return float(1 - within / max(total, 1e-30))


def impulse_responses(cell, *, steps: int | None = None, feature: int = 0, margin: int = 3) -> xr.Dataset:
    r"""First-layer impulse responses $h_t$ and $L h_t$ of a What × When unit, with collapse scores.

    ``cell``: a unit with ``impulse_response`` (Nets 1–5, SITHCon). $\tau_i$ for rescaling: the
    unit's τ grid when it has one (Nets 3–5, SITHCon), else each neuron's response centroid.
    Collapse scores use the neurons away from the ``margin`` ends of the grid whose $\tau_i$ is at
    most a tenth of ``steps`` (default: ten times the largest τ).
    """
    taus = np.asarray(cell.taus) if isinstance(cell, TauExtensible) else None
    if steps is None:
        steps = int(10 * (taus.max() if taus is not None else 81))
    h, lh = (np.asarray(a) for a in _impulse_response(cell, steps, feature))
    t = np.arange(steps)

    def centroid(r):
        w = np.abs(r)
        return (w * t[:, None]).sum(0) / np.maximum(w.sum(0), 1e-30)

    out = {}
    for name, r in (("h", h), ("Lh", lh)):
        tau = taus if (taus is not None and r.shape[1] == len(taus)) else np.maximum(centroid(r), 1.0)
        sel = np.arange(r.shape[1])
        sel = sel[(tau <= steps / 10)]
        if taus is not None and r.shape[1] == len(taus):
            sel = sel[(sel >= margin) & (sel < len(taus) - margin)]
        out[name] = (r, tau, collapse_score(r[:, sel], tau[sel]) if len(sel) >= 2 else float("nan"),
                     collapse_score(r[:, sel], np.ones(len(sel))) if len(sel) >= 2 else float("nan"))
    return xr.Dataset(
        {
            "h": (("time", "neuron"), out["h"][0], {"long_name": "hidden state after a pulse at t = 0"}),
            "Lh": (("time", "neuron_out"), out["Lh"][0], {"long_name": "read-out L h before convolution/max"}),
            "tau_h": ("neuron", out["h"][1], {"units": "steps"}),
            "tau_Lh": ("neuron_out", out["Lh"][1], {"units": "steps"}),
            "collapse_h": out["h"][2], "collapse_Lh": out["Lh"][2],
            "collapse_h_raw_time": out["h"][3], "collapse_Lh_raw_time": out["Lh"][3],
        },
        coords={"time": t},
        attrs=stamp_attrs(analysis="impulse", config=dict(feature=feature)),
    )


# ---------------------------------------------------------------------------------------------
# accuracy vs dilation, parameter counts


@register("analysis", "dilation", "zero-shot accuracy on the hierarchical language at time dilations 3^m",
          figure=dilation_figure, outputs=(Output("accuracy", "fraction", ("dilation",)),
                                           Output("prediction", "field", ("dilation", "sequence"))))
def accuracy_vs_dilation(model, *, task=None, dilations=range(7), mode: str | None = None,
                         extend: bool = True, method: str = "scan", how: str = "shift") -> xr.Dataset:
    """Accuracy on the 9 sequences at each time dilation $3^m$ (zero-shot; no training).

    τ-extensible units (SITHCon, SITH-RNN) are rescaled by $3^m$ when ``extend``: ``how="shift"``
    (default) scales their τ window ([`dynlab.units.sith.SITH.shift`][]), ``"extend"`` extends
    their τ range at the slow end.
    ``method="scan"`` (default) scans the Cell step with the 9 sequences batched (``vmap``), good for
    every unit (``benchmarks/dilation.py``, 2 cores, 3^6: 3.4–4.4 s per diagonal network);
    ``"sequence"`` uses the time-parallel layer path one sequence at a time (``lax.map``): 2.4–2.6 s
    for the diagonal networks (Nets 3–5) with shifted τ windows, meant for them and for accelerators.

    Args:
        task: a ``hierarchical-language`` task (its grammar seed and mode); default a fresh one.
        dilations: the exponents m of the dilations 3^m at which the accuracy is measured.
        mode: dilation mode, pulse or hold (default: the task's).
        extend: rescale the τ-extensible units by $3^m$ (``how`` says how); without it they run
            unchanged on the dilated inputs.
        method: how the network runs the sequences: scan (the Cell step, sequences batched) or
            sequence (the time-parallel layer path, one sequence at a time).
        how: how τ-extensible units are rescaled: shift (scale their τ window) or extend (extend
            their τ range at the slow end).
    """
    from dynlab.tasks.hierarchical import check_exponent

    task = default_task(model, task)
    accs, preds = [], []
    for m in dilations:
        m = check_exponent("dilation", m)
        mm = extended_model(model, 3**m, how) if (m and extend) else model
        xs = jnp.asarray(task.inputs(m, mode))
        logits = _batch_logits(mm, xs, method)
        p = np.asarray(jnp.argmax(logits, -1))
        preds.append(p)
        accs.append(float((p == np.arange(len(p))).mean()))
    return xr.Dataset(
        {"accuracy": ("dilation", np.array(accs), {"long_name": "accuracy over the 9 sequences", "units": "1"}),
         "prediction": (("dilation", "sequence"), np.stack(preds))},
        coords={"dilation": ("dilation", np.asarray(list(dilations)), {"long_name": "exponent m of the dilation 3^m"}),
                "factor": ("dilation", 3 ** np.asarray(list(dilations))), "sequence": np.arange(9)},
        attrs=stamp_attrs(analysis="dilation", config=dict(
            mode=task.mode if mode is None else mode, extend=int(extend), how=how, chance=1 / 9)),
    )


def parameter_counts(models: dict) -> xr.Dataset:
    """Trainable parameters of each model's units and in total (read-out included)."""
    names = list(models)
    unit = [sum(c.param_count()["total"] for c in models[n].cells) for n in names]
    total = [models[n].param_count()["total"] for n in names]
    return xr.Dataset({"unit_params": ("network", np.array(unit)), "total_params": ("network", np.array(total))},
                      coords={"network": names}, attrs=stamp_attrs(analysis="parameter_counts"))
