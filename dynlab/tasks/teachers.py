r"""Teachers as tasks: a student learns to reproduce a dynamical system with a known fingerprint.

Four registered tasks, one per teacher ([`dynlab.teachers`][]):

| task | teacher | default trial |
|---|---|---|
| ``teacher-chaotic-rnn`` | rate network, $N = 200$, $g = 1.5$, $\Delta t/\tau = 1/30$, kicked | 300 steps (10 $\tau$) |
| ``teacher-line-attractor`` | linear rate network with one eigenvalue 1, integrating pulses | 100 steps |
| ``teacher-flipflop`` | GRU trained on the 3-bit flip-flop (trained once, cached) | 64 steps |
| ``teacher-lorenz`` | Lorenz-63 (diffrax Tsit5, $\Delta t = 0.01$), kicked | 200 steps |

A sample is one trial: the teacher's inputs ``x`` (what the student reads), from the batch's
key, and as targets either the teacher's outputs (``latents = 0``, the default) or its first
``latents`` latent state components, plus Gaussian observation noise of standard deviation
``noise`` (drawn from the batch's key too). Every step is scored (loss ``mse``); ``chance`` is the
mean square of the targets (what predicting 0 scores), estimated from 64 trials. The teacher's
own weights are drawn from ``teacher_seed``, not from the run's seed, so students of every seed
learn the same teacher. The task keeps the teacher (``task.teacher``), which the recovery scores
compare the student with ([`dynlab.analyses.recovery`][]).

**Enforces**: ``latents`` is at most the teacher's state dimension (one line naming both), and
the teacher, with the 64 trials of its chance level, fits in memory before it is built
([`dynlab.budget.check_teacher`][]: one line naming the largest size, e.g. ``task.n=1000000``).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp

from dynlab import budget
from dynlab.errors import ConfigError, require_positive
from dynlab.registry import register
from dynlab.tasks.base import Task
from dynlab.teachers.base import Teacher, stand_in
from dynlab.teachers.flipflop import flipflop_teacher
from dynlab.teachers.lorenz import Lorenz63
from dynlab.teachers.network import chaotic_rnn, line_attractor
from dynlab.teachers.pulses import Pulses

CHANCE_TRIALS = 64


def _seed(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**31:
        raise ConfigError(f"task.teacher_seed must be an integer in [0, 2^31), got {value!r}")
    return value


def _fits(build_teacher, length: int, **sizes: int) -> None:
    """Refuse, before it is built, a teacher of ``build_teacher`` that would not fit in memory
    ([`dynlab.budget.check_teacher`][]); ``sizes`` are the task's size keys, the largest of which
    a refusal names."""
    require_positive("task.length", length)
    size = budget.largest_size({"task": {**sizes, "length": length}}, keys=("task",))
    budget.check_teacher(build_teacher, CHANCE_TRIALS, length, size=size)


def _clean(teacher: Teacher, key, batch_size: int, length: int, latents: int):
    """Inputs and noiseless targets of ``batch_size`` trials of ``length`` steps: the teacher's
    outputs (``latents = 0``) or its first ``latents`` state components."""
    xs = teacher.inputs(key, batch_size, length)
    states, outputs = jax.vmap(teacher.run)(xs)
    return xs, (outputs if latents == 0 else states[..., :latents])


@eqx.filter_jit
def _mean_square_target(teacher: Teacher, key, batch_size: int, length: int, latents: int):
    """The mean square of the noiseless targets of ``batch_size`` trials: what predicting 0 scores.
    One compiled program per teacher kind and size (not one per operation, as run eagerly), so the
    tasks of a sweep's cells, built again while each cell's config is checked, cost one compilation."""
    return jnp.mean(_clean(teacher, key, batch_size, length, latents)[1] ** 2)


def _made(build):
    """The teacher ``build()`` makes: its shapes only while a config is checked
    ([`dynlab.experiment.checking`][]), else concrete weights, even inside an abstract trace."""
    from dynlab.experiment import checking

    if checking():
        return stand_in(eqx.filter_eval_shape(build))
    with jax.ensure_compile_time_eval():
        return build()


class TeacherTask(Task):
    """A teacher's trials as a task; see the module docstring."""

    teacher: Teacher
    latents: int = eqx.field(static=True)
    noise: float = eqx.field(static=True)

    def __init__(self, teacher: Teacher, *, length: int, latents: int = 0, noise: float = 0.0):
        require_positive("task.length", length)
        if isinstance(latents, bool) or not isinstance(latents, int) or latents < 0:
            raise ConfigError(f"task.latents must be an integer >= 0 (0: the teacher's outputs), got {latents!r}")
        if latents > teacher.state_size:
            raise ConfigError(f"task.latents = {latents} asks for more latents than the teacher has: its state has "
                              f"{teacher.state_size} components (valid: 0 to {teacher.state_size})")
        if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not math.isfinite(noise) or noise < 0:
            raise ConfigError(f"task.noise must be a finite standard deviation >= 0, got {noise!r}")
        self.teacher, self.latents, self.noise = teacher, latents, float(noise)
        self.input_size, self.length = teacher.input_size, length
        self.output_size = latents or teacher.output_size
        self.loss = "mse"
        from dynlab.experiment import checking

        if checking():  # a config being checked needs the shapes, not the chance level: nothing is run
            self.chance = math.nan
            return
        with jax.ensure_compile_time_eval():  # a number even while a config is checked abstractly
            mean_square = float(_mean_square_target(teacher, jax.random.key(0), CHANCE_TRIALS, length, latents))
        self.chance = mean_square + self.noise**2

    def clean(self, key, batch_size):
        """Inputs and noiseless targets of ``batch_size`` trials."""
        return _clean(self.teacher, key, batch_size, self.length, self.latents)

    def batch(self, key, batch_size, split="train"):
        k_trials, k_noise = jax.random.split(key)
        xs, y = self.clean(k_trials, batch_size)
        y = y + self.noise * jax.random.normal(k_noise, y.shape)
        return xs, y, jnp.ones((batch_size, self.length))


