r"""Covariant Lyapunov vectors of a dynlab model's full state map, registered as the analysis ``clv``.

The map is the one every dynamical analysis sees ([`dynlab.analyses.state_map`][]), under an
input protocol ([`dynlab.analyses.protocol`][]: autonomous, a constant drive $\xi$, a task's
inputs, or input noise).
The read-out subspace is the row space of the read-out matrix $W_{\text{out}}$, placed on the
state components that the read-out reads (the last layer's output, when that output is one of
its state components, as for RNN, GRU, LSTM, ARU and ELM layers).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax.flatten_util import ravel_pytree

from dynlab.analyses.clv.core import clv_core
from dynlab.analyses.clv.figure import clv_figure, clv_summary
from dynlab.analyses.protocol import Autonomous, Protocol
from dynlab.analyses.qr_settings import QRSettings
from dynlab.config import Count
from dynlab.errors import ConfigError
from dynlab.provenance import stamp
from dynlab.outputs import Output
from dynlab.registry import register
from dynlab.statistics import batch_means

__all__ = ["ANGLE_PARTS", "CLV_QR", "check_clv", "clv_analysis", "readout_matrix"]


def readout_matrix(model, smap) -> tuple[np.ndarray | None, str]:
    r"""The read-out as a matrix on the flat state, `[outputs, N]`, and what it reads, in words.

    The model's output is $y_t = W_{\text{out}}\, o_t + b$ with $o_t$ the last layer's output.
    When $o_t$ is one of the last layer's state components (checked numerically: at a random
    state and input, the read-out of that component reproduces the model's output), the
    read-out matrix is $W_{\text{out}}$ on that component's coordinates and zero elsewhere.
    Otherwise (e.g. a layer whose output is a convolution and max over its state) there is no
    linear read-out subspace of the state: returns `(None, reason)`.
    """
    last = len(model.cells) - 1
    width = model.readout.in_features
    labels = np.asarray(smap.labels)
    names = list(dict.fromkeys(label for label in smap.labels if label.startswith(f"layer{last}.")))
    names.sort(key=lambda name: not name.endswith(".h"))  # the activity first
    key = jax.random.key(0)
    h = smap.h0 + 0.3 * jax.random.normal(key, smap.h0.shape, smap.h0.dtype)
    x = 0.5 * jax.random.normal(jax.random.fold_in(key, 1), (model.input_size,), smap.h0.dtype)
    new_state, y = model.step(smap.unravel(h), x, None)
    flat = np.asarray(ravel_pytree(new_state)[0])
    weight = np.asarray(model.readout.weight)
    bias = 0.0 if model.readout.bias is None else np.asarray(model.readout.bias)
    for name in names:
        idx = np.flatnonzero(labels == name)
        if idx.size != width:
            continue
        if np.allclose(weight @ flat[idx] + bias, np.asarray(y), rtol=1e-4, atol=1e-5):
            matrix = np.zeros((weight.shape[0], smap.dim))
            matrix[:, idx] = weight
            return matrix, f"row space of the read-out weights on {name} (dimension {np.linalg.matrix_rank(weight)})"
    return None, (f"the last layer's output (width {width}) is none of its state components, "
                  "so the read-out has no subspace in the state")


CLV_QR = QRSettings(k=8, reortho_every=1)
"""The QR settings of [`clv_analysis`][]: 8 vectors, re-orthonormalised at every step (Ginelli's
backward pass needs every step's $R_t$, so no other interval is taken)."""


def check_clv(model, *, qr: QRSettings = CLV_QR, steps: int, window: int, transient_forward: int,
              transient_backward: int, snapshots: int = 20, **_) -> None:
    """The options of [`clv_analysis`][] that ``model`` can take; one ConfigError line otherwise."""
    from dynlab.analyses.clv.core import _check
    from dynlab.analyses.state_map import state_map

    if qr.reortho_every != 1:
        raise ConfigError(f"clv re-orthonormalises at every step (Ginelli's backward pass needs every R_t): "
                          f"reortho_every must be 1, got {qr.reortho_every!r}")
    dim = state_map(model).dim
    qr.check_dim(dim)
    _check(qr.k, dim, steps, window, transient_forward, transient_backward, snapshots)


@register(
    "analysis",
    "clv",
    "covariant Lyapunov vectors (Ginelli): local growth rates, hyperbolicity and read-out angles",
    figure=clv_figure,
    summary=clv_summary,
    outputs=(
        *Output.each("growth qr_growth", "field", ("time", "vector")),
        Output("readout_angle", "field", ("time", "vector"), optional=True),
        *Output.each("clv_exponent qr_exponent clv_exponent_se qr_exponent_se growth_sd", "real", ("vector",)),
        Output("angle_rest", "field", ("time",)), Output("angle_pairs", "field", ("time", "pair")),
        *Output.each("min_angle_rest median_angle_rest"), Output("min_angle_parts", "real", ("part",)),
        *Output.each("clv gram_schmidt", "field", ("snapshot", "state", "vector")),
    ),
    check=check_clv,
)
def clv_analysis(
    model,
    *,
    qr: QRSettings = CLV_QR,
    steps: Count = 2000,
    window: int = 500,
    transient_forward: int = 1000,
    transient_backward: int = 1000,
    input: Protocol = Autonomous(),
    snapshots: int = 20,
    seed: int = 0,
    x64: bool = False,
) -> xr.Dataset:
    r"""The $k$ leading covariant Lyapunov vectors of a model's full state map over `steps` steps.

    $k$ is `qr.k` ([`CLV_QR`][]). The state map runs from the model's initial state under the
    `input` protocol's inputs (autonomous by default, a constant drive $\xi$, a task's inputs or
    noise, streams seeded by `seed`; [`dynlab.analyses.protocol`][]) for `transient_forward` +
    `steps` + `transient_backward` steps; Ginelli's method
    (`dynlab.analyses.clv.clv_core`) gives the CLVs over the `steps` in the middle, holding at
    most `window` frames at a time. The initial frame is Gaussian, drawn from `seed`.

    **Returns** an `xr.Dataset` with dims `time` (steps of the stretch), `vector` (CLV index $i$,
    1-based), `pair` ($j = 2..k$), `snapshot`, `state`:

    - `growth` (`time`, `vector`): local growth rates $\gamma_i(t)$ of the CLVs; `qr_growth`:
      $\ln (R_{t+1})_{ii}$ of the QR method along the same run;
    - `clv_exponent`, `qr_exponent` (`vector`): their time means (the Lyapunov exponents, two
      ways) with batch-means standard errors `clv_exponent_se`, `qr_exponent_se`
      (`dynlab.statistics.batch_means`); `growth_sd` (`vector`): the standard deviation of
      $\gamma_i(t)$ over time (the spread of the local rates, not an error bar);
    - `angle_rest` (`time`): the angle between $v_1$ and the span of $v_2..v_k$ (hyperbolicity);
      `angle_pairs` (`time`, `pair`): between $v_1$ and $v_j$; `min_angle_rest`,
      `median_angle_rest`: over the stretch; `min_angle_parts` (`part`): the smallest angle in each
      of [`ANGLE_PARTS`][] consecutive parts, whose spread says how much the stretch's minimum
      (a tail value) would move in another stretch;
    - `readout_angle` (`time`, `vector`): between $v_i$ and the read-out subspace, when the
      model has one (attr `readout` says what it is, or why there is none; `readout_dim` $m$ its
      dimension and `readout_random_angle` $\arccos\sqrt{m/N}$, the typical angle of a random
      direction, for comparison);
    - `clv`, `gram_schmidt` (`snapshot`, `state`, `vector`): $V_t$ and $Q_t$ at `snapshots`
      evenly spaced steps, with `snapshot_time`;
    - attrs `k`, `steps`, `window`, `transient_forward`, `transient_backward`, `protocol`,
      `drive`, `state_dim`, `x64`, `diverged`, `readout`.

    Angles are in radians, growth rates per step (natural log).

    Args:
        qr: QR settings k=VECTORS,reortho_every=1 (k: the CLVs computed, 1 .. state dim, default 8;
            reortho_every must be 1: Ginelli's backward pass needs every step's R).
        steps: steps of the stretch whose CLVs are computed.
        window: the most frames held in memory at a time (the backward pass runs window by window).
        transient_forward: steps before the stretch, for the Gram-Schmidt frame to converge.
        transient_backward: steps after the stretch, for the backward pass to converge.
        input: input protocol: autonomous (default), drive=XI, task=NAME[,drive=XI] or
            noise=STD[,seed=S].
        snapshots: steps at which the CLVs and the Gram-Schmidt vectors are kept, evenly spaced.
        seed: seed of the input streams and the initial frame.
        x64: compute in float64.
    """
    from dynlab.analyses.state_map import state_map

    check_clv(model, qr=qr, steps=steps, window=window, transient_forward=transient_forward,
              transient_backward=transient_backward, snapshots=snapshots)
    smap = state_map(model)
    k = qr.k
    k_in, k_frame = jax.random.split(jax.random.key(seed))
    total = transient_forward + steps + transient_backward
    inputs = input.inputs(model, total, k_in)
    readout, readout_text = readout_matrix(model, smap)
    x64 = x64 or jax.config.jax_enable_x64  # a model loaded under x64: work in float64
    dtype = jnp.float64 if x64 else jnp.float32
    with jax.enable_x64(x64):
        cast = lambda a: a.astype(dtype) if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating) else a  # noqa: E731
        step = jax.tree.map(cast, smap.step)
        result = clv_core(step, jnp.asarray(smap.h0, dtype), jax.tree.map(lambda a: jnp.asarray(a, dtype), inputs),
                          k, steps=steps, window=window, transient_forward=transient_forward,
                          transient_backward=transient_backward, readout=readout, snapshots=snapshots, key=k_frame)
    if result.diverged:
        import warnings

        warnings.warn("clv: the state or a growth rate became non-finite (the trajectory diverged); "
                      "the results hold NaN or inf", RuntimeWarning, stacklevel=2)
    ds = clv_dataset(result, labels=smap.labels)
    config = {}
    if readout is not None:
        ds["readout_angle"] = (("time", "vector"), result.readout_angle,
                               {"units": "rad", "long_name": "angle between CLV i and the read-out subspace"})
        m = int(np.linalg.matrix_rank(readout))
        # a direction drawn uniformly at random has E[cos^2] = m / N with an m-dim subspace of R^N
        config = {"readout_dim": m, "readout_random_angle": float(np.arccos(np.sqrt(m / smap.dim)))}
    return stamp(ds, analysis="clv", seed=seed, config={
        "k": k, "steps": steps, "window": window, "transient_forward": transient_forward,
        "transient_backward": transient_backward, "protocol": input.name, "drive": input.drive_attr, "state_dim": smap.dim, "x64": x64,
        "diverged": result.diverged, "readout": readout_text, **config,
    })


