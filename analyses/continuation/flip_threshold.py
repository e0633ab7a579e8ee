r"""The smallest sustained input that flips a held bit, by direct simulation: the analysis ``flip-threshold``.

A network trained on the N-bit flip-flop ([`dynlab.tasks.cognitive.flipflop`][]) holds each bit
in a stable state, one near each corner of the output cube. How large a *sustained* input on one
input channel does it take to flip a bit? Continuation answers it from the state map alone: along
the path $x(p) = p\,e_c$ (input channel $c$) the stable point holding the bit ends at a **fold**
$p^*$, where it merges with a saddle (a real multiplier of $\partial_h F$ crosses $+1$), and beyond
$|p^*|$ no state holding the bit remains ([`dynlab.analyses.continuation`][]). This module measures
the same threshold by running the network, so that the two can be compared (the built-in study
``flipflop-bifurcations`` claims they agree within 5%).

**Protocol** ([`flip_thresholds`][] on any map). For every corner $s \in \{-1, +1\}^D$ of the
$D$ input channels:

1. **Hold the bits.** Pulse $x_0 = s$ (the task's pulse), then zero input for `settle` steps: the
   state $h_s$ the task leaves the network in, holding the bits $\operatorname{sign} y_j(h_s)$;
   $\sigma_s = \operatorname{sign} y_c(h_s)$ is the bit on read-out channel $c$.
2. **Push.** Against that bit: $x = -\sigma_s\, u\, e_c$, held for `hold` steps, then zero input
   for `release` steps. **A bit is flipped** when some read-out $y_j$ has the opposite of its held
   sign at the end of the hold *and* at the end of the release: it changed and stays. The push
   on channel $c$ need not flip bit $c$ first: where the corner's state is lost to a neighbouring
   corner with another bit changed, bit $c$ flips only at a larger input, measured as well
   (`flip_input_own`).
3. **Threshold.** $u_\text{flip} = \min\{u \in (0, u_\max] : \text{flipped}(u)\}$: the first of
   `grid` evenly spaced amplitudes that flips, then bisection between it and the amplitude before
   it to `tol`. It is reported as the value of the path's parameter, $p_\text{flip} = -\sigma_s
   u_\text{flip}$ (the sign says which way the input pushes), NaN when no $u \le u_\max$ flips.

**Why the two should agree, and where they may not.** For $|p| < |p^*|$ the stable point holding
the bit exists; if $h_s$ lies in its basin, a sustained input of that size never flips the bit.
Just above $|p^*|$ the state drifts through the fold's ghost: in the saddle-node normal form
$z \mapsto z + \mu + z^2$ the passage takes $T \approx \pi/\sqrt{\mu}$ steps, so a hold of $T$ steps
flips once $u - |p^*| \gtrsim \pi^2/(c\,T^2)$ (with $c$ the map's curvature factor): $u_\text{flip}
\to |p^*|$ from above as `hold` grows. A *step* input, though, may throw $h_s$ out of the shifted
point's basin before the fold ($u_\text{flip} < |p^*|$): whether it does is what the comparison
measures, not something the state map's branch can say.

With `fold` on (the default), every corner's fold is computed too: the branch of fixed points of
$h \mapsto F(h, -\sigma_s a\, e_c)$ through $h_s$ at $a = 0$, continued in $a \in [0, u_\max]$
with [`continue_branch`][dynlab.analyses.continuation.continue_branch]; its first fold is
$a^*$ and $p^* = -\sigma_s a^*$: where the corner's state is lost, whichever bit goes. The relative
error is $(u_\text{flip} - a^*)/a^*$, with $u_\text{flip}$ the threshold of any bit.
"""

from __future__ import annotations

import itertools
import math
from typing import Annotated

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax.flatten_util import ravel_pytree

from dynlab.config import Count, NonNegative, Range
from dynlab.errors import ConfigError
from dynlab.figures import subplots
from dynlab.outputs import Output
from dynlab.provenance import stamp
from dynlab.registry import register

__all__ = ["MAX_CHANNELS", "check_flip_threshold", "corner_states", "first_fold", "flip_threshold_analysis",
           "flip_threshold_figure", "flip_threshold_summary", "flip_thresholds"]

MAX_CHANNELS = 10
"""At most this many input channels: their $2^D$ corners (1,024) are each simulated."""


