r"""The N-bit flip-flop (Sussillo & Barak 2013).

Each of ``bits`` input channels receives, at every step and independently, a pulse with
probability ``p_flip``: $+1$ or $-1$ with equal probability (every channel pulses at step 0, so
every target is defined from the start). Output channel $i$ must hold the sign of the last pulse
on input $i$:

$$ y_{t,i} = x_{s,i}, \qquad s = \max\{\, s' \le t : x_{s',i} \ne 0 \,\}. $$

Its solution is known: $2^N$ stable fixed points at zero input, one near each corner
$\{\pm 1\}^N$ of the output cube, joined by saddles (Sussillo & Barak 2013, Fig. 2). Gaussian
input noise of standard deviation ``noise`` is added to every channel and step.

Defaults: 3 bits, ``p_flip`` = 0.2 and pulses of ±1 as in FixedPointFinder's ``FlipFlop``
(Golub & Sussillo 2018), whose trials are 256 steps; dynlab's default ``length`` is 64, which
holds ~13 pulses per bit and trains a 64-unit GRU to > 99% bit accuracy in the default 1,500
steps on 2 CPU cores (neurogym has no flip-flop). Loss ``mse_sign`` (squared error at every step;
metric: the fraction of steps and bits whose output has the target's sign); chance 0.5.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import Criterion, Expected, Task


@register("task", "flipflop", "N-bit flip-flop: hold the sign of each channel's last pulse (mse, 2^N stable fixed points)")
class FlipFlopTask(Task):
    """The N-bit flip-flop; see the module docstring."""

    criterion = Criterion("sign_accuracy", 0.95, source="a network that holds its bits gets > 0.99 (module "
                          "docstring); one that does not stays near chance, 0.5")
    bits: int = eqx.field(static=True)
    p_flip: float = eqx.field(static=True)
    noise: float = eqx.field(static=True)

    def __init__(self, *, bits: int = 3, length: int = 64, p_flip: float = 0.2, noise: float = 0.0):
        require_positive("task.bits", bits)
        require_positive("task.length", length)
        if bits > 16:
            raise ConfigError(f"task.bits must be at most 16 (2^bits fixed points), got {bits}")
        if isinstance(p_flip, bool) or not isinstance(p_flip, (int, float)) or not 0 < p_flip <= 1:
            raise ConfigError(f"task.p_flip must be a probability in (0, 1], got {p_flip!r}")
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not math.isfinite(noise) or noise < 0:
            raise ConfigError(f"task.noise must be a finite standard deviation >= 0, got {noise!r}")
        self.bits, self.p_flip, self.noise = bits, float(p_flip), float(noise)
        self.input_size = self.output_size = bits
        self.length = length
        self.loss, self.chance = "mse_sign", 0.5

    def batch(self, key, batch_size, split="train"):
        k_pulse, k_sign, k_noise = jax.random.split(key, 3)
        shape = (batch_size, self.length, self.bits)
        pulse = jax.random.bernoulli(k_pulse, self.p_flip, shape).at[:, 0, :].set(True)
        sign = jnp.where(jax.random.bernoulli(k_sign, 0.5, shape), 1.0, -1.0)
        pulses = jnp.where(pulse, sign, 0.0)

        def hold(last, x):
            held = jnp.where(x != 0, x, last)
            return held, held

        _, y = jax.lax.scan(hold, jnp.zeros((batch_size, self.bits)), jnp.swapaxes(pulses, 0, 1))
        x = pulses + self.noise * jax.random.normal(k_noise, shape)
        return x, jnp.swapaxes(y, 0, 1), jnp.ones((batch_size, self.length))

    def expected(self):
        """$2^N$ stable fixed points at zero input, one per corner of the output cube (module docstring)."""
        return (Expected("fixed-points", "n_points_stable", 2.0**self.bits, input="zero input",
                         source=f"2^{self.bits}, Sussillo & Barak 2013"),)
