r"""Special points along a branch: their test functions, their detection and their location.

Along a branch of fixed points of $F^k$ with multipliers $\mu_j$ (eigenvalues of
$\partial F^k/\partial h$) and unit tangent $t = (t_h, t_p)$, a bifurcation is where a test
function changes sign between two consecutive points:

| kind | what happens | detected by | located as a root of |
|---|---|---|---|
| fold | a real $\mu$ through $+1$; the branch turns back in $p$ (two branches of fixed points meet) | $t_p$ changes sign | $t_p(s)$ |
| branch point | a real $\mu$ through $+1$ without a turn: branches cross (pitchfork, transcritical) | $\det B$ changes sign | $\det B(s)$ (dense), $\mu(s) - 1$ (matrix-free) |
| flip | a real $\mu$ through $-1$: a period-2 cycle is born | the count of real $\mu < -1$ | $\mu(s) + 1$ |
| Neimark–Sacker | a complex pair through $\lvert\mu\rvert = 1$: an invariant circle is born | the count of complex $\lvert\mu\rvert > 1$ changes, and that of complex $\lvert\mu\rvert < 1$ by as much the other way (a pair that meets on the real axis and splits changes only one) | $\lvert\mu(s)\rvert - 1$ |

$B = \begin{pmatrix} G_h & G_p \\ t_h^\top & t_p \end{pmatrix}$ is the bordered Jacobian of
$G = F^k - \mathrm{id}$. Its determinant is not formed: with $G_h t_h + G_p t_p = 0$ and
$\lVert t\rVert = 1$, the Schur complement gives $\det B = \det G_h / t_p$, and
$\det G_h = \prod_j (\mu_j - 1)$ has the sign $(-1)^{N}(-1)^{n_+}$, $n_+$ the number of real
multipliers above 1 (complex pairs contribute $|\mu - 1|^2 > 0$). So
$\operatorname{sign}\det B = (-1)^{N + n_+}\operatorname{sign} t_p$: at a fold both factors flip
and $\det B$ keeps its sign; at a branch point only $n_+$ changes. (With every multiplier known,
up to `dense_max`, this is exact; above, $n_+$ counts the leading multipliers.) To locate a branch
point, $\det B$ itself is computed (dense: an LU of $B$, scaled by its value at point $i$): unlike
$\mu - 1$, it also changes sign on the new branch of a pitchfork, where the multiplier only touches
1 as the branch turns. Matrix-free, $\mu(s) - 1$ is used, which locates transversal crossings.

**Location** is in the arclength $s$ along the tangent $t_i$ from point $i$: $x(s)$ is the
corrected point on the hyperplane $t_i^\top(x - x_i - s\,t_i) = 0$ (so $x(\Delta s_i) = x_{i+1}$),
and the test function of the kind is a continuous function of $s$ with a simple root in
$[0, \Delta s_i]$. It is bracketed by the Illinois variant of regula falsi, with a bisection when
a step does not halve the bracket, until the bracket is narrower than `locate_tol`/2: since
$\lvert dp/ds\rvert \le 1$ for a unit tangent (to first order in the step), $|\Delta p| \le$
`locate_tol`. A root that the test function does not bracket, or where it is not near 0, is dropped
(a crossing of counts that is not a bifurcation: a complex pair turning real outside the circle).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from dynlab.analyses.continuation.branch import Curve
from dynlab.analyses.continuation.multipliers import REAL_TOL, leading, spectra
from dynlab.analyses.continuation.results import Branch, SpecialPoint
from dynlab.analyses.continuation.settings import ContinuationSettings
from dynlab.analyses.continuation.system import FixedPoints, bordered_logdet, correct, unit_tangent

__all__ = ["ROOT_TOL", "Located", "analyse", "bracket_root", "crossings", "locate", "test_value"]

ROOT_TOL = 1e-6
"""A located point is kept only where its test function is below this in magnitude."""

TARGET = {"fold": 1.0, "branch-point": 1.0, "flip": -1.0}
"""The real multiplier that crosses at each kind (Neimark–Sacker: a complex one on the circle)."""


@dataclasses.dataclass(frozen=True)
class Located:
    """A special point with what branch switching needs: the point `x`, its tangent `t`."""

    point: SpecialPoint
    x: np.ndarray
    t: np.ndarray


def _is_real(mu: np.ndarray) -> np.ndarray:
    return np.abs(mu.imag) <= REAL_TOL * np.maximum(1.0, np.abs(mu))


def crossing_multiplier(kind: str, mu: np.ndarray) -> complex:
    """The multiplier of the kind's crossing: the real one nearest $\\pm1$, or the complex one
    (positive imaginary part) nearest the unit circle."""
    real = _is_real(mu)
    if kind == "neimark-sacker":
        cand = mu[~real & (mu.imag > 0)]
        return complex(cand[np.argmin(np.abs(np.abs(cand) - 1))]) if len(cand) else complex(np.nan)
    cand = mu[real].real
    return complex(cand[np.argmin(np.abs(cand - TARGET[kind]))]) if len(cand) else complex(np.nan)


def test_value(kind: str, t: np.ndarray, mu: np.ndarray | None, det: tuple[float, float] | None = None,
               det_ref: float = 0.0) -> float:
    """The kind's continuous test function at a point (tangent `t`, multipliers `mu`, and for a
    branch point the bordered determinant `det` as (sign, log|det|), scaled by `exp(det_ref)`)."""
    if kind == "fold":
        return float(t[-1])
    if kind == "branch-point" and det is not None:
        return float(det[0] * np.exp(det[1] - det_ref))
    m = crossing_multiplier(kind, mu)
    if kind == "neimark-sacker":
        return abs(m) - 1.0
    return m.real - TARGET[kind]


def crossings(curve: Curve, mus: list[np.ndarray]) -> list[tuple[str, int]]:
    """Every (kind, i) whose test function changes sign between points i and i+1 (see the module)."""
    tp = np.sign(curve.t[:, -1])
    n_plus = np.array([np.sum(_is_real(m) & (m.real > 1)) for m in mus])
    n_flip = np.array([np.sum(_is_real(m) & (m.real < -1)) for m in mus])
    n_ns = np.array([np.sum(~_is_real(m) & (np.abs(m) > 1)) for m in mus])
    n_ns_in = np.array([np.sum(~_is_real(m) & (np.abs(m) < 1)) for m in mus])
    det_sign = (-1.0) ** n_plus * tp
    found = []
    for i in range(len(mus) - 1):
        if tp[i] * tp[i + 1] < 0:
            found.append(("fold", i))
        if det_sign[i] * det_sign[i + 1] < 0:
            found.append(("branch-point", i))
        if n_flip[i] != n_flip[i + 1]:
            found.append(("flip", i))
        # a complex pair that crosses the circle leaves one count for the other; one that turns into
        # two real multipliers (the pair meets on the real axis, inside or outside) changes only one
        if n_ns[i] != n_ns[i + 1] and n_ns_in[i] - n_ns_in[i + 1] == n_ns[i + 1] - n_ns[i]:
            found.append(("neimark-sacker", i))
    return found


def locate(R: FixedPoints, kind: str, curve: Curve, i: int, mu_i: np.ndarray, settings: ContinuationSettings,
           dense: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The point of `kind` between points i and i+1 of `curve` (see the module): (x, t, multipliers), or None."""
    x_i, t_i = curve.x[i], curve.t[i]

    with_det = kind == "branch-point" and dense
    with_mu = kind in ("flip", "neimark-sacker") or (kind == "branch-point" and not dense)

    def at(s):
        x, ok, _ = correct(R, None, x_i + s * t_i, t_i, settings, dense)
        if not ok:
            return None
        t, ok = unit_tangent(R, None, x, t_i, settings, dense)
        if not ok:
            return None
        det = tuple(map(float, bordered_logdet(R, x, t))) if with_det else None
        return x, t, spectra(R, x[None], settings)[0] if with_mu else None, det

    end_a = at(0.0)
    if end_a is None:
        return None
    end_a = (x_i, t_i, mu_i, end_a[3])
    ref = end_a[3][1] if with_det else 0.0

    def f(end):
        return test_value(kind, end[1], end[2], end[3], ref)

    b = float(t_i @ (curve.x[i + 1] - x_i))
    best = bracket_root(at, f, end_a, b, settings.locate_tol / 2)
    if best is None:
        return None
    x, t, mu, det = best
    mu = spectra(R, x[None], settings)[0] if mu is None else mu
    if abs(test_value(kind, t, mu, det, ref)) > ROOT_TOL and not with_det:
        return None
    return x, t, mu


