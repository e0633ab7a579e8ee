r"""Any neurogym environment as a dynlab task (``task.name = "neurogym"``, ``task.env = "…-v0"``).

neurogym (Molano-Mazón et al. 2022) is the cognitive-task suite its users know. This wrapper
draws trials through its supervised interface, the trial level that ``ngym.Dataset`` also uses:
``env.new_trial()`` followed by the trial's inputs ``env.ob[T_trial, D]`` and labels
``env.gt[T_trial]`` (0 = fixate, else the action to take).

**One trial per row, seeded from dynlab's key.** Row $b$ of a batch is one trial from a fresh
copy of the environment seeded with its own 31-bit seed, drawn from the batch's key; the seed
reaches the environment's generator, its action space and every period-duration sampler (the
``TruncExp`` objects in ``env.timing``, which neurogym's ``Dataset`` leaves unseeded when seeding
rows ``seed + i``: equal batches for equal keys are not otherwise guaranteed; neurogym #282).
Rows are padded to ``length`` steps; the padding is never scored (mask 0). Unlike
``ngym.Dataset``, trials are not concatenated into a stream, so every row starts at a trial's
start (what the analyses of a trial need).

**Scored steps and loss.** Every step of the trial is scored against its label, neurogym's
supervised form (loss ``ce_all``; chance: one over the number of actions, a lower bound when
most steps are fixation). The native tasks ([`dynlab.tasks.cognitive`][]) score the decision
period by default.

**Inside jit.** neurogym is NumPy code; ``batch`` calls it through ``jax.pure_callback``, so the
trainer's compiled step can still make its data (each batch is a host round-trip).

``length`` defaults to the longest trial the environment's timing allows (a fixed duration, the
upper end of a truncated exponential, the largest of a list of choices, …), in steps of its
``dt``; ``kwargs`` (a table) go to ``neurogym.make`` (e.g. ``dt``, ``timing``, ``sigma``).

**Enforces**: ``kwargs.dt`` is a positive finite number of ms; the environment is trial-based
(its ``timing`` names periods: ``Null-v0`` and ``Bandit-v0`` do not); and a trial lasts at most
[`MAX_STEPS`][dynlab.tasks.cognitive.periods.MAX_STEPS] steps. Each is one line before
neurogym or JAX sees the value.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import Task
from dynlab.tasks.cognitive.periods import MAX_STEPS

EXTRA = "pip install 'dynlab[neurogym]'"


def _neurogym():
    if importlib.util.find_spec("neurogym") is None:
        raise ConfigError(f"task 'neurogym' needs the neurogym package, which is not installed: {EXTRA}")
    import neurogym

    return neurogym


def _frozen(value):
    """``value`` hashable (a task's fields are static, so hashed): tables as sorted (key, value)
    pairs, arrays as tuples, recursively; [`_thawed`][] undoes it."""
    if isinstance(value, dict):
        return ("__table__", tuple(sorted((k, _frozen(v)) for k, v in value.items())))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _thawed(value):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__table__":
        return {k: _thawed(v) for k, v in value[1]}
    if isinstance(value, tuple):
        return [_thawed(v) for v in value]
    return value


def _make(env_id: str, kwargs: dict):
    ngym = _neurogym()
    from neurogym.envs.registration import all_envs

    names = all_envs()
    if env_id not in names:
        raise ConfigError(f"unknown neurogym environment {env_id!r}; valid: {', '.join(names)}")
    dt = kwargs.get("dt", 1.0)
    if isinstance(dt, bool) or not isinstance(dt, (int, float)) or not math.isfinite(dt) or dt <= 0:
        raise ConfigError(f"task.kwargs.dt must be a positive number of milliseconds, got {dt!r}")
    try:
        with warnings.catch_warnings():   # gymnasium's notes on neurogym's metadata, not the user's concern
            warnings.simplefilter("ignore")
            env = ngym.make(env_id, **kwargs).unwrapped
    except TypeError as e:
        raise ConfigError(f"neurogym environment {env_id!r} rejected task.kwargs {kwargs}: {e}") from None
    if not hasattr(env, "new_trial") or not getattr(env, "timing", None):
        raise ConfigError(f"neurogym environment {env_id!r} is not a trial-based environment (its timing names no "
                          "periods); choose one whose trials have periods, e.g. PerceptualDecisionMaking-v0")
    return env


def _longest_ms(env_id: str, period: str, timing) -> float:
    """The longest duration (ms) neurogym's ``sample_time`` can return for one period's timing."""
    if isinstance(timing, (int, float)):
        return float(timing)
    if hasattr(timing, "vmax"):                              # TruncExp
        return float(timing.vmax)
    if isinstance(timing, (list, tuple)) and timing and all(isinstance(t, (int, float)) for t in timing):
        return float(max(timing))
    if isinstance(timing, (list, tuple)) and len(timing) == 2:
        dist, args = timing
        if dist in ("uniform", "choice"):
            return float(max(args))
        if dist == "truncated_exponential" and len(args) >= 3:
            return float(args[2])
        if dist == "constant":
            return float(args)
    raise ConfigError(f"neurogym environment {env_id!r}: cannot tell the longest duration of period "
                      f"{period!r} ({timing!r}); give task.length")


@register("task", "neurogym", "any neurogym environment by name (task.env), one trial per row, seeded from dynlab's key")
class NeurogymTask(Task):
    """A neurogym environment as a task; see the module docstring."""

    env_id: str = eqx.field(static=True)
    kwargs: tuple = eqx.field(static=True)   # (name, value) pairs, hashable
    dt: float = eqx.field(static=True)

    def __init__(self, *, env: str = "PerceptualDecisionMaking-v0", kwargs: dict | None = None,
                 length: int | None = None):
        if not isinstance(env, str):
            raise ConfigError(f"task.env must name a neurogym environment, e.g. 'PerceptualDecisionMaking-v0', got {env!r}")
        kwargs = dict(kwargs or {})
        made = _make(env, kwargs)
        self.env_id, self.kwargs, self.dt = env, _frozen(kwargs)[1], float(made.dt)
        if length is None:
            longest = sum(_longest_ms(env, p, t) for p, t in made.timing.items())
            steps = longest / self.dt
            if not steps <= MAX_STEPS:  # NaN too
                raise ConfigError(f"neurogym environment {env!r}: its longest trial, {longest:.6g} ms in steps of dt = "
                                  f"{self.dt:.6g} ms, is {steps:.3g} steps, more than {MAX_STEPS:,}; "
                                  "shorten task.kwargs.timing or raise task.kwargs.dt")
            length = int(math.ceil(steps - 1e-9))
        require_positive("task.length", length)
        if length > MAX_STEPS:
            raise ConfigError(f"task.length = {length:,} is more than {MAX_STEPS:,} steps")
        obs, actions = made.observation_space.shape, made.action_space
        if len(obs) != 1 or not hasattr(actions, "n"):
            raise ConfigError(f"neurogym environment {env!r} has observations of shape {obs} and actions "
                              f"{actions}; dynlab takes vector observations and discrete actions")
        self.input_size, self.output_size, self.length = int(obs[0]), int(actions.n), int(length)
        self.loss, self.chance = "ce_all", 1.0 / int(actions.n)

    def trials(self, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One trial per seed, on the host: ``(x[B, T, D] float32, y[B, T] int32, mask[B, T] float32)``."""
        base = _make(self.env_id, _thawed(("__table__", self.kwargs)))
        B, T = len(seeds), self.length
        x = np.zeros((B, T, self.input_size), np.float32)
        y = np.zeros((B, T), np.int32)
        mask = np.zeros((B, T), np.float32)
        for b, seed in enumerate(np.asarray(seeds)):
            env = copy.deepcopy(base)
            env.seed(int(seed))
            env.new_trial()
            ob, gt = np.asarray(env.ob), np.asarray(env.gt)
            n = min(len(ob), T)
            x[b, :n], y[b, :n], mask[b, :n] = ob[:n], gt[:n], 1.0
        return x, y, mask

    def batch(self, key, batch_size, split="train"):
        seeds = jax.random.randint(key, (batch_size,), 0, 2**31 - 1)
        shapes = (jax.ShapeDtypeStruct((batch_size, self.length, self.input_size), jnp.float32),
                  jax.ShapeDtypeStruct((batch_size, self.length), jnp.int32),
                  jax.ShapeDtypeStruct((batch_size, self.length), jnp.float32))
        return jax.pure_callback(self.trials, shapes, seeds, vmap_method="sequential")
