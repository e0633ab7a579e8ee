r"""Smoothing a function's kinks: every ``max``/``min``/``abs`` that depends on chosen arguments, made smooth.

[`smooth`][]``(fn, mu)`` is a function transformation, like ``jax.grad``: it traces ``fn`` to a
jaxpr and evaluates it again with each kink primitive whose operands depend on the arguments
``argnums`` replaced by a smooth function within $\mu$ of it,

$$ \max{}_\mu(a, b) = \tfrac12\big(a + b + \sqrt{(a-b)^2 + 4\mu^2}\big), \qquad
   \min{}_\mu(a, b) = \tfrac12\big(a + b - \sqrt{(a-b)^2 + 4\mu^2}\big), \qquad
   |x|_\mu = \sqrt{x^2 + \mu^2}, $$

$$ \textstyle\max_\mu(x_1, \dots, x_n) = \frac{\mu}{\ln n}\,\ln \sum_i e^{x_i \ln n / \mu} , $$

(the Chen–Harker–Kanzow–Smale function, $0 < \max_\mu - \max \le \mu$, and the log-sum-exp,
$0 \le \max_\mu - \max \le \mu$; ``clamp`` is a ``max`` then a ``min``, within $2\mu$). So
``jax.nn.relu`` becomes $\tfrac12(x + \sqrt{x^2 + 4\mu^2})$ and SITH-RNN's max over τ a
log-sum-exp, with no change to the units: any plug-in's kinks are found the same way. Kinks of
the other values (``argnums`` left out; in a PC energy the weights, e.g. the ELM neuron's clamp of
its time constants) are left exact, and so are jumps (``sign``, ``floor``, a ``where`` on a
comparison of the arguments), which no smoothing of this kind reaches.

**Why.** A PC energy built from ReLUs or a max is not differentiable, and its minimum over the
activities can sit on a kink, where no gradient vanishes ([`dynlab.rules.pc_inference`][]). The
smoothed energy $\mathcal F_\mu$ is differentiable, within $O(\mu)$ of $\mathcal F$, and its
gradients are *consistent*: every limit of $\nabla \mathcal F_\mu(z_\mu)$ as $\mu \to 0$,
$z_\mu \to z$, lies in the Clarke subdifferential of $\mathcal F$ at $z$ (true of the CHKS and
log-sum-exp smoothings; Chen, *Smoothing methods for nonsmooth, nonconvex minimization*, Math.
Program. 134, 2012, Thm 1 and §3). So stationary points of $\mathcal F_\mu$ along a decreasing
$\mu$ approach Clarke-stationary points of $\mathcal F$ — what
[`dynlab.rules.pc_inference.Smoothed`][] does.

Higher-order primitives (``jit``, ``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``
(remat), ``scan``, ``while``, ``cond``) are evaluated through when they hold a kink (a custom
derivative rule or a remat policy is then dropped: the smoothed body is differentiated as it is),
and bound unchanged otherwise; any other primitive holding a kink is a [`ConfigError`][] naming it.
"""

from __future__ import annotations

import collections
import functools
import math
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
from jax.extend import core as jcore

from dynlab.errors import ConfigError

KINKS = ("max", "min", "abs", "reduce_max", "reduce_min", "clamp")
"""The primitives [`smooth`][] replaces (when their operands depend on the smoothed arguments)."""


def _max(mu, a, b):
    return 0.5 * (a + b + jnp.sqrt(jnp.square(a - b) + 4 * mu**2))


def _min(mu, a, b):
    return 0.5 * (a + b - jnp.sqrt(jnp.square(a - b) + 4 * mu**2))


def _reduce_max(mu, x, axes):
    n = math.prod(x.shape[a] for a in axes)
    if n == 1:
        return jnp.sum(x, axis=axes)
    t = mu / math.log(n)
    return t * jax.nn.logsumexp(x / t, axis=axes)


HIGHER_ORDER = ("jit", "pjit", "custom_jvp_call", "custom_vjp_call", "remat2", "scan", "while", "cond")
"""The primitives with inner jaxprs that [`smooth`][] evaluates through (``_<name>`` of its evaluator)."""

RULES: dict[str, Callable] = {
    "max": lambda mu, a, b: _max(mu, a, b),
    "min": lambda mu, a, b: _min(mu, a, b),
    "abs": lambda mu, x: jnp.sqrt(jnp.square(x) + mu**2),
    "reduce_max": lambda mu, x, axes, **_: _reduce_max(mu, x, tuple(axes)),
    "reduce_min": lambda mu, x, axes, **_: -_reduce_max(mu, -x, tuple(axes)),
    "clamp": lambda mu, lo, x, hi: _min(mu, _max(mu, x, lo), hi),
}


def _subjaxprs(params) -> list:
    found = []
    for value in params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, jcore.ClosedJaxpr):
                found.append(v.jaxpr)
            elif isinstance(v, jcore.Jaxpr):
                found.append(v)
    return found


def _holds_kink(jaxpr) -> bool:
    return any(e.primitive.name in KINKS or any(_holds_kink(j) for j in _subjaxprs(e.params)) for e in jaxpr.eqns)


def _floating(values) -> bool:
    return all(jnp.issubdtype(jnp.result_type(v), jnp.floating) for v in values)


