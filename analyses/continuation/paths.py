r"""The paths of a continuation: the one scalar $p$ that the state map $F(h; p)$ is followed along.

A path is one frozen value, like the input protocol ([`dynlab.analyses.protocol`][]):

| value | TOML (`path = ...`) / command line (`--path ...`) | $F(h; p)$ |
|---|---|---|
| [`InputPath`][]`(channel=0)` | `{channel = 0}` / `channel=0` | $F(h, x_0 + p\,e_c)$ |
| [`InputPath`][]`(direction=d)` | `{direction = [1.0, -1.0, 0.0]}` / `direction=[1.0,-1.0,0.0]` | $F(h, x_0 + p\,d)$ |
| [`ParameterPath`][]`(name, index=i)` | `{parameter = "cells.0.b_h", index = [3], span = [-2, 2]}` | $F_{\theta_i = p}(h, x_0)$ |
| [`ParameterPath`][]`(name, scale=True)` | `{parameter = "cells.0.w_hh", scale = true, span = [0, 2]}` | $F_{\theta = p\,\theta^{(0)}}(h, x_0)$ |
| [`HomotopyPath`][]`(run)` | `{homotopy = "runs/init"}` / `homotopy="runs/init"` | $F_{(1-p)\theta_a + p\,\theta_b}(h, x_0)$ |
| [`HomotopyPath`][]`("init")` | `{homotopy = "init"}` / `homotopy=init` | the same, $\theta_a$ the analysed run's initial model |

$x_0$ is the input held along the path (`base`, one number per input channel; zero by
default); the drive $\xi$ is zero. An input path's channel is any input channel, the context cue
of a context-integration task among them. A parameter is named by its path in the model as
``jax.tree_util.keystr`` writes it without the leading dot (``cells[0].w_hh``) or with dots only
(``cells.0.w_hh``, which needs no quotes on the command line); a scalar parameter is set to $p$,
an entry of an array (``index``) is set to $p$, and a whole array with ``scale = true`` is
$p$ times its value in the model. A homotopy goes from the model of the run directory
``homotopy`` ($\theta_a$, $p = 0$) to the analysed model ($\theta_b$, $p = 1$), every
floating-point array interpolated: two checkpoints of one training, or with ``homotopy = "init"``
(a reserved word: a run directory named ``init`` is written ``./init``) ``init``$\to$``trained``,
$\theta_a$ being the model the analysed run started from. That model is rebuilt from the run's
config and seed (``dynlab train`` draws its initial weights from the seed alone, so the rebuilt arrays
are the ones training began with, to the bit), or is a study cell's own stage-``init`` model; an
imported run, whose initial weights dynlab never saw, is refused.

Every path has a `span` $[p_{\min}, p_{\max}]$ the branches are followed in and a `start` $p_0$
where the seeds are found ([`Family.start`][]): an input path's default span is $[-1, 1]$ from
$p_0 = 0$, a homotopy's $[0, 1]$ from $p_0 = 1$ (the analysed model); a parameter path names its
span, and starts where the model's parameter is (1 for a scaled array).

**Enforces** one check per field, in the constructors (a span two finite numbers in increasing
order, a start inside it, a channel an integer $\ge 0$, a direction finite and not zero), and in
[`ContinuationPath.check`][] what needs the model, before any work: a channel or direction that
fits the model's inputs, a parameter name that exists (the existing names listed, briefly) with an
index inside it, two models of one architecture in a homotopy. Each is one
[`ConfigError`][dynlab.errors.ConfigError] line.
"""

from __future__ import annotations

import abc
import dataclasses
import math
import re
from pathlib import Path
from typing import Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from dynlab.errors import ConfigError
from dynlab.option_groups import OptionGroup

__all__ = ["INIT", "ContinuationPath", "Family", "HomotopyPath", "InputPath", "ParameterPath", "parameter_names"]

VALID = ("{channel = C} or {direction = [D1, D2, ...]} (an input), {parameter = \"NAME\", index = [I, ...], "
         "span = [LO, HI]} or {parameter = \"NAME\", scale = true, span = [LO, HI]} (a model parameter), "
         "{homotopy = \"RUN_DIR\"} (from that run's model to this one) or {homotopy = \"init\"} (from this run's initial "
         "model)")
