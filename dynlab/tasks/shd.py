r"""Spiking Heidelberg Digits: ``shd`` (classify one spoken digit) and ``shd-adding`` (sum two).

**Data.** SHD (Cramer et al. 2020) holds spoken digits 0–9 in English (labels 0–9) and German
(labels 10–19), spike-encoded by a cochlea model on 700 channels. Its published HDF5 files
``shd_train.h5`` and ``shd_test.h5`` are read from ``<data dir>/shd/`` or, failing that, from the
data directory itself (decompressed; the download is ``*.h5.gz``). Schema, one entry per sample:

==================  ===================================================================
``spikes/times``    variable-length float arrays: spike times in seconds
``spikes/units``    variable-length integer arrays: the channel (0–699) of each spike
``labels``          integer class, 0–19
``extra/speaker``   integer speaker id
==================  ===================================================================

When the files are absent, ``source = "auto"`` (the default) says so once (a ``RuntimeWarning``)
and uses a synthetic SHD-like set with the same interface ([`synthetic_shd`][]);
``source = "file"`` makes the absence an error, ``source = "synthetic"`` never looks.

**Binning.** Spikes at $t \ge$ ``duration_ms`` are dropped (the papers trim every digit to 1 s);
spike $(t, u)$ falls in bin $\lfloor t / \Delta \rfloor$ of channel $\lfloor u / p \rfloor$ with
$\Delta$ = ``bin_ms`` and $p$ = ``channel_pool`` (adjacent channels summed, $\lceil 700/p \rceil$
inputs). An input is the spike *count* of each (bin, channel) cell, or whether it is non-zero
(``binary = True``, the papers' "binary spatio-temporal pattern"; at 2 ms bins the two rarely
differ). Binning is vectorised NumPy ([`bin_spikes`][]) and yields one flat cell index
$b \cdot C + c$ per kept spike; the task holds these as device arrays and scatter-adds the ones
of the drawn samples into dense ``[T, C]`` counts inside [`batch`][dynlab.tasks.base.Task.batch], which is
pure and jit-able — the dense set would not fit in memory at 2 ms bins (8156 × 500 × 700 cells).

**SHD-Adding** (Spieler et al. 2024; scaling paper App. A.2): two samples drawn uniformly and
independently from the same split are put end to end in time — each binned over its own
``duration_ms`` window (trimmed or zero-padded), the second starting at bin $T_1 = $
``duration_ms / bin_ms``, with no marker at the boundary — and the target is
$(l_1 \bmod 10) + (l_2 \bmod 10)$, 19 classes regardless of language. Paper setting: 2 ms bins,
$2 \times 500 = 1000$ steps; the default here is 10 ms (200 steps), the ELM-2024 code's setting
and a CPU-scale one.

**Splits** (``split`` argument of ``batch``):

* ``train`` / ``validation``: a seeded (``seed``) split of ``shd_train.h5``, ``val_fraction``
  (20 %, as in the scaling paper) held out for validation;
* ``test``: ``shd_test.h5``;
* ``heldout``: the test samples of speakers that never occur in ``shd_train.h5`` (SHD holds two
  speakers out for its test set) — the out-of-distribution test of the ELM paper.

Batches draw samples with replacement. Loss ``ce_last``; ``chance`` is the accuracy of the best
input-blind guess under the training labels' frequencies (the most frequent class; for adding
the most frequent digit sum, 10 % when digits are uniform — uniform guessing gets 1/19).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import warnings
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from dynlab.data import data_dir as resolve_data_dir
from dynlab.errors import ConfigError, DataError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import Task

CHANNELS = 700
CLASSES = 20  # 10 English + 10 German digits; label mod 10 is the digit
FILES = ("shd_train.h5", "shd_test.h5")
SUBFOLDERS = ("shd", ".")  # searched in this order inside the data directory
SCHEMA = ("spikes/times", "spikes/units", "labels", "extra/speaker")
SPLITS = ("train", "validation", "test", "heldout")


@dataclasses.dataclass(frozen=True)
class Spikes:
    """Spike events of ``n`` samples as flat arrays (sample ``i`` owns ``offsets[i]:offsets[i+1]``).

    Attributes:
        times: spike times in seconds, ``[E]``.
        units: channel of each spike, ``[E]``.
        offsets: ``[n + 1]`` start of each sample's events, then ``E``.
        labels: class 0–19 of each sample, ``[n]``.
        speakers: speaker id of each sample, ``[n]``.
    """

    times: np.ndarray
    units: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    speakers: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def sample_of_event(self) -> np.ndarray:
        return np.repeat(np.arange(len(self)), np.diff(self.offsets))


# ------------------------------------------------------------------------------------------------
# Reading the published files


def find_shd_files(data_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """``(train, test)`` paths of the SHD files: ``<data dir>/shd/`` first, then ``<data dir>/``.

    Missing files are a [`DataError`][] naming every place searched (and ``.gz`` files found
    there, which must be decompressed first).
    """
    root = resolve_data_dir(data_dir)
    for sub in SUBFOLDERS:
        folder = root / sub
        if all((folder / f).is_file() for f in FILES):
            return folder / FILES[0], folder / FILES[1]
    places = " and ".join(repr(str(root / s / "shd_*.h5")) for s in SUBFOLDERS)
    gz = [str(root / s / f"{f}.gz") for s in SUBFOLDERS for f in FILES if (root / s / f"{f}.gz").is_file()]
    hint = f"; found compressed {', '.join(gz)}: gunzip it" if gz else ""
    raise DataError(f"missing SHD files {FILES[0]} and {FILES[1]} (HDF5: {', '.join(SCHEMA)}): searched {places}"
                    f"{hint}; put them in <data dir>/shd/ or point --data-dir / $DYNLAB_DATA at a directory "
                    "that has them")


def read_shd(path: str | os.PathLike) -> Spikes:
    """Read one SHD HDF5 file. A truncated, foreign or inconsistent file is a [`DataError`][]."""
    import h5py

    path = Path(path)
    try:
        with h5py.File(path, "r") as f:
            missing = [name for name in SCHEMA if name not in f]
            if missing:
                raise DataError(f"{path}: not an SHD file: missing {', '.join(missing)} "
                                f"(expected {', '.join(SCHEMA)})")
            for name in SCHEMA:  # before reading: a scalar or a table has no entry per sample
                if not isinstance(f[name], h5py.Dataset) or f[name].ndim != 1:
                    shape = getattr(f[name], "shape", "a group")
                    raise DataError(f"{path}: {name} must be a 1-D dataset with one entry per sample, got {shape}")
            times, units = f["spikes/times"][()], f["spikes/units"][()]
            labels, speakers = f["labels"][()], f["extra/speaker"][()]
    except DataError:
        raise
    except OSError as e:  # not HDF5, truncated, unreadable (DataError is an OSError too: re-raised above)
        detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"{path}: cannot read as HDF5 ({detail}); is the file complete and decompressed?") from None
    n = len(labels)
    if not (len(times) == len(units) == n == len(speakers)) or np.ndim(labels) != 1:
        raise DataError(f"{path}: spikes/times ({len(times)}), spikes/units ({len(units)}), labels ({n}) "
                        f"and extra/speaker ({len(speakers)}) must have one entry per sample")
    sizes = np.fromiter((len(t) for t in times), np.int64, n)
    if any(len(u) != s for u, s in zip(units, sizes)):
        raise DataError(f"{path}: some sample has a different number of spike times and spike units")
    flat_t = np.concatenate([np.asarray(t, np.float64) for t in times]) if n else np.zeros(0)
    flat_u = np.concatenate([np.asarray(u) for u in units]) if n else np.zeros(0, np.int64)
    if flat_u.size and (not np.issubdtype(flat_u.dtype, np.integer) or flat_u.min() < 0 or flat_u.max() >= CHANNELS):
        raise DataError(f"{path}: spikes/units must be integer channels 0..{CHANNELS - 1}")
    if not np.all(np.isfinite(flat_t)) or (flat_t.size and flat_t.min() < 0):
        raise DataError(f"{path}: spikes/times must be finite, non-negative seconds")
    labels = np.asarray(labels)
    if not np.issubdtype(labels.dtype, np.integer) or (n and (labels.min() < 0 or labels.max() >= CLASSES)):
        raise DataError(f"{path}: labels must be integers 0..{CLASSES - 1}")
    return Spikes(flat_t, flat_u.astype(np.int64), np.concatenate([[0], np.cumsum(sizes)]),
                  labels.astype(np.int64), np.asarray(speakers).astype(np.int64))


@functools.lru_cache(maxsize=4)
def _read_pair(train: Path, test: Path, _stamp) -> tuple[Spikes, Spikes]:
    return read_shd(train), read_shd(test)


def _stamp(path: Path):
    st = path.stat()
    return st.st_size, st.st_mtime_ns


# ------------------------------------------------------------------------------------------------
# The synthetic stand-in


@functools.lru_cache(maxsize=4)
def synthetic_shd(seed: int = 0, n_train: int = 4000, n_test: int = 1000, *, speakers: int = 12, heldout: int = 2,
                  spikes: float = 800.0, noise: float = 400.0) -> tuple[Spikes, Spikes]:
    r"""A synthetic SHD-like pair of sets ``(train, test)`` in the files' terms (700 channels, 20 classes).

    Every class $c$ has a spectrogram-like template of four "formants": straight tracks in
    (time, channel) from $(t^{on}_{ck}, u^{on}_{ck})$ to $(t^{off}_{ck}, u^{off}_{ck})$ with
    weights $w_{ck}$. A sample of class $c$ by speaker $s$ has $\mathrm{Poisson}(\text{spikes})$
    signal spikes, each on formant $k$ with probability $\propto w_{ck}$ at a uniform position
    $a$ along it, at

    $$ t = d + \sigma_s\, \epsilon\, \big(t^{on} + a (t^{off} - t^{on})\big) + \eta_t, \qquad
       u = u^{on} + a (u^{off} - u^{on}) + \mu_s + \nu + \eta_u, $$

    with per-sample delay $d \sim U(0, 0.1)$ s, tempo jitter $\log \epsilon \sim N(0, 0.1^2)$ and
    pitch jitter $\nu \sim N(0, 15^2)$ channels, per-spike jitter $\eta_t \sim N(0, (5\,\text{ms})^2)$
    and $\eta_u \sim N(0, 7^2)$ channels, plus $\mathrm{Poisson}(\text{noise})$ spikes uniform over
    1 s × 700 channels. The speaker warp is a tempo $\log \sigma_s \sim U(-0.15, 0.15)$ and a
    pitch shift $\mu_s \sim U(-28, 28)$ channels. With the defaults a nearest-class-mean
    classifier on 50 ms × 20-channel counts gets about 88 % of single test digits right (80 % for
    the held-out speakers): hard enough to separate models, easy enough to learn on a CPU.

    Like SHD, the training set has speakers ``0 .. speakers - heldout - 1`` and the test set all
    ``speakers``, so the last ``heldout`` speakers are unseen in training (the ``heldout`` split).
    Templates and warps depend on ``seed`` only, so both sets share them. The sets are fixed
    (drawn once, like the real files) rather than fresh every batch: a finite training set makes
    validation and test accuracy mean what they mean on SHD (generalisation, overfitting).
    """
    rng = np.random.default_rng(seed)
    F = 4
    onset = rng.uniform(0.0, 0.3, (CLASSES, F))
    offset = onset + rng.uniform(0.15, 0.4, (CLASSES, F))
    u_on = rng.uniform(0.05, 0.95, (CLASSES, F)) * CHANNELS
    u_off = np.clip(u_on + rng.uniform(-0.2, 0.2, (CLASSES, F)) * CHANNELS, 10, CHANNELS - 10)
    cum_w = np.cumsum(rng.uniform(0.5, 1.5, (CLASSES, F)), axis=1)
    tempo = np.exp(rng.uniform(-0.15, 0.15, speakers))
    pitch = rng.uniform(-0.04, 0.04, speakers) * CHANNELS

    def draw(n: int, allowed: np.ndarray, r: np.random.Generator) -> Spikes:
        labels, spk = r.integers(0, CLASSES, n), r.choice(allowed, n)
        delay, jitter, shift = r.uniform(0.0, 0.1, n), np.exp(r.normal(0.0, 0.1, n)), r.normal(0.0, 15.0, n)
        n_sig, n_noise = r.poisson(spikes, n), r.poisson(noise, n)
        s = np.repeat(np.arange(n), n_sig)
        c = labels[s]
        k = np.minimum(((r.uniform(0, 1, s.size) * cum_w[c, -1])[:, None] > cum_w[c]).sum(1), F - 1)
        a = r.uniform(0, 1, s.size)
        t = onset[c, k] + a * (offset[c, k] - onset[c, k])
        t = delay[s] + tempo[spk[s]] * jitter[s] * t + r.normal(0, 0.005, s.size)
        u = u_on[c, k] + a * (u_off[c, k] - u_on[c, k]) + pitch[spk[s]] + shift[s] + r.normal(0, 7.0, s.size)
        s_noise = np.repeat(np.arange(n), n_noise)
        s = np.concatenate([s, s_noise])
        t = np.concatenate([t, r.uniform(0.0, 1.0, s_noise.size)])
        u = np.concatenate([u, r.uniform(0, CHANNELS, s_noise.size)])
        keep = t >= 0
        s, t, u = s[keep], t[keep], np.clip(np.floor(u[keep]), 0, CHANNELS - 1).astype(np.int64)
        order = np.argsort(s * (t.max(initial=0.0) + 1.0) + t, kind="stable")  # by sample, then time, as in the files
        offsets = np.concatenate([[0], np.cumsum(np.bincount(s, minlength=n))])
        return Spikes(t[order], u[order], offsets, labels, spk)

    train = draw(n_train, np.arange(speakers - heldout), np.random.default_rng([seed, 1]))
    test = draw(n_test, np.arange(speakers), np.random.default_rng([seed, 2]))
    return train, test


# ------------------------------------------------------------------------------------------------
# Binning


@dataclasses.dataclass(frozen=True)
class Binned:
    """Binned spikes: one flat cell index ``bin * channels + channel`` per kept spike.

    Sample ``i`` owns ``cells[offsets[i]:offsets[i+1]]``; its dense ``[bins, channels]`` counts
    are ``np.bincount`` of those cells.
    """

    cells: np.ndarray
    offsets: np.ndarray
    bins: int
    channels: int


def bin_spikes(spikes: Spikes, bin_ms: float, duration_ms: float, channel_pool: int = 1) -> Binned:
    r"""Bin every spike: bin $\lfloor 1000\,t / \Delta \rfloor$, channel $\lfloor u / p \rfloor$; drop $t \ge$ duration.

    Vectorised over all spikes of all samples (no Python loop). ``duration_ms / bin_ms`` must be
    a whole number of bins.
    """
    bins = _bin_count(bin_ms, duration_ms)
    channels = math.ceil(CHANNELS / channel_pool)
    b = np.floor(spikes.times * 1000.0 / bin_ms).astype(np.int64)
    keep = b < bins
    cells = b[keep] * channels + spikes.units[keep] // channel_pool
    kept_per_sample = np.bincount(spikes.sample_of_event[keep], minlength=len(spikes))
    offsets = np.concatenate([[0], np.cumsum(kept_per_sample)])
    return Binned(cells.astype(np.int32), offsets, bins, channels)


def _bin_count(bin_ms: float, duration_ms: float) -> int:
    require_positive("task.bin_ms", bin_ms, integer=False)
    require_positive("task.duration_ms", duration_ms, integer=False)
    bins = round(duration_ms / bin_ms)
    if bins < 1 or abs(bins * bin_ms - duration_ms) > 1e-9 * duration_ms:
        raise ConfigError(f"task.duration_ms ({duration_ms}) must be a whole number of task.bin_ms ({bin_ms}) bins")
    return bins


# ------------------------------------------------------------------------------------------------
# The tasks


def _load(source: str, seed: int, synthetic_samples: int, data_dir) -> tuple[Spikes, Spikes, str]:
    if source not in ("auto", "file", "synthetic"):
        raise ConfigError(f"task.source must be one of 'auto', 'file', 'synthetic', got {source!r}")
    if source != "synthetic":
        try:
            train_path, test_path = find_shd_files(data_dir)
        except DataError as e:
            if source == "file":
                raise
            if "compressed" in str(e):  # files that are there but need gunzip: the whole message helps
                warnings.warn(f"SHD files not found, using the synthetic SHD-like set instead ({e})", RuntimeWarning)
            else:
                root = resolve_data_dir(data_dir)
                warnings.warn(f"SHD files not found, using the synthetic SHD-like set instead (neither {root / 'shd'}/ "
                              f"nor {root}/ holds {FILES[0]} and {FILES[1]}; set --data-dir or $DYNLAB_DATA)",
                              RuntimeWarning)
        else:
            train, test = _read_pair(train_path, test_path, (_stamp(train_path), _stamp(test_path)))
            return train, test, f"SHD files in {train_path.parent}"
    require_positive("task.synthetic_samples", synthetic_samples)
    train, test = synthetic_shd(seed, synthetic_samples, max(synthetic_samples // 4, 1))
    return train, test, f"synthetic SHD-like set (seed {seed})"


class SpikingDigits(Task):
    """What ``shd`` and ``shd-adding`` share: the binned samples as device arrays and the splits.

    Args (config keys of both tasks):
        bin_ms: bin width in milliseconds (paper: 2; default 10).
        duration_ms: every digit is trimmed (or zero-padded) to this many milliseconds.
        channel_pool: sum this many adjacent channels (1: all 700).
        binary: inputs are 0/1 (spike in the cell or not) instead of counts.
        val_fraction: fraction of the training file held out as ``validation``.
        seed: seed of the validation split and of the synthetic set.
        source: ``auto`` (files if present, else synthetic, with a warning), ``file``, ``synthetic``.
        synthetic_samples: size of the synthetic training set (its test set is a quarter of it).
        data_dir: data directory (default: ``$DYNLAB_DATA``, then ``~/.cache/dynlab/data``).
    """

    cells: Array  # [spikes + max_spikes] flat cell per kept spike, zero-padded at the end
    starts: Array  # [n] first spike of each sample (train file, then test file)
    sizes: Array  # [n] kept spikes per sample
    labels: Array  # [n] class 0-19 of each sample
    speakers: Array  # [n] speaker of each sample
    splits: dict  # split name -> sample indices
    bins: int = eqx.field(static=True)
    channels: int = eqx.field(static=True)
    max_spikes: int = eqx.field(static=True)
    binary: bool = eqx.field(static=True)
    source: str = eqx.field(static=True)

    def _setup(self, bin_ms, duration_ms, channel_pool, binary, val_fraction, seed, source, synthetic_samples,
               data_dir) -> np.ndarray:
        """Load, bin and split; returns the training labels (for the chance level)."""
        require_positive("task.channel_pool", channel_pool)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"task.seed must be a non-negative integer, got {seed!r}")
        if isinstance(val_fraction, bool) or not 0 < val_fraction < 1:
            raise ConfigError(f"task.val_fraction must be a number in (0, 1), got {val_fraction!r}")
        _bin_count(bin_ms, duration_ms)
        train, test, where = _load(source, seed, synthetic_samples, data_dir)
        binned = [bin_spikes(s, bin_ms, duration_ms, channel_pool) for s in (train, test)]
        n_train = len(train)
        sizes = np.concatenate([np.diff(b.offsets) for b in binned])
        starts = np.concatenate([binned[0].offsets[:-1], binned[1].offsets[:-1] + binned[0].offsets[-1]])
        max_spikes = max(int(sizes.max(initial=0)), 1)
        cells = np.concatenate([binned[0].cells, binned[1].cells, np.zeros(max_spikes, np.int32)])
        order = np.random.default_rng(seed).permutation(n_train)
        n_val = int(round(val_fraction * n_train))
        if n_val < 1 or n_val >= n_train:
            raise ConfigError(f"task.val_fraction = {val_fraction} leaves an empty train or validation split "
                              f"of the {n_train} training samples")
        test_idx = np.arange(n_train, n_train + len(test))
        unseen = ~np.isin(test.speakers, np.unique(train.speakers))
        splits = {"train": np.sort(order[n_val:]), "validation": np.sort(order[:n_val]), "test": test_idx,
                  "heldout": test_idx[unseen]}
        self.cells = jnp.asarray(cells)
        self.starts, self.sizes = jnp.asarray(starts, jnp.int32), jnp.asarray(sizes, jnp.int32)
        self.labels = jnp.asarray(np.concatenate([train.labels, test.labels]), jnp.int32)
        self.speakers = jnp.asarray(np.concatenate([train.speakers, test.speakers]), jnp.int32)
        self.splits = {k: jnp.asarray(v, jnp.int32) for k, v in splits.items()}
        self.bins, self.channels, self.max_spikes, self.binary = binned[0].bins, binned[0].channels, max_spikes, binary
        self.source = where
        self.input_size = self.channels
        return train.labels[splits["train"]]

    def dense(self, index: Array) -> Array:
        """Sample ``index``'s binned input ``[bins, channels]`` (counts, or 0/1 if ``binary``)."""
        k = jnp.arange(self.max_spikes)
        cells = self.cells[self.starts[index] + k]
        valid = (k < self.sizes[index]).astype(jnp.float32)  # the padding after the sample's spikes adds 0
        grid = jnp.zeros(self.bins * self.channels, jnp.float32).at[cells].add(valid)
        grid = jnp.minimum(grid, 1.0) if self.binary else grid
        return grid.reshape(self.bins, self.channels)

    def draw(self, key, batch_size: int, split: str) -> Array:
        """``batch_size`` sample indices drawn uniformly, with replacement, from ``split``."""
        if split not in SPLITS:
            raise ConfigError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        pool = self.splits[split]
        if pool.shape[0] == 0:
            raise ConfigError(f"the {split!r} split of {self.source} is empty"
                              + (" (no test speaker is absent from the training file)" if split == "heldout" else ""))
        return pool[jax.random.randint(key, (batch_size,), 0, pool.shape[0])]

    def describe(self) -> str:
        n = {k: int(v.shape[0]) for k, v in self.splits.items()}
        return (f"{type(self).__name__} (T={self.length}, {self.channels} channels, {n['train']} train / "
                f"{n['validation']} validation / {n['test']} test ({n['heldout']} held-out speakers), {self.source}; "
                f"loss {self.loss}, chance {self.chance:.3g})")


