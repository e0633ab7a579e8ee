r"""The input protocol of a dynamical analysis: what drives the state map $h_{t+1} = F(h_t, x_t, \xi_t)$.

$x_t \in \mathbb{R}^D$ is the model's input and $\xi_t$ the drive added to every neuron's
pre-activation ([`dynlab.analyses.state_map`][]). A protocol is one frozen value:

| value | TOML (`input = ...`) / command line (`--input ...`) | $x_t$ | $\xi_t$ |
|---|---|---|---|
| [`Autonomous`][]`()` | `"autonomous"` / `autonomous` | $0$ | $0$ |
| [`Drive`][]`(xi)` | `{drive = 1.0}` / `drive=1.0` | $0$ | $\xi$ |
| [`TaskStream`][]`(task, drive)` | `{task = "adding", drive = 0.5}` / `task=adding,drive=0.5` | the task's test inputs | `drive` (0 if none) |
| [`Noise`][]`(std, seed)` | `{noise = 0.1, seed = 3}` / `noise=0.1,seed=3` | $\mathcal N(0, \text{std}^2 I_D)$ i.i.d. | $0$ |
| [`Constant`][]`(values)` | `{constant = [1.0, 0.0, 0.0]}` / `constant=[1.0,0.0,0.0]` | $c$ on the $D$ input channels | $0$ |
| [`OwnTask`][]`()` | (the default of ``fixed-points``) | the model's own task's test inputs | $0$ |

`task = "train"` names the model's own task (a checkpoint's, with its config); another name
builds that task with its defaults. A task's stream is consecutive test samples concatenated in
time; the noise is white Gaussian input, every step and feature independent. Both are *streams*:
drawn from a key ([`Protocol.stream_key`][]), so independent realisations of an analysis
(`lyapunov`'s) get independent inputs. The noise's own `seed`, when given, fixes its draws
whatever the analysis's seed; without it the noise is drawn from the analysis's seed, as a
task's stream is (so `seed = "cell"` makes replicate cells' inputs independent).

**Enforces** one check per field, in the constructors: a drive and a noise std are finite
numbers (std > 0), a seed an integer in $[0, 2^{32})$, a task name `"train"` or a registered
task. Every spelling (TOML, command line, Python) becomes a value through them, and a bad one is
one [`ConfigError`][dynlab.errors.ConfigError] line. The older flat keys `drive` and `task`
fold into the table ([`dynlab.option_groups.fold_legacy`][]): `drive = 0.0` is
`input = {drive = 0.0}`, `task = "train"` is `input = {task = "train"}`.

A constant $c$ holds the inputs where a task only pulses them: the flip-flop's "hold bit 1 at
$+u$" is `{constant = [u, 0, 0]}`, while `{drive = u}` adds $u$ to every neuron's
pre-activation, whatever the input weights.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from dynlab.config import SEED_RANGE
from dynlab.errors import ConfigError, require_positive
from dynlab.option_groups import OptionGroup

__all__ = ["Autonomous", "Constant", "Drive", "Noise", "OwnTask", "Protocol", "TaskStream", "from_keywords"]

VALID = ('"autonomous", {drive = XI}, {task = "NAME"} (with an optional drive), {noise = STD} '
         "(with an optional seed) or {constant = [X1, X2, ...]} (one number per input channel)")


def _finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return float(value)


class Protocol(OptionGroup):
    """Base of the input protocols: ``inputs`` for a number of steps, and what to call it."""

    legacy: ClassVar[dict[str, Any]] = {"drive": float, "task": str}
    """The keys of analyses before the protocol was a value: ``drive = XI`` (``--drive XI``) and
    ``task = "NAME"`` (the common ``--task NAME``)."""

    stream: ClassVar[bool] = False
    """Do the inputs depend on a key (a task's stream, noise)? Constant inputs do not."""

    @classmethod
    def parse(cls, value: Any, *, default: OptionGroup | None = None) -> Protocol:
        """A protocol from its TOML value (a word or a table, see the module); a value as itself."""
        if isinstance(value, Protocol):
            return value
        if value == "autonomous":
            return Autonomous()
        if not isinstance(value, dict) or not value:
            raise ConfigError(f"the input protocol must be {VALID}; got {value!r}")
        kind = next((k for k in ("task", "noise", "constant", "drive") if k in value), None)
        allowed = {"task": {"task", "drive"}, "noise": {"noise", "seed"}, "constant": {"constant"},
                   "drive": {"drive"}}.get(kind, set())
        unknown = sorted(set(value) - allowed)
        if kind is None or unknown:
            raise ConfigError(f"the input protocol must be {VALID}; got {value!r}"
                              + (f" ({', '.join(unknown)} does not go with {kind})" if kind and unknown else ""))
        if kind == "task":
            return TaskStream(value["task"], value.get("drive"))
        if kind == "noise":
            return Noise(value["noise"], value.get("seed"))
        if kind == "constant":
            return Constant(value["constant"])
        return Drive(value["drive"])

    def stream_key(self, key: PRNGKeyArray | None = None, realisation: int | None = None) -> PRNGKeyArray:
        """The key a stream is drawn from: the analysis's input ``key`` (default ``key(0)``), and
        for independent realisations ``fold_in(key, realisation)``."""
        key = jax.random.key(0) if key is None else key
        return key if realisation is None else jax.random.fold_in(key, realisation)

    def check(self, model) -> None:
        """What this protocol needs of ``model`` (its input width), checked before any work; one
        [`ConfigError`][dynlab.errors.ConfigError] line otherwise. Nothing for zero input, a drive or noise."""

    def inputs(self, model, steps: int, key: PRNGKeyArray | None = None,
               realisation: int | None = None) -> tuple[Array, Array]:
        """``(x[steps, D], xi[steps])``; a stream is drawn from [`stream_key`][dynlab.analyses.protocol.Protocol.stream_key]."""
        require_positive("steps", steps)
        self.check(model)
        return jnp.zeros((steps, model.input_size)), jnp.full((steps,), self.drive_value)

    def mean_input(self, model, xs: Array) -> tuple[np.ndarray, float, str]:
        r"""$(\bar x, \bar\xi)$, the one input a fixed-point search uses, and it in words
        (``xs``: the inputs of the analysed steps)."""
        return np.zeros(model.input_size), self.drive_value, "zero input"

    @property
    def drive_value(self) -> float:
        r"""The constant drive $\xi$ (0 without one)."""
        return 0.0

    @property
    def drive_attr(self) -> float:
        """The drive as a dataset's ``drive`` attr: NaN where the protocol has none."""
        return float("nan")

    @property
    def driven(self) -> bool:
        """Does anything drive the map (other than zero input and zero drive)?"""
        return True

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The protocol in words, for a dataset's ``protocol`` attr."""


@dataclasses.dataclass(frozen=True)
class Autonomous(Protocol):
    r"""Zero input and zero drive: the autonomous map $h \mapsto F(h, 0, 0)$."""

    @property
    def driven(self) -> bool:
        return False

    @property
    def name(self) -> str:
        return "autonomous (zero input)"


@dataclasses.dataclass(frozen=True)
class Drive(Protocol):
    r"""Zero input and the constant drive $\xi$ on every neuron of every layer (``xi = 0``: the
    autonomous map, named so, with its ``drive`` attr 0)."""

    xi: float

    def __post_init__(self):
        object.__setattr__(self, "xi", _finite("drive", self.xi))

    @property
    def drive_value(self) -> float:
        return self.xi

    @property
    def drive_attr(self) -> float:
        return self.xi

    @property
    def driven(self) -> bool:
        return self.xi != 0.0

    def mean_input(self, model, xs):
        return np.zeros(model.input_size), self.xi, f"zero input, constant drive {self.xi:g}"

    @property
    def name(self) -> str:
        return f"constant drive xi={self.xi:g}" if self.driven else "autonomous (zero input)"


@dataclasses.dataclass(frozen=True)
class TaskStream(Protocol):
    """Consecutive test samples of ``task`` (a registered name, ``"train"`` for the model's own
    task, or a built [`dynlab.tasks.base.Task`][]) concatenated in time, plus the constant
    ``drive`` if given. A name is built by [`resolved`][dynlab.analyses.protocol.TaskStream.resolved]."""

    task: Any
    drive: float | None = None
    stream: ClassVar[bool] = True

    def __post_init__(self):
        from dynlab import registry
        from dynlab.tasks.base import Task

        if isinstance(self.task, str):
            if self.task != "train" and self.task not in registry.names("task"):
                registry.get("task", self.task)  # the registry's one line: unknown task, the registered ones
        elif not isinstance(self.task, Task):
            raise ConfigError(f"task must be a task name (\"train\": the model's own), got {self.task!r}")
        if self.drive is not None:
            object.__setattr__(self, "drive", _finite("drive", self.drive))

    def resolved(self, own_task) -> TaskStream:
        """This stream with its task built: ``"train"`` is ``own_task``, another name that task."""
        if not isinstance(self.task, str):
            return self
        from dynlab import registry

        task = own_task if self.task == "train" else registry.build("task", self.task)
        if task is None:
            raise ConfigError('task = "train" names the model\'s own task, and there is none here')
        return dataclasses.replace(self, task=task)

    def check(self, model) -> None:
        if not isinstance(self.task, str) and self.task.input_size != model.input_size:
            raise ConfigError(
                f"task inputs have {self.task.input_size} features but the model expects {model.input_size}"
            )

    def inputs(self, model, steps, key=None, realisation=None):
        require_positive("steps", steps)
        task = self.task
        if isinstance(task, str):
            raise ConfigError(f"the task {task!r} of the input protocol was not built (TaskStream.resolved)")
        self.check(model)
        n = -(-steps // task.length)
        x = task.batch(self.stream_key(key, realisation), n, split="test")[0]
        return x.reshape(n * task.length, -1)[:steps], jnp.full((steps,), self.drive_value)

    def mean_input(self, model, xs):
        words = "the task's mean input" + ("" if self.drive is None else f" + drive {self.drive:g}")
        return np.asarray(xs).mean(axis=0), self.drive_value, words

    @property
    def drive_value(self) -> float:
        return 0.0 if self.drive is None else self.drive

    @property
    def drive_attr(self) -> float:
        return float("nan") if self.drive is None else self.drive

    @property
    def name(self) -> str:
        task = self.task if isinstance(self.task, str) else type(self.task).__name__
        return f"task {task}" + ("" if self.drive is None else f" + drive {self.drive:g}")


@dataclasses.dataclass(frozen=True)
class Noise(Protocol):
    r"""White Gaussian input $x_t \sim \mathcal N(0, \text{std}^2 I_D)$, independent over steps and
    features, zero drive; drawn from ``key(seed)``, or from the analysis's key when ``seed`` is
    ``None``. Its mean input (for fixed points) is the noise's mean, zero."""

    std: float
    seed: int | None = None
    stream: ClassVar[bool] = True

    def __post_init__(self):
        std = _finite("noise", self.std)
        if std <= 0:
            raise ConfigError(f"noise must be a standard deviation > 0 (zero input is \"autonomous\"), got {self.std!r}")
        object.__setattr__(self, "std", std)
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                 or not SEED_RANGE[0] <= seed <= SEED_RANGE[1]):
            raise ConfigError(f"the noise's seed must be an integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}], got {seed!r}")

    def stream_key(self, key=None, realisation=None):
        return super().stream_key(key if self.seed is None else jax.random.key(self.seed), realisation)

    def inputs(self, model, steps, key=None, realisation=None):
        require_positive("steps", steps)
        return (self.std * jax.random.normal(self.stream_key(key, realisation), (steps, model.input_size)),
                jnp.zeros((steps,)))

    def mean_input(self, model, xs):
        return np.zeros(model.input_size), 0.0, "zero input (the noise's mean)"

    @property
    def name(self) -> str:
        return f"input noise std={self.std:g}" + ("" if self.seed is None else f" (seed {self.seed})")


@dataclasses.dataclass(frozen=True)
class OwnTask(TaskStream):
    r"""The model's own task's stream to visit states, and zero input for the points: Sussillo &
    Barak's (2013) prescription, and FixedPointFinder's practice. The inputs a network was trained
    on carry it through the states it uses (every corner of a flip-flop's output cube), so
    minimisations started there reach every attractor the task needs; the autonomous trajectory
    stays in the basin it starts in. Its [`mean_input`][dynlab.analyses.protocol.OwnTask.mean_input],
    the one input a fixed-point search holds, is zero (the task's mean input is
    [`TaskStream`][]'s).

    [`resolved`][dynlab.analyses.protocol.OwnTask.resolved] makes it the stream of the model's task,
    or [`Autonomous`][] where there is none (a fresh model built in Python without a task). The
    default of ``fixed-points``; no TOML spelling of its own: ``input = {task = "train"}`` with
    ``at = "zero"`` is the same search spelt out."""

    task: Any = "train"

    def __post_init__(self):
        super().__post_init__()
        if self.drive is not None:
            raise ConfigError("the model's own task's stream takes no drive; use input = {task = \"train\", drive = XI}")

    def resolved(self, own_task) -> Protocol:
        """The stream of ``own_task`` (the model's task), or [`Autonomous`][] when it is ``None``."""
        if not isinstance(self.task, str):
            return self
        return Autonomous() if own_task is None else dataclasses.replace(self, task=own_task)

    def mean_input(self, model, xs):
        return np.zeros(model.input_size), 0.0, "zero input"

    @property
    def name(self) -> str:
        task = self.task if isinstance(self.task, str) else type(self.task).__name__
        return f"states visited under the model's task ({task})"

    def __str__(self) -> str:
        return "the model's own task (its inputs visit the states; points at zero input), autonomous without one"


@dataclasses.dataclass(frozen=True)
class Constant(Protocol):
    r"""The constant input $x_t = c$ on the model's $D$ input channels, zero drive: the flip-flop's
    "hold bit 1 at $+u$" is ``Constant([u, 0, 0])``. Its mean input (for fixed points) is $c$.
    ``values`` is one finite number per input channel (a number alone is one channel);
    [`check`][dynlab.analyses.protocol.Constant.check] compares their count with the model's inputs."""

    values: tuple[float, ...]

    def __post_init__(self):
        raw = self.values
        items = list(raw) if isinstance(raw, (list, tuple, np.ndarray)) else [raw]
        if not items:
            raise ConfigError("constant must be one number per input channel, e.g. {constant = [1.0, 0.0, 0.0]}; "
                              "got an empty list")
        object.__setattr__(self, "values", tuple(_finite("constant", v) for v in items))

    def check(self, model) -> None:
        if len(self.values) != model.input_size:
            raise ConfigError(f"input = {{constant = [...]}} gives {len(self.values)} value(s) but the model has "
                              f"{model.input_size} input channel(s); give {model.input_size} numbers")

    def inputs(self, model, steps, key=None, realisation=None):
        require_positive("steps", steps)
        self.check(model)
        return jnp.broadcast_to(jnp.asarray(self.values), (steps, model.input_size)), jnp.zeros((steps,))

    def mean_input(self, model, xs):
        self.check(model)
        return np.asarray(self.values), 0.0, f"constant input {self._shown}"

    @property
    def driven(self) -> bool:
        return any(v != 0.0 for v in self.values)

    @property
    def _shown(self) -> str:
        return "[" + ", ".join(f"{v:g}" for v in self.values) + "]"

    @property
    def name(self) -> str:
        return f"constant input {self._shown}"


def from_keywords(drive: float | None = None, task=None) -> Protocol:
    """The protocol of the older keywords: a ``task``'s stream (plus ``drive``), else the constant
    ``drive``, else autonomous."""
    if task is not None:
        return TaskStream(task, drive)
    return Autonomous() if drive is None else Drive(drive)
