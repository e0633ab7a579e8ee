"""The memory budget: the bytes a run or an analysis will allocate, estimated from shapes before
anything is allocated, against the memory this process may use.

**Enforces** "sizes are checked before any allocation" (DESIGN §6): a config whose shapes would
not fit is one line naming the size to lower, the estimate and the limit, e.g.

    task.length=1000000000 needs about 4.1 TB for one training step (limit 21 GB: available memory); lower task.length

and XLA never sees a shape that would abort it. The estimates are **shape-based upper bounds**,
computed abstractly (``equinox.filter_eval_shape``: no array is made):

- training ([`check_training`][]): parameters x 4 (parameters, gradients, two optimiser
  moments), plus the training and held-out batches (``B x T x D`` inputs and targets), plus
  3 x the training batch's trajectory (outputs and every layer's state at every step: BPTT
  keeps them, and its backward pass needs as much again for cotangents and intermediates) and
  1 x the held-out batch's (evaluation runs forward only); one sample is traced and the
  result scaled by the batch sizes;
- an analysis ([`check_analysis`][]): the model's parameters, plus ``(burn_in + steps) x`` one
  step's state, input and output, times the independent runs the options ask for
  (``realisations``, ``samples``, ``k`` tangent vectors, ``n_boot`` resamples);
- a dense layer of width ``N`` ([`dense_bytes`][]): ``N^2`` weights;
- a teacher ([`check_teacher`][]): its arrays, plus the trials its task runs at once.

An estimate may be several times the true peak (XLA fuses and frees); it is never much below
it for the shapes it knows. An allocation a plug-in makes beyond them that still fails is one
line too (``dynlab.cli.main``). The limit ([`limit`][]) is the smallest of the memory
available now (``MemAvailable``, or on an accelerator its free device memory), the address
space left under ``RLIMIT_AS`` when one is set, and ``$DYNLAB_MEMORY_LIMIT`` (bytes, or with a
unit: ``8GB``, ``512MiB``) when given.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, Callable

from dynlab.errors import ConfigError

ENV = "DYNLAB_MEMORY_LIMIT"
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def human(nbytes: float) -> str:
    """``nbytes`` in decimal units, two significant digits: ``4.1 TB``, ``800 GB``, ``12 MB``."""
    for unit, size in (("EB", 1e18), ("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= size:
            value = nbytes / size
            return f"{value:.2g} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{int(nbytes)} B"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _address_space_left() -> int | None:
    """``RLIMIT_AS`` less the address space this process already maps (``None``: no limit)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    used = 0
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except OSError:
        pass
    return max(soft - used, 0)


def _device_free() -> int | None:
    """Free memory of the default accelerator (``None`` on the CPU or when JAX cannot say)."""
    try:
        import jax

        device = jax.devices()[0]
        if device.platform == "cpu":
            return None
        stats = device.memory_stats() or {}
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    except Exception:  # noqa: BLE001 - no stats is no limit from the device
        return None


