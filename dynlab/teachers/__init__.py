"""Teachers: dynamical systems with a known fingerprint whose outputs, or noisy observations of
their latents, are a student's targets ([`dynlab.tasks.teachers`][] makes each a task).

[`base`][dynlab.teachers.base] (the contract), [`pulses`][dynlab.teachers.pulses] (the kick of
autonomous teachers), [`network`][dynlab.teachers.network] (dynlab models as teachers: the
chaotic rate network, the line attractor), [`flipflop`][dynlab.teachers.flipflop] (the
task-trained flip-flop network), [`lorenz`][dynlab.teachers.lorenz] (Lorenz-63, diffrax) and
[`cache`][dynlab.teachers.cache] (where what is computed once is kept). Their ground truth is
computed by dynlab's analyses: [`dynlab.analyses.recovery.truth`][]; the chaotic network's is
held to mean-field theory, [`dmft`][dynlab.teachers.dmft] (``benchmarks/dmft.py``).
"""

from dynlab.teachers.base import Teacher
from dynlab.teachers.pulses import Pulses

__all__ = ["Pulses", "Teacher"]
