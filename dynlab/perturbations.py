r"""Perturbations: composable transforms of a sample's input and of the drive its neurons receive.

A [`Perturbation`][] maps one sample to a perturbed sample and a drive,

$$ (\text{key},\ x_{1:T},\ N) \;\mapsto\; (x'_{1:T},\ \xi_{1:T}) , \qquad \xi_t \in \mathbb R^N , $$

where $\xi_t$ is the current added to the pre-activation of each of the model's $N$ neurons at
step $t$ (the Cell contract's ``drive``; for the ARU the controller sees it too, the paper's "+ξ in
Eq. (3)"; for GRU/LSTM it enters the candidate, see [`dynlab.units.gated`][]). Tasks never know
about perturbations: [`evaluate_under`][] applies one to held-out batches, and any trained
model of any unit can be evaluated under any perturbation. [`compose`][] chains them (inputs
flow through in order, drives add up).

The paper's protocols (Geadah et al., §5.5; notes §2), with $t = 0, \dots, T-1$ and the window
$W = \{t : t_{\text{on}} \le t < t_{\text{on}} + \tau\}$:

* [`StepDrive`][] — $\xi_t^i = \xi\,[t \in W]$ for every neuron $i$ (Fig. 2b/c);
* [`NoisyDrive`][] — $\xi_t^i \sim \mathcal N(\mu, \sigma^2)$ i.i.d. over neurons and steps in
  $W$, 0 outside (Table 1: $\mathcal N(5, 2^2)$, window $[200, 400)$ of $T = 784$ — the window is a
  [gap] in the paper, we assume the step drive's);
* [`Contrast`][] — $x'_t = x_t\,(1 + \alpha \sin(2\pi f t / T + \varphi))$ (the formula is a [gap];
  this is the notes' suggestion). It scales the input as the network receives it (after the
  task's standardisation).

Numeric parameters are stored as arrays, so one compiled evaluation serves every strength.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from dynlab.errors import ConfigError
from dynlab.losses import get_loss

KINDS = ("step", "noisy", "contrast")
PAPER_T, PAPER_ONSET, PAPER_DURATION = 784, 200, 200  # the step drive's window in the paper (psMNIST)


class Perturbation(eqx.Module):
    """Base class: ``p(key, x[T, D], width) -> (x'[T, D], drive[T, width] or None)`` for one sample."""

    @abc.abstractmethod
    def __call__(self, key: PRNGKeyArray, x: Array, width: int) -> tuple[Array, Array | None]:
        """The perturbed input and the drive (``None``: no drive) for one sample."""


def _window(T: int, onset: Array, duration: Array) -> Array:
    t = jnp.arange(T)
    return ((t >= onset) & (t < onset + duration)).astype(jnp.float32)


class StepDrive(Perturbation):
    r"""$\xi_t^i = \xi$ for $t_{\text{on}} \le t < t_{\text{on}} + \tau$, else 0 (every neuron alike)."""

    xi: Array
    onset: Array
    duration: Array

    def __init__(self, xi: float, onset: int, duration: int):
        self.xi, self.onset, self.duration = jnp.asarray(xi, jnp.float32), jnp.asarray(onset), jnp.asarray(duration)

    def __call__(self, key, x, width):
        w = _window(x.shape[0], self.onset, self.duration)
        return x, jnp.broadcast_to((self.xi * w)[:, None], (x.shape[0], width))


class NoisyDrive(Perturbation):
    r"""$\xi_t^i \sim \mathcal N(\mu, \sigma^2)$ i.i.d. over neurons and steps inside the window, 0 outside."""

    mean: Array
    std: Array
    onset: Array
    duration: Array

    def __init__(self, mean: float, std: float, onset: int, duration: int):
        if std < 0:
            raise ConfigError(f"noisy drive std must be >= 0, got {std!r}")
        self.mean, self.std = jnp.asarray(mean, jnp.float32), jnp.asarray(std, jnp.float32)
        self.onset, self.duration = jnp.asarray(onset), jnp.asarray(duration)

    def __call__(self, key, x, width):
        w = _window(x.shape[0], self.onset, self.duration)
        noise = self.mean + self.std * jax.random.normal(key, (x.shape[0], width))
        return x, noise * w[:, None]


class Contrast(Perturbation):
    r"""$x'_t = x_t\,(1 + \alpha \sin(2\pi f t / T + \varphi))$; no drive."""

    alpha: Array
    freq: Array
    phase: Array

    def __init__(self, alpha: float, freq: float = 1.0, phase: float = 0.0):
        self.alpha, self.freq, self.phase = (jnp.asarray(v, jnp.float32) for v in (alpha, freq, phase))

    def __call__(self, key, x, width):
        T = x.shape[0]
        gain = 1 + self.alpha * jnp.sin(2 * jnp.pi * self.freq * jnp.arange(T) / T + self.phase)
        return x * gain[:, None].astype(x.dtype), None


class Compose(Perturbation):
    """Apply ``parts`` in order: each sees the input the previous one produced; drives add up."""

    parts: tuple[Perturbation, ...]

    def __call__(self, key, x, width):
        total = None
        for part, k in zip(self.parts, jax.random.split(key, len(self.parts))):
            x, drive = part(k, x, width)
            if drive is not None:
                total = drive if total is None else total + drive
        return x, total


def compose(*parts: Perturbation) -> Compose:
    """One perturbation applying ``parts`` in order (drives summed)."""
    return Compose(tuple(parts))


def default_window(T: int, onset: int | None, duration: int | None) -> tuple[int, int]:
    """The drive window: given values, else the paper's $[200, 400)$ of $T = 784$ scaled to ``T``.

    At $T = 784$ this is exactly the paper's; at $T = 196$ (14×14 psMNIST) it is $[50, 100)$.
    """
    onset = round(PAPER_ONSET * T / PAPER_T) if onset is None else onset
    duration = round(PAPER_DURATION * T / PAPER_T) if duration is None else duration
    for name, v in (("onset", onset), ("duration", duration)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{name} must be a non-negative integer number of steps, got {v!r}")
    return onset, duration


def perturbation(kind: str, strength: float, *, length: int, onset: int | None = None, duration: int | None = None,
                 std_ratio: float = 0.4, freq: float = 1.0, phase: float = 0.0) -> Perturbation:
    r"""The perturbation of ``kind`` at ``strength`` for sequences of ``length`` steps.

    * ``step``: [`StepDrive`][] with $\xi$ = strength;
    * ``noisy``: [`NoisyDrive`][] with $\mu$ = strength and $\sigma$ = ``std_ratio`` · strength
      (default 0.4: strength 5 is the paper's $\mathcal N(5, 2^2)$, and every strength keeps the
      drive "almost surely positive", the paper's reason for its choice);
    * ``contrast``: [`Contrast`][] with $\alpha$ = strength, frequency ``freq`` (cycles per
      sequence; the paper's psMNIST value is 1) and phase ``phase``.

    Strength 0 is the unperturbed model for every kind.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown perturbation kind {kind!r}; valid: {', '.join(KINDS)}")
    if isinstance(strength, bool) or not isinstance(strength, (int, float, np.floating, np.integer)):
        raise ConfigError(f"perturbation strength must be a number, got {strength!r}")
    if kind == "contrast":
        return Contrast(float(strength), freq, phase)
    onset, duration = default_window(length, onset, duration)
    if kind == "step":
        return StepDrive(float(strength), onset, duration)
    if std_ratio < 0:
        raise ConfigError(f"std_ratio must be >= 0, got {std_ratio!r}")
    return NoisyDrive(float(strength), std_ratio * abs(float(strength)), onset, duration)


def drive_width(model) -> int:
    """The number of neurons a per-neuron drive must cover: every layer's width (all equal)."""
    widths = {c.hidden for c in model.cells}
    if len(widths) != 1:
        raise ConfigError(f"a per-neuron drive needs layers of one width, this model has widths {sorted(widths)}")
    return widths.pop()


@eqx.filter_jit
def evaluate_under(model, task, perturb: Perturbation | None, key: PRNGKeyArray, n: int, *,
                   chunk: int = 250) -> dict[str, Array]:
    """The task's loss and metric on ``n`` held-out samples, each run under ``perturb``.

    Sample ``i`` is perturbed with its own key (``split(key_perturb, n)[i]``), so noise is
    independent across samples, and the same ``key`` gives the same samples and noise for every
    perturbation of a kind (common random numbers make accuracy-vs-strength curves smooth).
    Samples run ``chunk`` at a time (``lax.map``), which bounds the memory of per-neuron drives.
    ``perturb=None`` is the clean evaluation.
    """
    k_data, k_pert = jax.random.split(key)
    x, y, mask = task.batch(k_data, n, split="test")
    width = drive_width(model)

    def one(args):
        k, xi = args
        if perturb is None:
            return model(xi)
        xp, drive = perturb(k, xi, width)
        return model(xp, drive)

    ys = jax.lax.map(one, (jax.random.split(k_pert, n), x), batch_size=min(chunk, n))
    spec = get_loss(task.loss)
    return {"loss": spec.loss(ys, y, mask), spec.metric_name: spec.metric(ys, y, mask)}