@register("task", "shd", "Spiking Heidelberg Digits: classify a spoken digit, 20 classes (synthetic if files absent)")
class SHDTask(SpikingDigits):
    """Classify one SHD sample (20 classes: 10 digits × 2 languages) at its last bin; see the module docstring."""

    def __init__(self, *, bin_ms: float = 10.0, duration_ms: float = 1000.0, channel_pool: int = 1,
                 binary: bool = False, val_fraction: float = 0.2, seed: int = 0,
                 source: Literal["auto", "file", "synthetic"] = "auto", synthetic_samples: int = 4000,
                 data_dir: str | None = None):
        labels = self._setup(bin_ms, duration_ms, channel_pool, binary, val_fraction, seed, source,
                             synthetic_samples, data_dir)
        self.output_size, self.length, self.loss = CLASSES, self.bins, "ce_last"
        self.chance = float(np.bincount(labels, minlength=CLASSES).max() / len(labels))

    def batch(self, key, batch_size, split="train"):
        idx = self.draw(key, batch_size, split)
        mask = jnp.zeros((batch_size, self.length)).at[:, -1].set(1.0)
        return jax.vmap(self.dense)(idx), self.labels[idx], mask


@register("task", "shd-adding", "SHD-Adding: two spoken digits end to end, predict their sum (19 classes)")
class SHDAddingTask(SpikingDigits):
    r"""Two SHD samples end to end in time; the target is the sum of their digits, $(l_1 \bmod 10) + (l_2 \bmod 10)$.

    Input ``[2 T, channels]`` with $T$ = ``duration_ms / bin_ms`` bins per digit, scored at the
    last step; both samples come from the same split. See the module docstring.
    """

    def __init__(self, *, bin_ms: float = 10.0, duration_ms: float = 1000.0, channel_pool: int = 1,
                 binary: bool = False, val_fraction: float = 0.2, seed: int = 0,
                 source: Literal["auto", "file", "synthetic"] = "auto", synthetic_samples: int = 4000,
                 data_dir: str | None = None):
        labels = self._setup(bin_ms, duration_ms, channel_pool, binary, val_fraction, seed, source,
                             synthetic_samples, data_dir)
        self.output_size, self.length, self.loss = 19, 2 * self.bins, "ce_last"
        digits = np.bincount(labels % 10, minlength=10) / len(labels)
        self.chance = float(np.convolve(digits, digits).max())

    def batch(self, key, batch_size, split="train"):
        k1, k2 = jax.random.split(key)
        first, second = self.draw(k1, batch_size, split), self.draw(k2, batch_size, split)
        x = jnp.concatenate([jax.vmap(self.dense)(first), jax.vmap(self.dense)(second)], axis=1)
        y = self.labels[first] % 10 + self.labels[second] % 10
        mask = jnp.zeros((batch_size, self.length)).at[:, -1].set(1.0)
        return x, y, mask
