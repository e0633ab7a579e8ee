r"""An ARU layer run under a drive: its activities, controller states and the activation parameters
$(n_t, s_t)$ they set, under step drives switched on at an onset (the protocol of the adaptation,
controller and gain-scaling analyses)."""

from __future__ import annotations

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from dynlab.analyses.aru.frozen_map import number_grid
from dynlab.analyses.state_map import protocol_inputs
from dynlab.errors import ConfigError, require_positive


@eqx.filter_jit
def aru_traces(model, xs: Array, drives: Array) -> dict[str, Array]:
    r"""Run a one-layer ARU model on each input ``xs [B, T, D]`` under its drive ``drives [B, T]`` or ``[B, T, H]``.

    Returns the states after every step: ``h [B, T, H]`` (activities), ``g [B, T, H, n_g]``
    (controller states) and the activation parameters ``n, s [B, T, H]`` they set (Eq. 5).
    """
    cell = model.cells[0]

    def run(x, drive):
        _, (state,) = model.trajectory(x, drive)
        n, s = cell.activation_params(state.g)
        return {"h": state.h, "g": state.g, "n": n, "s": s}

    return jax.vmap(run)(xs, drives)


def with_zero(drives: Sequence[float]) -> np.ndarray:
    """The drives, checked, sorted and unique, with 0 added."""
    drives = number_grid("drives", drives)
    return np.unique(np.append(drives, 0.0))


def step_drive_traces(model, drives: np.ndarray, onset: int, duration: int, task, seed: int,
                       key: Array | None = None) -> dict[str, np.ndarray]:
    """[`aru_traces`][] under step drives switched on at ``onset`` for ``duration`` steps, on the
    protocol's inputs (zero, or ``task``'s stream drawn from ``key``, default ``key(seed)``, the same
    for every drive)."""
    require_positive("duration", duration)
    if isinstance(onset, bool) or not isinstance(onset, int) or onset < 0:
        raise ConfigError(f"onset must be a non-negative integer, got {onset!r}")
    T = onset + duration
    xs = protocol_inputs(model, T, task=task, key=jax.random.key(seed) if key is None else key)[0]
    on = (np.arange(T) >= onset).astype(float)
    traces = aru_traces(model, jnp.broadcast_to(xs, (drives.size, *xs.shape)), jnp.asarray(drives[:, None] * on))
    return {k: np.asarray(v, float) for k, v in traces.items()}