@eqx.filter_jit
def _flipped(step, starts, directions, signs, amplitudes, hold: int, release: int):
    """Does the push of each amplitude flip each start's read-out for good? ``amplitudes`` ``[..., K]``
    (one per start, any leading dims) -> bool of the same shape (module docstring, step 2)."""

    def one(h, d, sign, u):
        h, ys = jax.lax.scan(lambda h, _: step(h, u * d), h, None, length=hold)
        y_hold = ys[-1]
        if release:
            h, ys = jax.lax.scan(lambda h, _: step(h, jnp.zeros_like(d)), h, None, length=release)
        return jnp.any((jnp.sign(y_hold) == -sign) & (jnp.sign(ys[-1]) == -sign))

    run = lambda a: jax.vmap(one)(starts, directions, signs, a)
    for _ in range(amplitudes.ndim - 1):
        run = jax.vmap(run)
    return run(amplitudes)


def flip_thresholds(step, starts, directions, signs, *, hold: int, release: int, u_max: float, grid: int = 100,
                    tol: float = 1e-6) -> np.ndarray:
    r"""The smallest amplitude $u \in (0, u_\max]$ of a sustained input $u\,d_k$ that flips the sign of
    a read-out, from each start, by simulation (module docstring, steps 2 and 3).

    Args:
        step: ``step(h, x) -> (h', y)``: the map at input ``x`` and the watched read-outs ``y``
            ``[M]`` of the new state (JAX-traceable).
        starts: ``[K, N]`` states to start from.
        directions: ``[K, D]`` the input direction $d_k$ of each start (held for ``hold`` steps).
        signs: ``[K, M]`` the read-outs' signs $\sigma_{kj}$ at each start; a flip is a read-out
            $j$ with the sign $-\sigma_{kj}$ at the end of the hold and at the end of the
            ``release`` steps at zero input after it (any of the $M$).
        hold, release: steps of the push and of the zero input after it.
        u_max: the largest amplitude tried.
        grid: evenly spaced amplitudes $u_\max\, i/\text{grid}$, $i = 1..\text{grid}$, tried first;
            the smallest that flips is refined by bisection against the one before it.
        tol: the bisection stops when the bracket is at most this wide (the returned value is its
            upper end: an amplitude that flips).

    **Returns:** ``[K]`` float64 amplitudes; NaN where no amplitude of the grid flips.
    """
    starts, directions = jnp.asarray(starts), jnp.asarray(directions)
    signs = jnp.asarray(signs, starts.dtype).reshape(starts.shape[0], -1)

    def flipped(amplitudes):
        return np.asarray(_flipped(step, starts, directions, signs, jnp.asarray(amplitudes, starts.dtype), hold, release))

    levels = u_max * np.arange(1, grid + 1) / grid
    on_grid = flipped(np.repeat(levels[:, None], starts.shape[0], axis=1))
    found = on_grid.any(axis=0)
    first = np.argmax(on_grid, axis=0)
    hi = np.where(found, levels[first], np.nan)
    lo = np.where(found, np.where(first > 0, levels[np.maximum(first - 1, 0)], 0.0), np.nan)
    for _ in range(max(0, math.ceil(math.log2((u_max / grid) / tol)))):
        mid = np.where(found, 0.5 * (lo + hi), 0.0)
        flips = flipped(mid)
        hi, lo = np.where(flips, mid, hi), np.where(flips, lo, mid)
    return np.where(found, hi, np.nan)


