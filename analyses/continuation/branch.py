r"""Pseudo-arclength continuation (Keller 1977) of a curve $R(x) = 0$, and of branches of fixed points.

A branch of fixed points of $h \mapsto F(h, p)$ is a curve in $x = (h, p) \in \mathbb{R}^{N+1}$,
the zero set of $G(h, p) = F(h, p) - h$. Parametrised by its arclength $s$ instead of by $p$, the
curve stays a graph through folds, where it turns back in $p$. From a point $x_i$ with unit tangent
$t_i$ (the kernel of $\partial G/\partial x$, see [`tangent`][dynlab.analyses.continuation.system.tangent]):

- **predictor** (the tangent): $x^{(0)} = x_i + \Delta s\; t_i$;
- **corrector** (Newton, [`corrector`][dynlab.analyses.continuation.system.corrector]) on

  $$G(x) = 0, \qquad t_i^\top (x - x^{(0)}) = 0,$$

  whose Jacobian, the bordered matrix $\begin{pmatrix} G_x \\ t_i^\top \end{pmatrix}$, is
  nonsingular at folds;
- **new tangent**: $t_{i+1}$ solves $G_x t = 0$, $t_i^\top t = 1$, normalised (so it keeps the
  direction of travel);
- **adaptive step**: a step whose corrector does not converge in `newton_max_iter` iterations,
  or whose tangent turns by more than [`MAX_TURN`][] radians, is halved and retried (down to
  `ds_min`, where the branch ends); a step corrected in at most [`EASY_ITERATIONS`][] iterations
  lets the next grow by 1.5x, up to `ds_max`.

A branch ends where $p$ leaves its span (the last point is then put on the boundary, by Newton at
fixed $p$), after `max_points` points, where the corrector fails at `ds_min`, or where it closes
on itself (an isola). It is followed both ways from its start.

Everything is float64: [`continue_branch`][dynlab.analyses.continuation.trace.continue_branch] (in
[`trace`][dynlab.analyses.continuation.trace], beside the whole diagram) runs inside `jax.enable_x64(True)` itself, so a
caller's map may close over float32 arrays (they are promoted).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from jaxtyping import Array, Float

from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.continuation.system import FixedPoints, Residual, correct, unit_tangent

__all__ = ["EASY_ITERATIONS", "MAX_TURN", "Curve", "correct_at", "follow", "follow_both_ways", "start"]

Map = Callable[[Float[Array, " n"], Float[Array, ""]], Float[Array, " n"]]

EASY_ITERATIONS = 3
"""A step corrected in at most this many Newton iterations lets the next step grow."""

MAX_TURN = 0.5
"""The largest angle (radians) between consecutive tangents: a sharper turn means the step jumped
(to another branch near a branch point, or across a tight fold), so it is halved and retried."""


@dataclasses.dataclass(frozen=True)
class Curve:
    """A followed curve: points `x` `[n, M+1]` and their unit tangents `t`, in order of arclength."""

    x: np.ndarray
    t: np.ndarray
    closed: bool = False


def follow(R: Residual, x0: np.ndarray, t0: np.ndarray, span: tuple[float, float], settings: ContinuationSettings,
           dense: bool, aux=None, update_aux: Callable | None = None) -> tuple[Curve, object]:
    """Follow $R(x) = 0$ from $x_0$ along $t_0$ until $\\lambda = x[-1]$ leaves `span` (see the module).

    `update_aux(x, aux)`, if given, refreshes the residual's auxiliary values after each accepted
    point (the bordering vectors of a fold curve). Returns the curve and the last `aux`.
    """
    lo, hi = span
    xs, ts = [x0], [t0]
    x, t, ds = x0, t0, float(settings.ds)
    closed = False
    while len(xs) < settings.max_points:
        x_new, ok, iterations = correct(R, aux, x + ds * t, t, settings, dense)
        if ok:
            t_new, ok = unit_tangent(R, aux, x_new, t, settings, dense)
            ok = ok and float(t_new @ t) > np.cos(MAX_TURN)
        if not ok:
            ds *= 0.5
            if ds < settings.ds_min:
                break
            continue
        lam = x_new[-1]
        if lam < lo or lam > hi:  # put the last point on the boundary, at fixed lambda
            bound = lo if lam < lo else hi
            if x[-1] == bound:  # the start was on the boundary already: nothing to add
                break
            frac = (bound - x[-1]) / (lam - x[-1])
            row = np.zeros_like(x)
            row[-1] = 1.0
            x_end, ok, _ = correct(R, aux, x + frac * (x_new - x), row, settings, dense)
            if ok:
                t_end, ok = unit_tangent(R, aux, x_end, t, settings, dense)
            if ok:
                xs.append(x_end)
                ts.append(t_end)
            break
        xs.append(x_new)
        ts.append(t_new)
        if len(xs) > 3 and np.linalg.norm(x_new - x0) < ds and float(t_new @ t0) > 0:
            closed = True  # back at the start, travelling the same way: an isola, closed
            break
        x, t = x_new, t_new
        if update_aux is not None:
            aux = update_aux(x, aux)
        if iterations <= EASY_ITERATIONS:
            ds = min(ds * 1.5, settings.ds_max)
    return Curve(np.asarray(xs), np.asarray(ts), closed), aux


def start(R: Residual, x_guess: np.ndarray, row: np.ndarray, settings: ContinuationSettings, dense: bool,
          aux=None) -> tuple[np.ndarray, np.ndarray] | None:
    """Correct a starting guess on the hyperplane $r^\\top(x - x_{guess}) = 0$ and find its tangent
    (oriented along $r$ where $r$ is not normal to the curve, else along $+\\lambda$). None if either fails."""
    x, ok, _ = correct(R, aux, x_guess, row, settings, dense)
    if not ok:
        return None
    t, ok = unit_tangent(R, aux, x, row, settings, dense)
    if not ok:  # r normal to the curve (a seed at a fold, with r = e_lambda): any other row
        other = np.random.default_rng(0).standard_normal(x.shape)
        t, ok = unit_tangent(R, aux, x, other / np.linalg.norm(other), settings, dense)
        if not ok:
            return None
        t = t if t[-1] >= 0 else -t
    return x, t


def correct_at(F, hs: np.ndarray, p: float, settings: ContinuationSettings) -> np.ndarray:
    r"""Guesses `hs` `[B, N]` of fixed points of $F(\cdot, p)$ corrected at that $p$ (Newton's method
    on $F(h, p) - h$: the corrector with $r = e_p$, one guess at a time, the corrector that the
    branches compile anyway): the points $x = (h^*, p)$ `[K, N+1]` of those that converge."""
    hs = np.atleast_2d(np.asarray(hs, np.float64))
    xs = np.concatenate([hs, np.full((len(hs), 1), float(p))], axis=1)
    row = np.zeros(xs.shape[1])
    row[-1] = 1.0
    dense = xs.shape[1] - 1 <= settings.dense_max
    return np.asarray([x for x, ok, _ in (correct(FixedPoints(F), None, x, row, settings, dense) for x in xs) if ok]).reshape(-1, xs.shape[1])


def follow_both_ways(R: Residual, x0: np.ndarray, t0: np.ndarray, span, settings, dense: bool, aux=None,
                     update_aux=None) -> Curve:
    """Follow the curve through $x_0$ along $+t_0$ and $-t_0$; one curve, ordered from the $-t_0$ end."""
    forward, _ = follow(R, x0, t0, span, settings, dense, aux, update_aux)
    if forward.closed:
        return forward
    backward, _ = follow(R, x0, -t0, span, settings, dense, aux, update_aux)
    return Curve(np.concatenate([backward.x[::-1], forward.x[1:]]),
                 np.concatenate([-backward.t[::-1], forward.t[1:]]))
