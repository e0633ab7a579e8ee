r"""The state map of a dynlab model, as analyses see it.

A sequence model's full state is every layer's state PyTree (for the ARU: activities and
controller states). Analyses work on the flat vector $h \in \mathbb{R}^N$ of all of it and on

$$ h_{t+1} = F(h_t, u_t), \qquad u_t = (x_t, \xi_t) $$

with $x_t$ the input and $\xi_t$ the drive added to every neuron's pre-activation. What drives it
is an input protocol, a value of [`dynlab.analyses.protocol`][].
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import equinox as eqx
import jax
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, PRNGKeyArray

from dynlab.analyses.protocol import from_keywords
from dynlab.errors import ConfigError, require_positive


@dataclasses.dataclass(frozen=True)
class StateMap:
    """``step(h, u) -> h'`` on the flat state of ``model``; ``unravel`` gives back the PyTree."""

    step: Callable[[Array, tuple[Array, Array]], Array]
    h0: Array
    unravel: Callable[[Array], tuple]
    labels: tuple[str, ...]  # one per state component: "layer0.h", "layer0.g", ...

    @property
    def dim(self) -> int:
        return int(self.h0.shape[0])


class _FlatStep(eqx.Module):
    """``h, (x, xi) -> h'`` on the flat state. A Module, not a closure: compiled analyses see the
    model's weights as arguments, so models of one structure share one compilation."""

    model: eqx.Module

    def __call__(self, h, u):
        x, drive = u
        unravel = ravel_pytree(self.model.init_state())[1]
        state, _ = self.model.step(unravel(h), x, drive)
        return ravel_pytree(state)[0]


def state_map(model) -> StateMap:
    """The flat one-step state map of a [`dynlab.models.SequenceModel`][]."""
    h0, unravel = ravel_pytree(model.init_state())
    step = _FlatStep(model)

    labels = []
    for i, s in enumerate(model.init_state()):
        paths = jax.tree_util.tree_flatten_with_path(s)[0]
        for path, leaf in paths:
            name = "".join(str(p).lstrip(".") for p in path) or "h"
            labels += [f"layer{i}.{name}"] * int(leaf.size)
    return StateMap(step, h0, unravel, tuple(labels))


def protocol_inputs(
    model, steps: int, *, drive: float | None = None, task=None, key: PRNGKeyArray | None = None
) -> tuple[Array, Array]:
    """Inputs ``(x[steps, D], xi[steps])`` of the protocol the keywords name
    ([`dynlab.analyses.protocol.from_keywords`][]: a ``task``'s stream seeded by ``key``, plus
    ``drive``; else the constant ``drive``; else autonomous), for callers that take them apart."""
    return from_keywords(drive, task).inputs(model, steps, key)


def protocol_name(drive: float | None, task) -> str:
    """The protocol of [`protocol_inputs`][] in words, for a dataset's ``protocol`` attr."""
    return from_keywords(drive, task).name


def run_in(smap: StateMap, inputs: tuple[Array, Array], h0: Array | None = None) -> Array:
    """All states visited, ``[T, N]``, from ``h0`` (default: the model's initial state)."""

    def body(h, u):
        h = smap.step(h, u).astype(h.dtype)
        return h, h

    return jax.lax.scan(body, smap.h0 if h0 is None else h0, inputs)[1]


def initial_conditions(
    smap: StateMap,
    n: int,
    key: PRNGKeyArray,
    *,
    kind: str = "visited",
    inputs: tuple[Array, Array] | None = None,
    scale: float = 1.0,
    h0: Array | None = None,
    visited: Array | None = None,
) -> Array:
    """``n`` initial states ``[n, N]`` around ``h0`` (default: the model's initial state).

    * ``"visited"``: states sampled uniformly (without replacement) from the second half of a
      run-in from ``h0`` under ``inputs`` — points on or near the attractor the protocol's
      dynamics settle to (``visited``: the run-in's states ``[T, N]``, if already computed);
    * ``"random"``: ``h0`` plus $N(0, \\text{scale}^2)$ noise on every component.
    """
    require_positive("ics", n)
    start = smap.h0 if h0 is None else h0
    if kind == "random":
        return start + scale * jax.random.normal(key, (n, smap.dim), smap.h0.dtype)
    if kind != "visited":
        raise ConfigError(f"initial conditions must be 'visited' or 'random', got {kind!r}")
    if visited is None:
        if inputs is None:
            raise ConfigError("'visited' initial conditions need the run-in inputs")
        visited = run_in(smap, inputs, start)
    half = visited[visited.shape[0] // 2 :]
    if half.shape[0] < n:
        raise ConfigError(f"a run-in of {visited.shape[0]} steps cannot supply {n} distinct initial conditions")
    idx = jax.random.choice(key, half.shape[0], (n,), replace=False)
    return half[idx]


def eigenvalues_of(jacobians, *, vectors: bool = False):
    r"""The eigenvalues of each matrix of a stack `[..., N, N]` (LAPACK `geev` through
    `numpy.linalg.eigvals`, which XLA offers on the CPU only), computed with one BLAS thread.

    The stacks analyses make (the Jacobians $\partial F/\partial h$ at many points) hold many small
    matrices, where OpenBLAS's threads only wait on each other, and wait far longer on a machine
    whose cores are busy (JAX's own threads, other workers): 64 matrices of 128 x 128 took 0.34 s
    with one thread and 6.8 s (7.1 s of CPU) with two, on 2 cores that other work shared. The
    thread limit holds only inside this call (`threadpoolctl`). With `vectors`, also the
    eigenvectors (`numpy.linalg.eig`).

    A stack is split over one thread per core this process may use (LAPACK runs without the GIL),
    each matrix still on one BLAS thread: the same numbers, to the bit, sooner (256 matrices of
    128 x 128: 1.40 s on one thread, 0.87 s on two, 2 idle cores)."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    from dynlab.budget import cores

    jacobians = np.asarray(jacobians)
    solve = np.linalg.eig if vectors else np.linalg.eigvals
    threads = min(cores(), len(jacobians)) if jacobians.ndim == 3 else 1
    with threadpool_limits(limits=1, user_api="blas"):
        if threads < 2:
            return solve(jacobians)
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(solve, np.array_split(jacobians, threads)))
    if vectors:
        return tuple(np.concatenate(p) for p in zip(*parts))
    return np.concatenate(parts)