def corner_states(model, *, settle: int, pulse: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""The states the flip-flop task leaves ``model`` in, one per corner $s \in \{-1, +1\}^D$ of its
    $D$ input channels: the pulse $x_0 = $ ``pulse`` $\cdot s$ from the initial state, then
    ``settle`` steps of zero input.

    **Returns:** ``(corners [2^D, D] of ±1, states [2^D, N], read-outs [2^D, output_size])``, the
    corners in binary order (``-1`` before ``+1``, the first channel slowest).
    """
    d = model.input_size
    corners = np.array(list(itertools.product((-1.0, 1.0), repeat=d)))
    h0, unravel = ravel_pytree(model.init_state())

    def settle_from(s):
        xs = jnp.concatenate([pulse * s[None].astype(h0.dtype), jnp.zeros((settle, d), h0.dtype)])

        def body(h, x):
            state, y = model.step(unravel(h), x)
            return ravel_pytree(state)[0], y

        h, ys = jax.lax.scan(body, h0, xs)
        return h, ys[-1]

    states, ys = eqx.filter_jit(jax.vmap(settle_from))(jnp.asarray(corners))
    return corners, np.asarray(states, np.float64), np.asarray(ys, np.float64)


def first_fold(fmap, h0, u_max: float) -> float:
    r"""$a^*$: the first fold met on the branch of fixed points of ``fmap(h, a)`` through ``h0`` at
    $a = 0$, continued in $a \in [0, u_\max]$
    ([`continue_branch`][dynlab.analyses.continuation.continue_branch]); NaN when the branch has no
    fold there, or when ``h0`` is not near a fixed point (the corrector does not converge). "First": the
    fold nearest the start along the branch, on its side $a > 0$."""
    from dynlab.analyses.continuation import ContinuationSettings, continue_branch

    try:
        branch, special = continue_branch(fmap, jnp.asarray(h0), 0.0, (0.0, float(u_max)), ContinuationSettings())
    except ValueError:  # h0 is no fixed point (a corner still moving after `settle` steps): no branch to follow
        return math.nan
    folds = [s for s in special if s.kind == "fold" and s.p > 0]
    if not folds:
        return math.nan
    h = np.asarray(branch.h)
    start = int(np.argmin(np.abs(np.asarray(branch.p)) + np.linalg.norm(h - np.asarray(h0)[None], axis=1)))
    return float(min(folds, key=lambda s: abs(s.index + 0.5 - start)).p)


class _Watched(eqx.Module):
    """``(h, x) -> (h', y[channels])``: a model's step on its flat state, with the read-outs
    ``channels`` of the new state. A Module, not a closure: compiled code sees the weights as
    arguments, so corners and models of one structure share one compilation."""

    model: eqx.Module
    channels: tuple[int, ...] = eqx.field(static=True)

    def __call__(self, h, x):
        unravel = ravel_pytree(self.model.init_state())[1]
        state, y = self.model.step(unravel(h), x)
        return ravel_pytree(state)[0], y[jnp.asarray(self.channels)]


class _Pushed(eqx.Module):
    r"""$(h, a) \mapsto F(h, a\,d)$: the state map along the push's direction $d$, for continuation."""

    watched: _Watched
    direction: jax.Array

    def __call__(self, h, a):
        return self.watched(h, a * self.direction)[0]


def check_flip_threshold(model, *, channel: int, **_) -> None:
    """The channel must be one of the model's inputs and read-outs, and its corners few enough to
    simulate; one ConfigError line otherwise."""
    d, out = model.input_size, model.output_size
    if channel >= min(d, out):
        raise ConfigError(f"channel = {channel} is not an input and read-out channel of this model "
                          f"({d} inputs, {out} read-outs); use 0 <= channel <= {min(d, out) - 1}")
    if d > MAX_CHANNELS:
        raise ConfigError(f"flip-threshold simulates every corner of the input channels (2^{d} here); "
                          f"it takes models of at most {MAX_CHANNELS} inputs")


def flip_threshold_figure(ds: xr.Dataset):
    """The simulated flip threshold against the fold, one point per corner, with the diagonal and
    a ±5% band; without folds, the threshold of every corner."""
    fig, ax = subplots(figsize=(5.2, 4.4))
    flip = np.abs(ds["flip_input"].values)
    labels = [_corner_label(b) for b in ds["corner_bits"].values]
    if "fold_input" in ds:
        fold = np.abs(ds["fold_input"].values)
        both = np.isfinite(fold) & np.isfinite(flip)
        top = 1.1 * float(np.nanmax(np.concatenate([fold[both], flip[both], [1e-3]])))
        line = np.array([0.0, top])
        ax.fill_between(line, 0.95 * line, 1.05 * line, color="0.85", label="within 5%")
        ax.plot(line, line, color="0.4", lw=0.8, label="flip = fold")
        ax.plot(fold[both], flip[both], "o", ms=5, label="corners")
        for x, y, text in zip(fold[both], flip[both], np.asarray(labels)[both]):
            ax.annotate(text, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
        ax.set(xlim=(0, top), ylim=(0, top), xlabel="fold |p*| (continuation)", ylabel="flip threshold (simulation)")
        ax.legend(fontsize=7, loc="upper left")
    else:
        ax.bar(np.arange(flip.size), np.nan_to_num(flip), tick_label=labels)
        ax.set(ylabel="flip threshold (simulation)", xlabel="corner")
        ax.tick_params(axis="x", labelsize=6, rotation=90)
    ax.set_title(f"input channel {ds.attrs.get('channel', 0)}: hold {ds.attrs.get('hold', '?')} steps", fontsize=9)
    fig.tight_layout()
    return fig


def _corner_label(bits) -> str:
    return "(" + ",".join("+" if b > 0 else "-" for b in np.asarray(bits)) + ")"


def flip_threshold_summary(ds: xr.Dataset) -> str:
    """What ``dynlab analyze flip-threshold`` prints: one line per corner, then the largest error."""
    c = ds.attrs.get("channel", 0)
    lines = []
    for i in range(ds.sizes["corner"]):
        bits = _corner_label(ds["corner_bits"].values[i])
        held = "held" if ds["held"].values[i] else "not held"
        flip = float(ds["flip_input"].values[i])
        own = float(ds["flip_input_own"].values[i])
        text = (f"corner {bits} ({held}): no flip up to |u| = {ds.attrs.get('u_max')}" if not np.isfinite(flip)
                else f"corner {bits} ({held}): a bit flips at u = {flip:+.5f} on channel {c}")
        if np.isfinite(flip) and not np.isclose(own, flip, rtol=1e-3):
            text += f" (bit {c} at {own:+.5f})" if np.isfinite(own) else f" (bit {c} not up to |u| = {ds.attrs.get('u_max')})"

        if "fold_input" in ds:
            fold, err = float(ds["fold_input"].values[i]), float(ds["fold_relative_error"].values[i])
            text += (f"; fold at {fold:+.5f} ({err:+.2%})" if np.isfinite(fold) else "; no fold found")
        lines.append(text)
    if "fold_relative_error_max" in ds:
        lines.append(f"largest |flip - fold| / |fold| over corners: {float(ds['fold_relative_error_max']):.3%}")
    return "\n".join(lines)


@register(
    "analysis",
    "flip-threshold",
    "smallest sustained input on one channel that flips a held bit (simulation, bisection), against the fold",
    figure=flip_threshold_figure,
    summary=flip_threshold_summary,
    headline=(("flip_amplitude_min", "smallest flipping |u|"),),
    outputs=(
        Output("corner_bits", "field", ("corner", "bit")),
        *Output.each("held held_sign", "field", ("corner",)),
        Output("flip_input", "real", ("corner",), description="the input on the channel that flips a bit of the corner"),
        Output("flip_input_own", "real", ("corner",), description="the input on the channel that flips the channel's own bit"),
        Output("fold_input", "real", ("corner",), optional=True, description="the fold of the corner's branch"),
        Output("fold_relative_error", "real", ("corner",), optional=True),
        Output("fold_relative_error_max", "real", bounds=(0.0, math.inf), optional=True,
               description="the largest |flip - fold| / |fold| over the corners"),
        Output("flip_amplitude_min", "real", bounds=(0.0, math.inf)),
        *Output.each("n_corners_held n_flipped", "count"),
    ),
    check=check_flip_threshold,
)
def flip_threshold_analysis(
    model,
    *,
    channel: Annotated[int, Range(minimum=0)] = 0,
    hold: Count = 200,
    release: NonNegative = 100,
    settle: Count = 200,
    pulse: Annotated[float, Range(above=0)] = 1.0,
    u_max: Annotated[float, Range(above=0)] = 1.0,
    grid: Count = 100,
    tol: Annotated[float, Range(above=0)] = 1e-6,
    fold: bool = True,
) -> xr.Dataset:
    r"""The smallest sustained input on one input channel that flips each held bit, by simulation,
    and the fold of continuation it should match (module docstring).

    Every corner of the input channels is held (a pulse, then `settle` steps of zero input), then
    pushed by $x = -\sigma u\, e_c$ for `hold` steps and released for `release` steps; bisection
    on $u$ finds the smallest that flips a read-out's sign for good, and the smallest that flips
    read-out $c$'s
    ([`flip_thresholds`][dynlab.analyses.continuation.flip_threshold.flip_thresholds]). With `fold`, each
    corner's fold $p^*$ along the same path comes from continuation
    ([`first_fold`][dynlab.analyses.continuation.flip_threshold.first_fold]). Float64 throughout.

    Args:
        channel: the input channel pushed and the read-out channel watched (the flip-flop's bit).
        hold: steps the constant input is held (longer holds approach the fold from above).
        release: steps of zero input after the hold; the flipped sign must last through them.
        settle: steps of zero input after the corner's pulse before the push.
        pulse: the amplitude of the pulse that sets the corner (the task's is 1).
        u_max: the largest input amplitude tried (and the end of the continuation).
        grid: amplitudes tried evenly in (0, u_max] before bisection refines the first that flips.
        tol: the width of the final bisection bracket (input units).
        fold: also continue each corner's branch to its fold and report the relative error.

    **Returns:** a dataset over `corner` (and `bit`): `corner_bits`, `held` (1 when every read-out
    has its pulse's sign after settling), `held_sign` ($\sigma$), `flip_input` (the path's
    parameter $p = -\sigma u_\text{flip}$ at the threshold of any bit; NaN: no flip up to
    `u_max`), `flip_input_own` (the same for bit `channel` itself) and, with
    `fold`, `fold_input` ($p^*$), `fold_relative_error` $(|p_\text{flip}| - |p^*|)/|p^*|$ and its
    largest magnitude `fold_relative_error_max`; `flip_amplitude_min` (the smallest
    $|p_\text{flip}|$), `n_corners_held`, `n_flipped`.
    """
    check_flip_threshold(model, channel=channel)
    with jax.enable_x64(True):
        model64 = jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, model)
        corners, states, ys = corner_states(model64, settle=settle, pulse=pulse)
        d = model.input_size
        m = min(d, ys.shape[1])
        held_signs = np.where(ys[:, :m] >= 0, 1.0, -1.0)
        signs = held_signs[:, channel]
        held = np.all(held_signs == corners[:, :m], axis=1)
        directions = -signs[:, None] * np.eye(d)[channel][None]
        options = dict(hold=hold, release=release, u_max=u_max, grid=grid, tol=tol)
        amplitude = flip_thresholds(_Watched(model64, tuple(range(m))), states, directions, held_signs, **options)
        own = flip_thresholds(_Watched(model64, (channel,)), states, directions, signs, **options)
        flip = -signs * amplitude
        data = {
            "corner_bits": (("corner", "bit"), corners, {"long_name": "the pulse's sign on each input channel"}),
            "held": ("corner", held.astype(np.int8), {"long_name": "every read-out has its pulse's sign after settling"}),
            "held_sign": ("corner", signs, {"long_name": f"sign of read-out {channel} after settling"}),
            "flip_input": ("corner", flip, {"long_name": f"input on channel {channel} that flips a bit (any read-out; simulation)"}),
            "flip_input_own": ("corner", -signs * own, {"long_name": f"input on channel {channel} that flips bit {channel} (simulation)"}),
            "flip_amplitude_min": ((), float(np.nanmin(amplitude)) if np.isfinite(amplitude).any() else math.nan,
                                   {"long_name": "the smallest amplitude that flips a bit of a corner"}),
            "n_corners_held": ((), int(held.sum())),
            "n_flipped": ((), int(np.isfinite(amplitude).sum())),
        }
        step = _Watched(model64, (channel,))
        if fold:
            folds = np.array([first_fold(_Pushed(step, dk), h, u_max) for h, dk in zip(states, jnp.asarray(directions))])
            error = (amplitude - folds) / folds
            data["fold_input"] = ("corner", -signs * folds, {"long_name": f"fold p* of the corner's branch along channel {channel}"})
            data["fold_relative_error"] = ("corner", error, {"long_name": "(|flip| - |fold|) / |fold|"})
            data["fold_relative_error_max"] = ((), float(np.max(np.abs(error))),
                                               {"long_name": "largest |flip - fold| / |fold| over the corners (NaN: a corner without one)"})
    ds = xr.Dataset(data, coords={"corner": np.arange(corners.shape[0]), "bit": np.arange(d)})
    return stamp(ds, analysis="flip-threshold", config=dict(channel=channel, settle=settle, pulse=pulse, fold=fold, **options))