class _Evaluator:
    """Evaluates a jaxpr, smoothing the kinks that depend on tainted inputs (``mu=None``: only counts them)."""

    def __init__(self, mu: float | None):
        self.mu = mu
        self.found = collections.Counter()

    def __call__(self, closed: jcore.ClosedJaxpr, args: Sequence, taints: Sequence[bool]) -> list:
        jaxpr = closed.jaxpr
        env, tainted = {}, set()

        def read(v):
            return v.val if isinstance(v, jcore.Literal) else env[v]

        for v, c in zip(jaxpr.constvars, closed.consts):
            env[v] = c
        for v, a, t in zip(jaxpr.invars, args, taints):
            env[v] = a
            if t:
                tainted.add(v)
        for eqn in jaxpr.eqns:
            invals = [read(v) for v in eqn.invars]
            in_taints = [not isinstance(v, jcore.Literal) and v in tainted for v in eqn.invars]
            outs = self.equation(eqn, invals, in_taints)
            if not eqn.primitive.multiple_results:
                outs = [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o
                if any(in_taints):
                    tainted.add(v)
        return [read(v) for v in jaxpr.outvars]

    def equation(self, eqn, invals, taints):
        name, params = eqn.primitive.name, eqn.params
        if any(taints) and name in KINKS and _floating(invals):
            self.found[name] += 1
            if self.mu is not None:
                return RULES[name](self.mu, *invals, **{k: v for k, v in params.items() if k == "axes"})
        elif any(taints) and any(_holds_kink(j) for j in _subjaxprs(params)):
            handler = getattr(self, "_" + name, None) if name in HIGHER_ORDER else None
            if handler is None:
                raise ConfigError(f"smoothing cannot evaluate through the {name!r} primitive, which holds a kink; "
                                  f"it evaluates through {', '.join(HIGHER_ORDER)}")
            return handler(params, invals, taints)
        return eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))

    def _jit(self, params, invals, taints):
        return self(params["jaxpr"], invals, taints)

    _pjit = _jit

    def _custom_jvp_call(self, params, invals, taints):
        return self(params["call_jaxpr"], invals, taints)

    def _custom_vjp_call(self, params, invals, taints):
        return self(params["call_jaxpr"], invals, taints)

    def _remat2(self, params, invals, taints):  # jax.checkpoint: its jaxpr has no constants
        return self(jcore.ClosedJaxpr(params["jaxpr"], ()), invals, taints)

    def _scan(self, params, invals, taints):
        nc, nk, body = params["num_consts"], params["num_carry"], params["jaxpr"]
        consts, init, xs = invals[:nc], invals[nc:nc + nk], invals[nc + nk:]
        inner = [*taints[:nc], *[True] * (len(invals) - nc)]  # the carry may become tainted on any step

        def step(carry, x):
            outs = self(body, [*consts, *carry, *x], inner)
            return outs[:nk], outs[nk:]

        carry, ys = jax.lax.scan(step, init, xs, length=params["length"], reverse=params["reverse"],
                                 unroll=params["unroll"])
        return [*carry, *ys]

    def _while(self, params, invals, taints):
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        cc, bc, init = invals[:cn], invals[cn:cn + bn], invals[cn + bn:]
        carry_taints = [True] * len(init)
        cond = lambda c: self(params["cond_jaxpr"], [*cc, *c], [*taints[:cn], *carry_taints])[0]
        body = lambda c: self(params["body_jaxpr"], [*bc, *c], [*taints[cn:cn + bn], *carry_taints])
        return jax.lax.while_loop(cond, body, init)

    def _cond(self, params, invals, taints):
        index, ops = invals[0], invals[1:]
        branches = [functools.partial(lambda b, *o: self(b, o, taints[1:]), b) for b in params["branches"]]
        return jax.lax.switch(index, branches, *ops)


def _trace(fn, args, argnums):
    argnums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    taints = [i in argnums for i, a in enumerate(args) for _ in jax.tree_util.tree_leaves(a)]
    return closed, jax.tree_util.tree_leaves(args), taints, jax.tree_util.tree_structure(out_shape)


def smooth(fn: Callable, mu: float, argnums: int | Sequence[int] = 0) -> Callable:
    r"""``fn`` with every kink that depends on the arguments ``argnums`` replaced by its $\mu$-smoothing
    (module docstring). ``mu > 0``: a number, checked here, or a JAX scalar (a width traced through
    ``lax.scan``, as [`dynlab.rules.pc_inference.Smoothed`][] runs its widths), checked where it was
    made; without kinks the result equals ``fn`` exactly."""
    if not isinstance(mu, jax.Array) and not (isinstance(mu, (int, float)) and math.isfinite(mu) and mu > 0):
        raise ValueError(f"the smoothing width must be a positive finite number, got {mu!r}")

    @functools.wraps(fn)
    def smoothed(*args):
        closed, leaves, taints, out_tree = _trace(fn, args, argnums)
        return jax.tree_util.tree_unflatten(out_tree, _Evaluator(mu)(closed, leaves, taints))

    return smoothed


def kinks(fn: Callable, *args, argnums: int | Sequence[int] = 0) -> collections.Counter:
    """How many kinks of each primitive [`smooth`][] would replace in ``fn(*args)`` (nothing is computed)."""
    evaluator = _Evaluator(None)

    def run(*args):
        closed, leaves, taints, out_tree = _trace(fn, args, argnums)
        return jax.tree_util.tree_unflatten(out_tree, evaluator(closed, leaves, taints))

    jax.eval_shape(run, *args)
    return evaluator.found