@register("task", "teacher-chaotic-rnn", "student of a chaotic rate network (N=200, g=1.5, dt/tau=1/30), kicked (mse)")
class ChaoticRNNTeacherTask(TeacherTask):
    """The chaotic rate network ([`chaotic_rnn`][dynlab.teachers.network.chaotic_rnn]) as a task:
    ``n`` neurons, gain ``g``, ``alpha`` = $\\Delta t/\\tau$, ``outputs`` random read-outs, kicked by a
    pulse of scale ``pulse_scale`` at each of the first ``kick`` steps.

    **The default ``teacher_seed`` is 1, chosen**: at $N = 200$ chaos is a property of the drawn
    network, not of $g$ alone (finite size). Measured ($\\lambda_1\\tau$, 95% interval over 3
    states on the attractor, 6,000 steps each): seed 0: $-0.001$ $[-0.014, 0.012]$; seed 1:
    $0.026$ $[0.014, 0.038]$; seed 2: $-0.020$ $[-0.042, 0.001]$; seed 3: $0.001$ $[-0.009, 0.010]$
    (and at $N = 500$: $-0.000$, $0.025$, $0.010$, $-0.050$). Seed 1 is the first whose $\\lambda_1$ is
    resolved above 0, so the default teacher is chaotic (``tests/test_teachers.py`` checks it).
    Mean-field theory gives $\\lambda_{max}\\tau = 0.0467$ for $N \\to \\infty$
    ([`dmft_lambda_max`][dynlab.teachers.dmft.dmft_lambda_max]); networks simulated apart from dynlab
    approach it from below as $N$ grows (mean over 4 networks 0.006 at $N = 200$, 0.029 at 1,000,
    0.044 at 2,000: ``benchmarks/dmft.py``), so at $N = 200$ the finite-size error is as large as
    the exponent, and these values lie within it."""

    def __init__(self, *, n: int = 200, g: float = 1.5, alpha: float = 1 / 30, outputs: int = 3, kick: int = 30,
                 pulse_scale: float = 1.0, teacher_seed: int = 1, latents: int = 0, noise: float = 0.0,
                 length: int = 300):
        require_positive("task.n", n)
        require_positive("task.outputs", outputs)
        build = lambda: chaotic_rnn(jax.random.key(_seed(teacher_seed)), n=n, g=g, alpha=alpha,  # noqa: E731
                                    outputs=outputs, pulses=Pulses(1, scale=pulse_scale, steps=kick))
        _fits(build, length, n=n, outputs=outputs)
        teacher = _made(build)
        super().__init__(teacher, length=length, latents=latents, noise=noise)