def bracket_root(at, f, end_a, b: float, tol: float):
    r"""The root in $s \in [0, b]$ of $f(\mathrm{at}(s))$, by Illinois regula falsi with bisection
    safeguards, until the bracket is narrower than `tol`: the evaluation of the end nearer the root
    (`end_a` is at(0)). None where `at` fails or $f$ does not change sign."""
    a, fa = 0.0, f(end_a)
    end_b = at(b)
    if end_b is None:
        return None
    fb = f(end_b)
    if not (np.isfinite(fa) and np.isfinite(fb)) or fa * fb > 0:
        return None
    width = abs(b - a)
    for _ in range(200):
        if abs(b - a) <= tol or fb == 0:
            break
        c = (a * fb - b * fa) / (fb - fa)
        if abs(b - a) > width / 2 or not (min(a, b) < c < max(a, b)):
            c, width = 0.5 * (a + b), abs(b - a)  # regula falsi stalled: bisect
        end_c = at(c)
        for nudge in (1e-3, 1e-2, 1e-1):
            if end_c is not None:
                break
            # the bordered matrix is singular exactly at a branch point, which a secant of a
            # linear test function can hit: step a little towards the middle of the bracket
            c = c + nudge * (0.5 * (a + b) - c)
            end_c = at(c)
        if end_c is None:
            return None
        fc = f(end_c)
        if fc * fb > 0:
            b, fb, end_b = c, fc, end_c
            fa *= 0.5  # Illinois: the kept end's value halved, so the next secant moves it
        else:
            a, fa, end_a, b, fb, end_b = b, fb, end_b, c, fc, end_c
    return end_b if abs(fb) <= abs(fa) else end_a


