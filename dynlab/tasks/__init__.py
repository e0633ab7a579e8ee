"""Tasks: ``adding``, ``recall`` (synthetic memory), ``hierarchical-language`` (SITH paper),
``pc-toy``, ``pc-mnist`` and ``pc-cifar10`` (fixed-batch feed-forward tasks of the PC paper),
``smnist`` and ``psmnist`` (sequential and permuted sequential MNIST or Fashion-MNIST),
``scifar10`` (sequential CIFAR-10), ``shd`` and ``shd-adding`` (Spiking Heidelberg Digits),
``charlm`` (character-level language modelling, stateful truncated BPTT), ``external`` (the widths of a
model trained elsewhere, [`dynlab.imports`][])."""

from dynlab.tasks import charlm, cifar, external, hierarchical, mnist, pc_tasks, shd, synthetic
from dynlab.tasks.base import Task

__all__ = ["Task", "charlm", "cifar", "external", "hierarchical", "mnist", "pc_tasks", "shd", "synthetic"]
