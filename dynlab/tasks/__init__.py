"""Tasks: ``adding``, ``recall`` (synthetic memory), ``hierarchical-language`` (SITH paper),
``pc-toy``, ``pc-mnist`` and ``pc-cifar10`` (fixed-batch feed-forward tasks of the PC paper),
``smnist`` and ``psmnist`` (sequential and permuted sequential MNIST or Fashion-MNIST),
``scifar10`` (sequential CIFAR-10), ``shd`` and ``shd-adding`` (Spiking Heidelberg Digits),
``charlm`` (character-level language modelling, stateful truncated BPTT); the cognitive tasks
``flipflop``, ``context-integration``, ``perceptual-decision``, ``delayed-match`` and
``sine-generation`` ([`dynlab.tasks.cognitive`][]); ``neurogym`` (any neurogym environment,
[`dynlab.tasks.neurogym_env`][]); ``teacher-chaotic-rnn``, ``teacher-line-attractor``,
``teacher-flipflop``, ``teacher-lorenz`` (students of teachers, [`dynlab.tasks.teachers`][]);
``external`` (the widths of a model trained elsewhere, [`dynlab.imports`][])."""

from dynlab.tasks import (charlm, cifar, cognitive, external, hierarchical, mnist, neurogym_env, pc_tasks, shd, synthetic,
                          teachers)
from dynlab.tasks.base import Task

__all__ = ["Task", "charlm", "cifar", "cognitive", "external", "hierarchical", "mnist", "neurogym_env", "pc_tasks",
           "shd", "synthetic", "teachers"]