def _brackets(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> bool:
    """Whether $x$ lies on the chord from $a$ to $b$ (within 10% of its length)."""
    chord = np.linalg.norm(b - a)
    return bool(np.linalg.norm(x - a) + np.linalg.norm(x - b) <= 1.1 * chord)


def analyse(R: FixedPoints, curve: Curve, settings: ContinuationSettings, dense: bool, index: int,
            known: tuple[SpecialPoint, ...] = ()) -> tuple[Branch, list[Located]]:
    """The [`Branch`][dynlab.analyses.continuation.results.Branch] of a followed curve of fixed
    points of $F^k$, and its located special points (numbered as branch `index`).

    A crossing between two points whose chord passes through a `known` special point is that point,
    seen from another branch, and is not located again: where a branch crosses the branch that found
    a branch point (the new branch of a pitchfork, the cycle born at a flip), the point is singular
    for the corrector on both, and its location from the first branch is the one kept.
    """
    known_x = [np.append(q.h, q.p) for q in known]
    mus = spectra(R, curve.x, settings)
    k = settings.n_multipliers
    branch = Branch(p=curve.x[:, -1].copy(), h=curve.x[:, :-1].copy(),
                    multipliers=np.stack([leading(m, k) for m in mus]),
                    n_unstable=np.array([int(np.sum(np.abs(m) > 1)) for m in mus]), period=R.period)
    located = []
    for kind, i in crossings(curve, mus):
        if any(_brackets(curve.x[i], curve.x[i + 1], x) for x in known_x):
            continue
        found = locate(R, kind, curve, i, mus[i], settings, dense)
        if found is None:
            warnings.warn(f"a {kind} between points {i} and {i + 1} of branch {index} could not be located; dropped",
                          stacklevel=2)
            continue
        x, t, mu = found
        point = SpecialPoint(kind=kind, p=float(x[-1]), h=x[:-1].copy(), multiplier=crossing_multiplier(kind, mu),
                             branch=index, index=i)
        located.append(Located(point, x, t))
    return branch, located
