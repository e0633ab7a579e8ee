r"""The hierarchical toy language of Sarkar & Howard (Fig. 3, Methods; notes §2).

Nine symbols per level. A level's list of 9 items (letters, words, …) combines into the next
level's 9 items by the strided triplets (1-based list positions)

$$ (1,4,7), (1,5,8), (1,6,9), (2,6,7), (2,4,8), (2,5,9), (3,5,7), (3,6,8), (3,4,9), $$

item $j$ of the next level being the concatenation $L[a_j] L[b_j] L[c_j]$. Positions 1, 2, 3 of
a triplet draw from list positions {1,2,3}, {4,5,6}, {7,8,9}; $b = 4 + ((c-7) - (a-1)) \bmod 3$,
so the first two positions determine the third and neither alone does (XOR-like), and every
item is used exactly three times (uniform marginals). Before each combination the list is
scrambled by a seeded permutation (``grammar_seed``; ``scramble=False`` gives the unscrambled
language whose first sequence begins 147 267 357 …). After ``levels`` = 4 combinations there are
9 sequences of $3^4 = 81$ letters: the 9 classes.

Input: one-hot pulses over 9 channels, one symbol per step at dilation $3^0$. Time dilation by
$a = 3^m$ (``dilation`` = m ≥ 0, the paper tests m = 0…6):

* ``mode="pulse"``: the one-hot pulse at the symbol's first step, then $a-1$ silent steps;
* ``mode="hold"``: the one-hot vector held for all $a$ steps of the symbol.

The label is scored at the last step (loss ``ce_last``; chance 1/9). The test stream for TRW
analyses is the 9 sequences concatenated in class order: $9 \times 81 = 729 = 3^6$ symbols
([`HierarchicalLanguageTask.stream`][]).
"""

from __future__ import annotations

from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import Task

TRIPLETS = ((1, 4, 7), (1, 5, 8), (1, 6, 9), (2, 6, 7), (2, 4, 8), (2, 5, 9), (3, 5, 7), (3, 6, 8), (3, 4, 9))
N_SYMBOLS = 9


def check_exponent(name: str, m) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
        raise ConfigError(f"{name} must be a non-negative integer exponent m (dilation factor 3^m), got {m!r}")
    return int(m)


def grammar(levels: int = 4, *, seed: int | None = 0) -> np.ndarray:
    """The ``[9, 3**levels]`` symbol sequences (values 0..8), item ``j`` being class ``j``.

    ``seed=None``: no scrambling. Otherwise each level's list is permuted (NumPy
    ``default_rng(seed)``, one permutation per level) before it is combined.
    """
    require_positive("levels", levels)
    rng = None if seed is None else np.random.default_rng(seed)
    items = [np.array([i]) for i in range(N_SYMBOLS)]
    for _ in range(levels):
        if rng is not None:
            items = [items[p] for p in rng.permutation(N_SYMBOLS)]
        items = [np.concatenate([items[a - 1], items[b - 1], items[c - 1]]) for a, b, c in TRIPLETS]
    return np.stack(items)


def dilate(x, factor: int, mode: str = "pulse"):
    """Dilate ``x[..., T, D]`` in time by an integer ``factor`` (``"pulse"`` or ``"hold"``)."""
    require_positive("dilation factor", factor)
    if mode not in ("pulse", "hold"):
        raise ConfigError(f"dilation mode must be 'pulse' or 'hold', got {mode!r}")
    xp = jnp if isinstance(x, jax.Array) else np
    if factor == 1:
        return x
    if mode == "hold":
        return xp.repeat(x, factor, axis=-2)
    shape = x.shape[:-2] + (x.shape[-2], factor, x.shape[-1])
    out = xp.zeros(shape, x.dtype)
    out = out.at[..., 0, :].set(x) if xp is jnp else _set_first(out, x)
    return out.reshape(x.shape[:-2] + (x.shape[-2] * factor, x.shape[-1]))


def _set_first(out, x):
    out[..., 0, :] = x
    return out


def one_hot(symbols) -> np.ndarray:
    return np.eye(N_SYMBOLS, dtype=np.float32)[np.asarray(symbols)]


@register("task", "hierarchical-language",
          "hierarchical toy language: classify 9 sequences of 81 symbols, time dilation 3^m (ce_last, chance 1/9)")
class HierarchicalLanguageTask(Task):
    """Classify which of the 9 grammar sequences was shown (see the module docstring).

    Args:
        levels: combination levels (4: sequences of 81 symbols).
        dilation: exponent m of the time dilation $3^m$ (0 = the training scale).
        mode: ``"pulse"`` (pulse then silence) or ``"hold"``.
        grammar_seed: seed of the per-level scrambling.
        scramble: ``False`` for the unscrambled grammar.

    ``batch`` draws class labels so that every class appears equally often when ``batch_size``
    is a multiple of 9 (a permutation of ``arange(batch_size) % 9``); there are only 9 distinct
    sequences, so "train" and "test" are the same sequences (the paper tests the trained
    sequences at other dilations).
    """

    sequences: "_Frozen" = eqx.field(static=True)
    levels: int = eqx.field(static=True)
    dilation: int = eqx.field(static=True)
    mode: str = eqx.field(static=True)

    def __init__(self, *, levels: int = 4, dilation: int = 0, mode: Literal["pulse", "hold"] = "pulse",
                 grammar_seed: int = 0, scramble: bool = True):
        require_positive("task.levels", levels)
        check_exponent("task.dilation", dilation)
        if mode not in ("pulse", "hold"):
            raise ConfigError(f"task.mode must be 'pulse' or 'hold', got {mode!r}")
        if isinstance(grammar_seed, bool) or not isinstance(grammar_seed, int) or grammar_seed < 0:
            raise ConfigError(f"task.grammar_seed must be a non-negative integer, got {grammar_seed!r}")
        self.sequences = _Frozen(grammar(levels, seed=grammar_seed if scramble else None))
        self.levels, self.dilation, self.mode = levels, dilation, mode
        self.input_size = self.output_size = N_SYMBOLS
        self.length = 3**levels * 3**dilation
        self.loss, self.chance = "ce_last", 1.0 / N_SYMBOLS

    @property
    def symbols(self) -> np.ndarray:
        """The ``[9, 3**levels]`` class sequences (symbol ids 0..8)."""
        return self.sequences.array

    def inputs(self, dilation: int | None = None, mode: str | None = None) -> np.ndarray:
        """All 9 sequences as inputs ``[9, T, 9]`` at ``dilation`` (default: the task's)."""
        m = self.dilation if dilation is None else check_exponent("dilation", dilation)
        return dilate(one_hot(self.symbols), 3**m, mode or self.mode)

    def stream(self, dilation: int = 0, mode: str | None = None) -> np.ndarray:
        """The 9 sequences concatenated in class order: ``[9 * 3**levels * 3**dilation, 9]`` (729 steps at 0)."""
        m = check_exponent("dilation", dilation)
        return dilate(one_hot(self.symbols.reshape(-1)), 3**m, mode or self.mode)

    def batch(self, key, batch_size, split="train"):
        y = jax.random.permutation(key, jnp.arange(batch_size) % N_SYMBOLS)
        x = jnp.asarray(self.inputs())[y]
        mask = jnp.zeros((batch_size, self.length)).at[:, -1].set(1.0)
        return x, y, mask


class _Frozen:
    """A hashable wrapper so the sequences can be a static field."""

    def __init__(self, array):
        self.array = np.asarray(array)
        self.array.setflags(write=False)
        self._hash = hash(self.array.tobytes())

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        return isinstance(other, _Frozen) and np.array_equal(self.array, other.array)