@register("task", "teacher-line-attractor", "student of a line attractor integrating pulses (mse)")
class LineAttractorTeacherTask(TeacherTask):
    """The line attractor ([`line_attractor`][dynlab.teachers.network.line_attractor]) as a task:
    ``n`` neurons, ``alpha`` = $\\Delta t/\\tau$, pulses of scale ``pulse_scale`` with probability
    ``pulse_rate`` at every step."""

    def __init__(self, *, n: int = 16, alpha: float = 0.1, pulse_rate: float = 0.1, pulse_scale: float = 1.0,
                 teacher_seed: int = 0, latents: int = 0, noise: float = 0.0, length: int = 100):
        require_positive("task.n", n)
        build = lambda: line_attractor(jax.random.key(_seed(teacher_seed)), n=n, alpha=alpha,  # noqa: E731
                                       pulses=Pulses(1, rate=pulse_rate, scale=pulse_scale))
        _fits(build, length, n=n)
        teacher = _made(build)
        super().__init__(teacher, length=length, latents=latents, noise=noise)


@register("task", "teacher-flipflop", "student of a GRU trained on the N-bit flip-flop (trained once, cached; mse)")
class FlipFlopTeacherTask(TeacherTask):
    """The task-trained flip-flop network ([`flipflop_teacher`][dynlab.teachers.flipflop.flipflop_teacher])
    as a task: a GRU of ``hidden`` units trained ``train_steps`` steps on the ``bits``-bit flip-flop
    from ``teacher_seed`` on trials of ``length`` steps, which are also the student's trials."""

    def __init__(self, *, bits: int = 3, hidden: int = 64, train_steps: int = 1500, teacher_seed: int = 0,
                 latents: int = 0, noise: float = 0.0, length: int = 64):
        require_positive("task.train_steps", train_steps)
        teacher = flipflop_teacher(bits=bits, hidden=hidden, steps=train_steps, length=length,
                                   seed=_seed(teacher_seed))
        super().__init__(teacher, length=length, latents=latents, noise=noise)


@register("task", "teacher-lorenz", "student of Lorenz-63 (diffrax, dt=0.01), kicked (mse)")
class LorenzTeacherTask(TeacherTask):
    """Lorenz-63 ([`Lorenz63`][dynlab.teachers.lorenz.Lorenz63]) as a task: ``sigma``, ``rho``,
    ``beta``, step ``dt``, kicked by pulses of scale ``pulse_scale`` on the three variables in the
    first ``kick`` steps; outputs are the state / 10."""

    def __init__(self, *, sigma: float = 10.0, rho: float = 28.0, beta: float = 8 / 3, dt: float = 0.01,
                 kick: int = 20, pulse_scale: float = 10.0, latents: int = 0, noise: float = 0.0, length: int = 200):
        teacher = Lorenz63(sigma=sigma, rho=rho, beta=beta, dt=dt, pulses=Pulses(3, scale=pulse_scale, steps=kick))
        super().__init__(teacher, length=length, latents=latents, noise=noise)