def _standard_error(series: np.ndarray) -> np.ndarray:
    """Batch-means standard error of the time mean of each column (NaN where it cannot be had)."""
    try:
        with np.errstate(invalid="ignore"):
            return batch_means(series, axis=0).se
    except ConfigError:  # fewer than 2 steps
        return np.full(series.shape[1], np.nan)


ANGLE_PARTS = 10
r"""The stretch is cut into this many consecutive parts for `min_angle_parts`. The smallest angle over a
stretch is a tail value: on one attractor it varied from $0.0002°$ to $0.8°$ between stretches (issue 38),
so it is reported with its spread over the parts, never alone."""


def _part_minima(angle: np.ndarray) -> np.ndarray:
    """The smallest finite angle in each of [`ANGLE_PARTS`][] consecutive parts (fewer for shorter stretches)."""
    parts = np.array_split(np.asarray(angle, float), min(ANGLE_PARTS, max(1, angle.size)))
    with np.errstate(invalid="ignore"):
        return np.array([p[np.isfinite(p)].min() if np.isfinite(p).any() else np.nan for p in parts])


def clv_dataset(result, labels=None) -> xr.Dataset:
    """A [`CLVResult`][dynlab.analyses.clv.CLVResult] as a labelled dataset (without the read-out angles)."""
    steps, k = result.growth.shape
    n = result.clv.shape[1] if result.clv.ndim == 3 else 0
    per_step = {"units": "1/step"}
    with np.errstate(invalid="ignore"):
        angle = result.angle_rest
        finite = angle[np.isfinite(angle)]
    data_vars = {
        "growth": (("time", "vector"), result.growth, {**per_step, "long_name": "local growth rate of CLV i, ln|J_t v_i(t)|"}),
        "qr_growth": (("time", "vector"), result.qr_growth, {**per_step, "long_name": "local growth ln R_ii of the QR method"}),
        "clv_exponent": ("vector", result.growth.mean(axis=0), {**per_step, "long_name": "time mean of the CLV growth rates"}),
        "qr_exponent": ("vector", result.qr_growth.mean(axis=0), {**per_step, "long_name": "Lyapunov exponent (QR method, same run)"}),
        "clv_exponent_se": ("vector", _standard_error(result.growth),
                            {**per_step, "long_name": "batch-means standard error of the CLV mean growth rate"}),
        "qr_exponent_se": ("vector", _standard_error(result.qr_growth),
                           {**per_step, "long_name": "batch-means standard error of the QR exponent"}),
        "growth_sd": ("vector", result.growth.std(axis=0), {**per_step, "long_name": "sd over time of the CLV growth rate"}),
        "angle_rest": ("time", angle, {"units": "rad", "long_name": "angle between CLV 1 and the span of CLVs 2..k"}),
        "angle_pairs": (("time", "pair"), result.angle_pairs, {"units": "rad", "long_name": "angle between CLV 1 and CLV j"}),
        "min_angle_rest": ((), float(finite.min()) if finite.size else np.nan,
                           {"units": "rad", "long_name": "smallest angle between CLV 1 and the span of the rest"}),
        "median_angle_rest": ((), float(np.median(finite)) if finite.size else np.nan,
                              {"units": "rad", "long_name": "median angle between CLV 1 and the span of the rest"}),
        "min_angle_parts": ("part", _part_minima(angle), {
            "units": "rad", "long_name": f"smallest angle between CLV 1 and the span of the rest in each of "
                                         f"{ANGLE_PARTS} consecutive parts of the stretch (NaN: none finite)"}),
        "clv": (("snapshot", "state", "vector"), result.clv, {"long_name": "covariant Lyapunov vectors (unit norm)"}),
        "gram_schmidt": (("snapshot", "state", "vector"), result.gram_schmidt,
                         {"long_name": "Gram-Schmidt vectors Q_t of the QR method"}),
    }
    coords = {
        "time": ("time", np.arange(steps), {"units": "steps", "long_name": "step of the stretch (after the forward transient)"}),
        "vector": ("vector", np.arange(1, k + 1), {"long_name": "CLV index i (by decreasing exponent)"}),
        "pair": ("pair", np.arange(2, k + 1), {"long_name": "CLV j paired with CLV 1"}),
        "part": ("part", np.arange(1, min(ANGLE_PARTS, max(1, steps)) + 1),
                 {"long_name": "consecutive part of the stretch (for min_angle_parts)"}),
        "snapshot_time": ("snapshot", result.snapshot_times, {"units": "steps", "long_name": "step of the snapshot"}),
        "state": ("state", np.arange(n), {"long_name": "state component"}),
    }
    if labels is not None:
        coords["state_label"] = ("state", np.asarray(labels, dtype=str), {"long_name": "state component (layer.name)"})
    return xr.Dataset(data_vars, coords=coords)