INIT = "init"


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _numbers(name: str, value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
    if not items:
        raise ConfigError(f"{name} must be one or more numbers, got an empty list")
    return tuple(_number(name, v) for v in items)


def _span(value: Any) -> tuple[float, float]:
    items = list(value) if isinstance(value, (list, tuple, np.ndarray)) else [value]
    if len(items) != 2:
        raise ConfigError(f"span must be two numbers [LO, HI], got {value!r}")
    lo, hi = (_number("span", v) for v in items)
    if not lo < hi:
        raise ConfigError(f"span must be an increasing range [LO, HI] with LO < HI, got [{lo:g}, {hi:g}] (an empty range)")
    return lo, hi


def _integer(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class Family:
    r"""A path applied to one model: the one-parameter family of flat state maps the core follows.

    ``F(h, p)`` is $F(h; p)$ on the flat state (JAX-traceable in both), ``readout(h, p)`` the
    model's read-out $y$ at state $h$ and parameter $p$, ``model_at(p)`` the model there (a
    concrete model, for visiting states), ``input_at(p)`` the input $x(p)$, ``start`` $p_0$ and
    ``span`` $[p_{\min}, p_{\max}]$, ``symbol`` the parameter's name in words (``u``, ``b_h[3]``).
    """

    F: Callable
    readout: Callable
    model_at: Callable
    input_at: Callable
    start: float
    span: tuple[float, float]
    symbol: str


def _flat(model):
    """``(step(h, x) -> h', readout(h, x) -> y)`` of ``model`` on the flat state, zero drive."""
    unravel = ravel_pytree(model.init_state())[1]

    def step(h, x):
        state, _ = model.step(unravel(h), x, jnp.zeros((), h.dtype))
        return ravel_pytree(state)[0]

    def readout(h, x):
        return model.step(unravel(h), x, jnp.zeros((), h.dtype))[1]

    return step, readout


class ContinuationPath(OptionGroup):
    """Base of the paths: the family of maps along $p$ ([`family`][dynlab.analyses.continuation.paths.ContinuationPath.family]), and what to call it."""

    span: tuple[float, float] | None
    start: float | None
    base: tuple[float, ...] | None

    @classmethod
    def parse(cls, value: Any, *, default: OptionGroup | None = None) -> ContinuationPath:
        """A path from its TOML table (see the module); a value as itself."""
        if isinstance(value, ContinuationPath):
            return value
        if not isinstance(value, dict) or not value:
            raise ConfigError(f"the path must be {VALID}; got {value!r}")
        kind = next((k for k in ("channel", "direction", "parameter", "homotopy") if k in value), None)
        allowed = {"channel": {"channel", "base", "span", "start"}, "direction": {"direction", "base", "span", "start"},
                   "parameter": {"parameter", "index", "scale", "base", "span", "start"},
                   "homotopy": {"homotopy", "base", "span", "start"}}.get(kind, set())
        unknown = sorted(set(value) - allowed)
        if kind is None or unknown:
            raise ConfigError(f"the path must be {VALID}; got {value!r}"
                              + (f" ({', '.join(unknown)} does not go with {kind})" if kind and unknown else ""))
        if kind in ("channel", "direction"):
            return InputPath(**value)
        if kind == "parameter":
            if "span" not in value:
                raise ConfigError(f"a parameter path names its range: add span = [LO, HI] to {value!r}")
            return ParameterPath(value["parameter"], **{k: v for k, v in value.items() if k != "parameter"})
        return HomotopyPath(value["homotopy"], **{k: v for k, v in value.items() if k != "homotopy"})

    def _check_range(self) -> None:
        """``base``, ``span`` and ``start`` (when given) as numbers, the start inside the span; one
        [`ConfigError`][dynlab.errors.ConfigError] line otherwise."""
        object.__setattr__(self, "base", _numbers("base", self.base))
        object.__setattr__(self, "span", _span(self.span))
        if self.start is not None:
            start = _number("start", self.start)
            if not self.span[0] <= start <= self.span[1]:
                raise ConfigError(f"start = {start:g} lies outside span [{self.span[0]:g}, {self.span[1]:g}]")
            object.__setattr__(self, "start", start)

    def _check_base(self, model) -> None:
        if self.base is not None and len(self.base) != model.input_size:
            raise ConfigError(f"the path's base gives {len(self.base)} input value(s) but the model has "
                              f"{model.input_size} input channel(s); give {model.input_size} numbers")

    def _base(self, model, dtype) -> jax.Array:
        return jnp.zeros(model.input_size, dtype) if self.base is None else jnp.asarray(self.base, dtype)

    @abc.abstractmethod
    def check(self, model) -> None:
        """What this path needs of ``model`` (which may be abstract: shapes only), before any work;
        one [`ConfigError`][dynlab.errors.ConfigError] line otherwise."""

    @abc.abstractmethod
    def family(self, model) -> Family:
        """The [`Family`][] of ``model`` along this path (``model`` concrete, its arrays in the dtype to work in)."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The path in words, for a dataset's ``path`` attr."""


@dataclasses.dataclass(frozen=True)
class InputPath(ContinuationPath):
    r"""The constant input $x(p) = x_0 + p\,d$: $d = e_c$, the input channel `channel`, or the
    vector `direction` (one number per input channel); $x_0$ = `base` (zero if not given)."""

    channel: int | None = None
    direction: tuple[float, ...] | None = None
    base: tuple[float, ...] | None = None
    span: tuple[float, float] = (-1.0, 1.0)
    start: float = 0.0

    def __post_init__(self):
        if (self.channel is None) == (self.direction is None):
            raise ConfigError("an input path has either a channel or a direction, e.g. {channel = 0} or "
                              "{direction = [1.0, 0.0, 0.0]}")
        if self.channel is not None:
            object.__setattr__(self, "channel", _integer("channel", self.channel))
        else:
            direction = _numbers("direction", self.direction)
            if not any(direction):
                raise ConfigError("direction must not be zero: the input would not move along the path")
            object.__setattr__(self, "direction", direction)
        self._check_range()

    def check(self, model) -> None:
        if self.channel is not None and self.channel >= model.input_size:
            raise ConfigError(f"channel = {self.channel} is not an input channel of this model, which has "
                              f"{model.input_size}: use 0 <= channel <= {model.input_size - 1}")
        if self.direction is not None and len(self.direction) != model.input_size:
            raise ConfigError(f"direction has {len(self.direction)} component(s) but the model has "
                              f"{model.input_size} input channel(s); give {model.input_size} numbers")
        self._check_base(model)

    def family(self, model) -> Family:
        self.check(model)
        dtype = ravel_pytree(model.init_state())[0].dtype
        x0 = self._base(model, dtype)
        d = (jnp.zeros(model.input_size, dtype).at[self.channel].set(1.0) if self.channel is not None
             else jnp.asarray(self.direction, dtype))
        step, readout = _flat(model)
        return Family(F=lambda h, p: step(h, x0 + p * d), readout=lambda h, p: readout(h, x0 + p * d),
                      model_at=lambda p: model, input_at=lambda p: x0 + p * d, start=self.start, span=self.span,
                      symbol="u" if self.channel is not None else "s")

    @property
    def name(self) -> str:
        where = f"input channel {self.channel}" if self.channel is not None else \
            "input direction [" + ", ".join(f"{v:g}" for v in self.direction) + "]"
        base = "" if self.base is None else " from [" + ", ".join(f"{v:g}" for v in self.base) + "]"
        return f"{where}{base}, p in [{self.span[0]:g}, {self.span[1]:g}] from {self.start:g}"


def _key_name(path) -> str:
    return jax.tree_util.keystr(path).lstrip(".")


def _dotted(name: str) -> str:
    """``cells[0].w_hh`` and ``cells.0.w_hh`` as one spelling (the dotted one)."""
    return re.sub(r"\[(\d+)\]", r".\1", name).replace("['", ".").replace("']", "").lstrip(".")


def _floating(leaf) -> bool:
    dtype = getattr(leaf, "dtype", None)
    return dtype is not None and jnp.issubdtype(dtype, jnp.floating)


def parameter_names(model) -> dict[str, Any]:
    """The model's floating-point arrays by name (``cells[0].w_hh``): what a parameter path can name."""
    return {_key_name(path): leaf for path, leaf in jax.tree_util.tree_flatten_with_path(model)[0] if _floating(leaf)}


def _leaf(model, name: str) -> tuple[str, Any]:
    names = parameter_names(model)
    found = next((n for n in names if _dotted(n) == _dotted(name)), None)
    if found is None:
        listed = sorted(names)
        shown = ", ".join(listed[:8]) + (f", ... ({len(listed)} in all)" if len(listed) > 8 else "")
        raise ConfigError(f"parameter {name!r} is not a parameter of this model; its parameters are {shown}")
    return found, names[found]


def _where(name: str):
    """``model -> leaf`` for ``equinox.tree_at``: the leaf named ``name``."""

    def where(model):
        return next(leaf for path, leaf in jax.tree_util.tree_flatten_with_path(model)[0] if _key_name(path) == name)

    return where


@dataclasses.dataclass(frozen=True)
class ParameterPath(ContinuationPath):
    r"""A model parameter along $p$: the scalar or the entry `index` of the array `parameter` set to
    $p$, or (`scale`) the whole array $p\,\theta^{(0)}$; the input held at $x_0$ = `base`.
    `start` defaults to the parameter's value in the model (1 for a scaled array)."""

    parameter: str
    index: tuple[int, ...] | None = None
    scale: bool = False
    base: tuple[float, ...] | None = None
    span: tuple[float, float] | None = None
    start: float | None = None

    def __post_init__(self):
        if not isinstance(self.parameter, str) or not self.parameter:
            raise ConfigError(f"parameter must be the name of a model parameter, e.g. \"cells.0.b_h\"; got {self.parameter!r}")
        if not isinstance(self.scale, bool):
            raise ConfigError(f"scale must be true or false, got {self.scale!r}")
        if self.index is not None:
            items = list(self.index) if isinstance(self.index, (list, tuple)) else [self.index]
            object.__setattr__(self, "index", tuple(_integer("index", i) for i in items))
            if self.scale:
                raise ConfigError("a parameter path either sets one entry (index) or scales the whole array (scale = true), not both")
        if self.span is None:
            raise ConfigError(f"a parameter path names its range: span = [LO, HI] for {self.parameter!r}")
        self._check_range()

    def check(self, model) -> None:
        self._check_base(model)
        name, leaf = _leaf(model, self.parameter)
        shape = tuple(leaf.shape)
        if self.scale:
            return
        if self.index is None and shape != ():
            raise ConfigError(f"parameter {name!r} is an array of shape {shape}: name an entry with index = "
                              f"[{', '.join('I' for _ in shape)}] or scale the whole array with scale = true")
        if self.index is not None and (len(self.index) != len(shape) or any(i >= n for i, n in zip(self.index, shape))):
            raise ConfigError(f"index = {list(self.index)} is not an entry of parameter {name!r} of shape {shape}; "
                              f"give {len(shape)} integer(s) with 0 <= index < {list(shape)}")

    def _start(self, leaf) -> float:
        if self.start is not None:
            return self.start
        value = 1.0 if self.scale else float(np.asarray(leaf)[self.index or ()])
        if not self.span[0] <= value <= self.span[1]:
            raise ConfigError(f"parameter {self.parameter!r} is {value:g} in this model, outside span "
                              f"[{self.span[0]:g}, {self.span[1]:g}]: widen the span or give start")
        return value

    def family(self, model) -> Family:
        self.check(model)
        name, leaf = _leaf(model, self.parameter)
        start = self._start(leaf)
        where = _where(name)
        dtype = ravel_pytree(model.init_state())[0].dtype

        def model_at(p):
            value = p * leaf if self.scale else (leaf.at[self.index].set(p) if self.index else jnp.asarray(p, leaf.dtype))
            return eqx.tree_at(where, model, value)

        x0 = self._base(model, dtype)

        def F(h, p):
            return _flat(model_at(p))[0](h, x0)

        def readout(h, p):
            return _flat(model_at(p))[1](h, x0)

        symbol = name + ("" if not self.index else "[" + ",".join(map(str, self.index)) + "]") + (" scale" if self.scale else "")
        return Family(F=F, readout=readout, model_at=model_at, input_at=lambda p: x0, start=start, span=self.span,
                      symbol=symbol)

    @property
    def name(self) -> str:
        what = (f"parameter {self.parameter} scaled by p" if self.scale else
                f"parameter {self.parameter}" + ("" if self.index is None else f"[{', '.join(map(str, self.index))}]") + " = p")
        return f"{what}, p in [{self.span[0]:g}, {self.span[1]:g}]" + ("" if self.start is None else f" from {self.start:g}")


def _is_array(x) -> bool:
    """An array of the model, concrete or abstract (``jax.ShapeDtypeStruct``: a check on shapes only)."""
    return isinstance(x, (jax.Array, jax.ShapeDtypeStruct, np.ndarray))


def _run_model(run: str, model=None):
    """The model stored in the run directory ``run`` (abstract, shapes only, when ``model`` is
    abstract); a one-line error when it is not a run directory."""
    from dynlab import experiment, store
    from dynlab.errors import CheckpointError

    if not (Path(run) / "config.toml").is_file():
        raise ConfigError(f"homotopy = {run!r} is not a run directory (no config.toml there); give the run "
                          "directory of the model at p = 0")
    if model is not None and any(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(model)):
        config = store.read_config(run)
        try:
            return experiment.build(config, training=False, weights=False).model
        except ConfigError as e:
            raise CheckpointError(f"the config.toml of {run!r} is not valid: {e}") from None
    return experiment.load_run(run).model


def _same_architecture(a, b, run: str) -> None:
    """**Enforces** that a homotopy's two models have the same arrays, by name, of the same shapes."""
    arrays_a = jax.tree_util.tree_flatten_with_path(eqx.filter(a, _is_array))[0]
    arrays_b = jax.tree_util.tree_flatten_with_path(eqx.filter(b, _is_array))[0]
    if [_key_name(p) for p, _ in arrays_a] != [_key_name(p) for p, _ in arrays_b]:
        raise ConfigError(f"homotopy: the model of {run!r} is not of this model's architecture (other arrays: another "
                          "unit or layer structure); both ends must be models of one architecture")
    for (path, x), (_, y) in zip(arrays_a, arrays_b):
        if tuple(x.shape) != tuple(y.shape):
            raise ConfigError(f"homotopy: {_key_name(path)} has shape {tuple(x.shape)} in {run!r} but "
                              f"{tuple(y.shape)} in this model; both ends must be models of one architecture")


@dataclasses.dataclass(frozen=True)
class HomotopyPath(ContinuationPath):
    r"""The homotopy $\theta(p) = (1 - p)\,\theta_a + p\,\theta_b$ from the model of the run
    directory `homotopy` ($\theta_a$) to the analysed model ($\theta_b$), every floating-point
    array interpolated; the input held at $x_0$ = `base`. With `homotopy` = [`INIT`][], $\theta_a$ is
    the analysed run's initial model: `initial` returns it, bound by whoever knows the run
    ([`with_initial`][dynlab.analyses.continuation.paths.HomotopyPath.with_initial]: ``dynlab analyze``,
    a study's cell, ``dynlab.analyze``)."""

    homotopy: str
    base: tuple[float, ...] | None = None
    span: tuple[float, float] = (0.0, 1.0)
    start: float = 1.0
    initial: Callable[[], Any] | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if not isinstance(self.homotopy, str) or not self.homotopy:
            raise ConfigError(f"homotopy must be a run directory (the model at p = 0) or \"{INIT}\", got {self.homotopy!r}")
        self._check_range()

    def with_initial(self, initial: Callable[[], Any] | None) -> HomotopyPath:
        """This path with the analysed run's initial model (a function that makes it: built only if
        the path is followed) for `homotopy` = [`INIT`][]; any other path as itself."""
        return dataclasses.replace(self, initial=initial) if self.homotopy == INIT else self

    def check(self, model) -> None:
        self._check_base(model)
        if self.homotopy != INIT:  # the run's own initial model is of its architecture
            _same_architecture(_run_model(self.homotopy, model), model, self.homotopy)

    def _model_a(self):
        if self.homotopy != INIT:
            return _run_model(self.homotopy)
        if self.initial is None:
            raise ConfigError(f"homotopy = \"{INIT}\" needs the run the model was trained in: analyse it with dynlab "
                              "analyze --checkpoint RUN, in a study or with dynlab.analyze, or give the run directory "
                              "of a model saved at step 0")
        return self.initial()

    def family(self, model) -> Family:
        self.check(model)
        other = self._model_a()
        arrays_b, static = eqx.partition(model, eqx.is_inexact_array)
        arrays_a = jax.tree.map(lambda a, b: jnp.asarray(a, b.dtype), eqx.filter(other, eqx.is_inexact_array), arrays_b)
        dtype = ravel_pytree(model.init_state())[0].dtype
        x0 = self._base(model, dtype)

        def model_at(p):
            return eqx.combine(jax.tree.map(lambda a, b: (1 - p) * a + p * b, arrays_a, arrays_b), static)

        return Family(F=lambda h, p: _flat(model_at(p))[0](h, x0), readout=lambda h, p: _flat(model_at(p))[1](h, x0),
                      model_at=model_at, input_at=lambda p: x0, start=self.start, span=self.span, symbol="p")

    @property
    def name(self) -> str:
        origin = "this run's initial model" if self.homotopy == INIT else self.homotopy
        return f"homotopy from {origin} (p = 0) to this model (p = 1), p in [{self.span[0]:g}, {self.span[1]:g}] " \
               f"from {self.start:g}"