def _env_limit() -> int | None:
    text = os.environ.get(ENV)
    if not text:
        return None
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ConfigError(f"${ENV}={text!r} is not a size: give bytes, or a number with a unit "
                          f"(e.g. 8GB, 512MiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def limit() -> tuple[int, str]:
    """The bytes a computation may allocate, and where that limit comes from (see the module)."""
    device = _device_free()
    candidates = [(v, name) for v, name in (
        (device, "free device memory") if device is not None else (_meminfo_available(), "available memory"),
        (_address_space_left(), "address space left under RLIMIT_AS"),
        (_env_limit(), f"${ENV}"),
    ) if v is not None]
    if not candidates:
        return 2**63, "no known limit"
    return min(candidates)


def cores() -> int:
    """The CPU cores this process may use (its affinity where the system has one, else every core)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def require(nbytes: int, *, size: str, what: str, lower: str | None = None) -> None:
    """Raise [`ConfigError`][] when ``nbytes`` (the estimate of ``what``, driven by ``size``,
    e.g. ``"task.length=1000000000"``) exceeds the [`limit`][]; the message names the size,
    the estimate, the limit and what to lower (by default the key of ``size``)."""
    available, source = limit()
    if nbytes > available:
        key = lower or (size.split("=", 1)[0] if "=" in size else "the trial length (through the task's keys that set it)")
        raise ConfigError(f"{size} needs about {human(nbytes)} for {what} (limit {human(available)}: {source}); "
                          f"lower {key}")


def tree_bytes(tree: Any) -> int:
    """Bytes of every array (or ``jax.ShapeDtypeStruct``) leaf of ``tree``, as a Python int."""
    import jax
    import numpy as np

    total = 0
    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            total += math.prod(int(n) for n in leaf.shape) * np.dtype(leaf.dtype).itemsize
    return total


def _abstract(fn: Callable, *args, what: str, size: str) -> Any:
    """``equinox.filter_eval_shape(fn, *args)``; a size too large even to describe (JAX's
    int32 shape arithmetic overflows) is a [`ConfigError`][] naming ``size``."""
    import equinox as eqx
    from jax._src import config as jax_config  # JAX has no public way back out of ensure_compile_time_eval

    try:
        # Abstract even inside ``jax.ensure_compile_time_eval`` (a teacher trained while a config is
        # checked), which would run every operation on constants: XLA aborts the process on an
        # allocation it cannot make (task.hidden=1000000), and small ones compile 50 programs.
        with jax_config.eager_constant_folding(False):
            return eqx.filter_eval_shape(fn, *args)
    except OverflowError:
        # not JAX's message, which prints the overflowing size in full (300 digits for task.dt=1e-300)
        raise ConfigError(f"{size} is too large to build {what} (its sizes overflow); lower "
                          f"{size.split('=', 1)[0] if '=' in size else 'the trial length'}") from None


def largest_size(config: dict, keys: tuple[str, ...] = ("model", "task")) -> str:
    """``"section.key=value"`` of the largest integer among the ``keys`` sections of ``config``
    and ``train.batch_size`` / ``train.eval_size``: the size a refusal asks to lower."""
    found = [(v, f"{s}.{k}") for s in keys for k, v in config.get(s, {}).items()
             if isinstance(v, int) and not isinstance(v, bool) and not k.endswith("seed")]
    found += [(v, f"train.{k}") for k, v in config.get("train", {}).items()
              if k in ("batch_size", "eval_size") and isinstance(v, int) and not isinstance(v, bool)]
    if not found:
        return "model.hidden"
    value, key = max(found)
    return f"{key}={value}"


def training_bytes(build_model: Callable[[], Any], task: Any, batch_size: int, eval_size: int, *,
                   size: str) -> int:
    """The upper bound of one training step's memory (see the module), traced abstractly for one
    sample and scaled by the batch sizes: ``build_model`` makes the model."""
    import jax

    model = _abstract(build_model, what="the model", size=size)
    params = tree_bytes(model)
    sample = _abstract(lambda: task.batch(jax.random.key(0), 1, split="test"), what="a batch", size=size)
    per_sample = tree_bytes(sample)
    xs = sample[0]
    per_trajectory = 0
    if xs.ndim == 3:  # [1, T, D]: a sequence, whose states BPTT keeps
        per_trajectory = tree_bytes(_abstract(lambda x: build_model().trajectory(x[0]), xs, what="a trajectory",
                                              size=size))
    # training keeps its batch's trajectory for the backward pass (x3); evaluation runs forward only
    return 4 * params + (batch_size + eval_size) * per_sample + (3 * batch_size + eval_size) * per_trajectory


def check_training(config: dict, task: Any, build_model: Callable[[], Any], *, training: bool = True) -> None:
    """Refuse ``config`` ([`require`][]) when one training step would not fit (without
    ``training``: when the model's parameters would not); ``build_model`` makes the (seeded)
    model and is only traced here, never run."""
    from dynlab.train import TrainConfig

    size = largest_size(config)
    length = getattr(task, "length", None)
    value = size.partition("=")[2]
    if isinstance(length, int) and (not value.isdigit() or length > int(value)):
        # the trial length drives the size, though the config may set it through others (task.dt)
        size = f"task.length={length}" if "length" in config.get("task", {}) else f"a trial of {length:,} steps"
    key = _estimate_key(config, training)
    nbytes = _ESTIMATES.get(key)
    if nbytes is None:
        if not training:
            nbytes = tree_bytes(_abstract(build_model, what="the model", size=size))
        else:
            train = config.get("train", {})
            nbytes = training_bytes(build_model, task, train.get("batch_size", TrainConfig.batch_size),
                                    train.get("eval_size", TrainConfig.eval_size), size=size)
        if key is not None:
            _ESTIMATES[key] = nbytes
    require(nbytes, size=size, what="one training step (parameters, a batch and its trajectory)" if training
            else "the model's parameters")


_ESTIMATES: dict[tuple[str, bool], int] = {}
"""The estimates [`check_training`][] has traced in this process, by config (its text less the
seed, which changes no shape) and ``training``. A config is traced once: checking a study, then
building each of its cells and each model an analysis loads, traced it again each time (the test
suite's abstract traces, of every kind: 2,538 in 83 s before this cache, 1,859 in 68 s after)."""


def _estimate_key(config: dict, training: bool) -> tuple[str, bool] | None:
    from dynlab.config import dumps

    try:
        return dumps({k: v for k, v in config.items() if k != "seed"}), training
    except ConfigError:  # a value TOML cannot write: not cached
        return None


def check_teacher(build_teacher: Callable[[], Any], trials: int, length: int, *, size: str) -> None:
    """Refuse a teacher ([`dynlab.teachers`][]) whose arrays, with the ``trials`` trials of
    ``length`` steps that a teacher task runs at once (its chance level), would not fit
    ([`require`][]); ``build_teacher`` is only traced here, never run, and ``size`` is the task key
    a refusal asks to lower. Called before the teacher is built: XLA aborts the process on an
    allocation it cannot make (``task.n=1000000``), and a teacher of a billion units fills the
    memory before the first error."""
    teacher = _abstract(build_teacher, what="the teacher", size=size)
    per_step = 4 * (teacher.state_size + teacher.output_size + teacher.input_size)  # float32 latents, outputs, inputs
    require(tree_bytes(teacher) + trials * length * per_step, size=size,
            what=f"the teacher (its weights and {trials} trials of {length:,} steps)")


def step_bytes(model: Any) -> int:
    """Bytes of one time step of ``model``: every layer's state, one input and one output (float32)."""
    return tree_bytes(model.init_state()) + 4 * (model.input_size + model.output_size)


def check_analysis(name: str, model: Any, options: dict) -> None:
    """Refuse an analysis whose arrays would not fit (see the module): its trajectory,
    ``max(burn_in + steps, 1)`` steps of [`step_bytes`][] for each of ``realisations`` runs and
    ``samples`` samples; ``k`` tangent vectors and one Jacobian of the state; ``n_boot``
    resampled statistics of one state's size (``k`` also inside an option group, ``qr.k``)."""
    from dynlab.option_groups import OptionGroup

    inner = {k: v for value in options.values() if isinstance(value, OptionGroup) for k, v in vars(value).items()}
    given = {k: v for k, v in {**inner, **options}.items() if isinstance(v, int) and not isinstance(v, bool)}
    steps = max(given.get("steps", 0) + given.get("burn_in", 0), 1)
    runs = max(given.get("realisations", 1), 1) * max(given.get("samples", 1), 1)
    state = tree_bytes(model.init_state())
    per_step = step_bytes(model)
    n = state // 4  # state elements (float32)
    nbytes = (tree_bytes(model) + steps * per_step * runs + (max(given.get("k", 0), 0) + n) * state
              + max(given.get("n_boot", 0), 0) * per_step)
    drivers = {k: v for k, v in given.items() if k in ("steps", "burn_in", "realisations", "samples", "k", "n_boot")}
    largest = max(drivers, key=lambda k: drivers[k], default=None)
    flag = "--" + (largest or "steps").replace("_", "-")
    require(nbytes, size=f"{flag} {drivers.get(largest, '')}".strip(), lower=flag,
            what=f"the {name} analysis ({steps:,} steps x {runs:,} runs x {human(per_step)} per step, "
                 f"a {n:,}-state Jacobian)")


def dense_bytes(widths: list[int], depth: int = 1, batch: int = 1) -> int:
    """Upper bound of a dense network's memory at its largest width ``N``: ``depth`` weight
    matrices of ``N^2`` float32 (x4: parameters, gradients, optimiser moments) and ``batch x N``
    activations per layer."""
    n = max(widths)
    return 4 * (4 * depth * n * n + 2 * depth * batch * n)


RESULT_FRACTION = 8
"""A result file may declare at most 1/8 of the [`limit`][] unless ``$DYNLAB_MEMORY_LIMIT`` is set."""


def result_limit() -> tuple[int, str]:
    """The bytes a result file ([`load_result`][]) may declare, and where that limit comes from:
    ``$DYNLAB_MEMORY_LIMIT`` when set (see [`limit`][]), else 1/[`RESULT_FRACTION`][] of the
    [`limit`][]. Results are small (an analysis's dataset is kilobytes to megabytes), and a file
    that declares gigabytes would otherwise take the memory the machine's other work is using:
    a 6 KB file declaring 4 GB was read on a machine with 23 GB available."""
    cap, source = limit()
    if _env_limit() is not None:
        return cap, source
    return cap // RESULT_FRACTION, f"1/{RESULT_FRACTION} of {source}; ${ENV} sets it"


def load_result(path):
    """Read a result file (``dynlab plot FILE``), after checking what it declares.

    **Enforces** "netCDF dimensions are checked before reading" and "nothing from a file leaves
    its directory": the file is opened lazily and the bytes its variables declare are checked
    against [`result_limit`][] before any data is read; a variable
    stored outside the file (HDF5 external storage, which would read other files' bytes) is
    refused. Each is a one-line [`DataError`][dynlab.errors.DataError].
    """
    from pathlib import Path

    import h5py
    import xarray as xr

    from dynlab.errors import DataError

    path, file = Path(path), str(path)
    try:
        with h5py.File(path, "r") as f:
            external = []
            f.visititems(lambda name, obj: external.append(name)
                         if isinstance(obj, h5py.Dataset) and obj.external is not None else None)
        if external:
            raise DataError(f"{file!r} stores {', '.join(external[:3])} in external files (HDF5 external storage); "
                            "a result file must hold its own data")
        with xr.open_dataset(path, engine="h5netcdf") as lazy:
            sizes = {name: v.nbytes for name, v in lazy.variables.items()}
            shapes = {name: dict(v.sizes) for name, v in lazy.variables.items()}
        total, (cap, source) = sum(sizes.values()), result_limit()
        if total > cap:
            biggest = max(sizes, key=sizes.get)
            raise DataError(f"{file!r} declares {human(total)} of data (variable {biggest!r}: "
                            f"{shapes[biggest]}), more than the {human(cap)} limit ({source}); not read")
        return xr.load_dataset(path, engine="h5netcdf")
    except DataError:
        raise
    except Exception as e:
        raise DataError(f"{file!r} is not a readable netCDF result file ({type(e).__name__})") from None
