r"""Character-level language modelling with stateful truncated BPTT: ``charlm``.

**Corpus.** Any byte file in the data directory (``corpus``, default ``text/tinyshakespeare.txt``),
modelled byte by byte: for ASCII text such as Tiny Shakespeare a byte is a character, for enwik8
(the first $10^8$ bytes of a 2006 Wikipedia dump, file ``enwik8``) a byte is the Transformer-XL
unit. The vocabulary is the set of byte values occurring anywhere in the file (65 for Tiny
Shakespeare; Transformer-XL also counts enwik8's validation and test text into its 204 symbols).

**Splits**: contiguous, in file order — training text first, then ``validation`` (the next
``valid_fraction``), then ``test`` (the last ``test_fraction``). With the defaults (5 % / 5 %)
enwik8's $10^8$ bytes split into exactly the standard 90M / 5M / 5M.

**Inputs**: one-hot × ``input_scale`` (3, the scaling paper's enwik8 encoding); targets are the
next byte at every step; loss ``ce_bits`` (cross-entropy, reported as bits per character).

**Stateful truncated BPTT** ([`StatefulTask`][dynlab.tasks.base.StatefulTask]). A split of $n$ bytes is
cut into $B$ streams of $L = \lfloor n/B \rfloor$ bytes; window $k$ of stream $b$ holds bytes
$bL + kT + j$, $j = 0..T$ ($T$ = ``window`` inputs and their $T$ next-byte targets, the last
window masked where the stream ends), $W = \lceil (L-1)/T \rceil$ windows per stream. Training
step $s$ shows window $s \bmod W$, so consecutive steps continue each stream and the trainer
carries the model state from one to the next. Each stream starts from the initial state at the
first window of every pass, and otherwise with probability

$$ p(s) = p_1 + (p_0 - p_1)\,\tfrac12\big(1 + \cos(\pi \min(s/S, 1))\big), $$

decaying from $p_0$ = ``reset_from`` to $p_1$ = ``reset_to`` over $S$ = ``reset_steps`` steps (the
scaling paper: 1.0 → 0.01 over the first 40k steps, a cosine). Early on, short independent
windows; later, long contexts. Held-out evaluation runs the whole ``test`` split as one stream
with one unbroken state, as the paper's batch-size-1 evaluation does.

``chance`` is the entropy (bits) of the training text's byte frequencies: what a model that
learned the frequencies but no context scores (a uniform guess scores $\log_2$ vocabulary).
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from dynlab.data import data_file
from dynlab.errors import ConfigError, DataError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import StatefulTask

SPLITS = ("train", "validation", "test")
LAYOUT = "a text or byte corpus, e.g. text/tinyshakespeare.txt or enwik8"


@functools.lru_cache(maxsize=2)
def _read(path: Path, _stamp) -> tuple[np.ndarray, np.ndarray]:
    """``(tokens[n] uint8 indices into the vocabulary, vocabulary[V] byte values)`` of a file."""
    raw = np.fromfile(path, dtype=np.uint8)
    present = np.bincount(raw, minlength=256) > 0
    index = (np.cumsum(present) - 1).astype(np.uint8)  # byte value -> vocabulary index
    return index[raw], np.flatnonzero(present).astype(np.uint8)


def read_corpus(corpus: str, data_dir: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray, Path]:
    """``(tokens, vocabulary, path)`` of ``corpus`` (a file name relative to the data directory)."""
    path = data_file(corpus, layout=LAYOUT, explicit=data_dir)
    st = path.stat()
    tokens, vocab = _read(path, (st.st_size, st.st_mtime_ns))
    return tokens, vocab, path


@register("task", "charlm", "character-level language modelling, stateful truncated BPTT (bits per character)")
class CharLMTask(StatefulTask):
    """Next-byte prediction on a corpus; see the module docstring.

    Args:
        corpus: file name inside the data directory.
        window: $T$, steps per truncated-BPTT window (the paper: 100).
        valid_fraction, test_fraction: contiguous held-out parts at the end of the file.
        input_scale: the one-hot input's height.
        reset_from, reset_to, reset_steps: the state-reset probability schedule.
        data_dir: data directory (default: ``$DYNLAB_DATA``, then ``~/.cache/dynlab/data``).
    """

    tokens: Array  # [n + window + 1] the whole file as vocabulary indices, zero-padded at the end
    bounds: tuple = eqx.field(static=True)  # (first byte, byte count) of each of SPLITS
    vocab: tuple = eqx.field(static=True)  # byte values of the vocabulary indices
    input_scale: float = eqx.field(static=True)
    reset_from: float = eqx.field(static=True)
    reset_to: float = eqx.field(static=True)
    reset_steps: int = eqx.field(static=True)
    source: str = eqx.field(static=True)

    def __init__(self, *, corpus: str = "text/tinyshakespeare.txt", window: int = 100, valid_fraction: float = 0.05,
                 test_fraction: float = 0.05, input_scale: float = 3.0, reset_from: float = 1.0,
                 reset_to: float = 0.01, reset_steps: int = 40000, data_dir: str | None = None):
        require_positive("task.window", window)
        require_positive("task.input_scale", input_scale, integer=False)
        require_positive("task.reset_steps", reset_steps)
        for name, p in (("reset_from", reset_from), ("reset_to", reset_to)):
            if isinstance(p, bool) or not 0 <= p <= 1:
                raise ConfigError(f"task.{name} must be a probability in [0, 1], got {p!r}")
        for name, f in (("valid_fraction", valid_fraction), ("test_fraction", test_fraction)):
            if isinstance(f, bool) or not 0 < f < 1:
                raise ConfigError(f"task.{name} must be a number in (0, 1), got {f!r}")
        if valid_fraction + test_fraction >= 1:
            raise ConfigError("task.valid_fraction + task.test_fraction must leave some training text (sum < 1)")
        tokens, vocab, path = read_corpus(corpus, data_dir)
        n = len(tokens)
        n_test, n_valid = round(test_fraction * n), round(valid_fraction * n)
        n_train = n - n_valid - n_test
        self.bounds = ((0, n_train), (n_train, n_valid), (n_train + n_valid, n_test))
        short = [f"{s} {c}" for s, (_, c) in zip(SPLITS, self.bounds) if c < window + 1]
        if short:
            raise DataError(f"{path}: corpus of {n} bytes is too short for windows of {window} steps "
                            f"(each split needs at least {window + 1} bytes; {', '.join(short)})")
        self.tokens = jnp.asarray(np.concatenate([tokens, np.zeros(window + 1, np.uint8)]))
        self.vocab = tuple(int(v) for v in vocab)
        self.input_scale, self.reset_steps = input_scale, reset_steps
        self.reset_from, self.reset_to = reset_from, reset_to
        self.input_size = self.output_size = len(vocab)
        self.length, self.loss = window, "ce_bits"
        freq = np.bincount(tokens[:n_train], minlength=len(vocab)) / n_train
        self.chance = float(-np.sum(freq[freq > 0] * np.log2(freq[freq > 0])))
        self.source = f"{path.name}, {n:,} bytes, vocabulary {len(vocab)}"

    def _split(self, split: str) -> tuple[int, int]:
        if split not in SPLITS:
            raise ConfigError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        return self.bounds[SPLITS.index(split)]

    def _stream_length(self, batch_size: int, split: str) -> int:
        require_positive("batch_size", batch_size)
        count = self._split(split)[1]
        if count // batch_size < self.length + 1:
            raise ConfigError(f"the {split} text ({count} bytes) cut into {batch_size} streams leaves fewer than "
                              f"{self.length + 1} bytes per stream; use a smaller batch size or window")
        return count // batch_size

    def _sequences(self, starts: Array, last: Array) -> tuple[Array, Array, Array]:
        """Inputs, next-byte targets and mask of the windows starting at bytes ``starts``; targets
        after byte ``last`` (each window's stream end) are masked."""
        pos = starts[:, None] + jnp.arange(self.length + 1)
        seq = self.tokens[pos].astype(jnp.int32)
        x = jax.nn.one_hot(seq[:, :-1], self.input_size) * self.input_scale
        mask = (pos[:, 1:] <= last[:, None]).astype(jnp.float32)
        return x, seq[:, 1:], mask

    def windows(self, batch_size, split="train"):
        return math.ceil((self._stream_length(batch_size, split) - 1) / self.length)

    def window(self, index, batch_size, split="train"):
        first, L = self._split(split)[0], self._stream_length(batch_size, split)
        stream_start = first + jnp.arange(batch_size) * L
        k = jnp.asarray(index) % self.windows(batch_size, split)
        return self._sequences(stream_start + k * self.length, stream_start + L - 1)

    def reset_probability(self, step) -> Array:
        """$p(s)$ of the module docstring."""
        frac = jnp.minimum(jnp.asarray(step, jnp.float32) / self.reset_steps, 1.0)
        return self.reset_to + (self.reset_from - self.reset_to) * 0.5 * (1.0 + jnp.cos(jnp.pi * frac))

    def resets(self, key, step, batch_size):
        first_window = jnp.asarray(step) % self.windows(batch_size, "train") == 0
        return first_window | jax.random.bernoulli(key, self.reset_probability(step), (batch_size,))

    def batch(self, key, batch_size, split="train"):
        """Independent windows at uniformly random positions of ``split`` (no carried state)."""
        first, count = self._split(split)
        starts = first + jax.random.randint(key, (batch_size,), 0, count - self.length)
        return self._sequences(starts, jnp.full((batch_size,), first + count - 1))

    def describe(self) -> str:
        n = [c for _, c in self.bounds]
        return (f"{type(self).__name__} ({self.source}; {n[0]:,} / {n[1]:,} / {n[2]:,} bytes "
                f"train / validation / test, window {self.length}, stateful; unigram entropy {self.chance:.3g} bpc)")
