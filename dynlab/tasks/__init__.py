"""Tasks: ``adding``, ``recall`` (synthetic memory), ``hierarchical-language`` (SITH paper),
``pc-toy`` and ``pc-mnist`` (fixed-batch feed-forward tasks of the PC paper), ``smnist`` and
``psmnist`` (sequential and permuted sequential MNIST), ``shd`` and ``shd-adding`` (Spiking
Heidelberg Digits), ``charlm`` (character-level language modelling, stateful truncated BPTT)."""

from dynlab.tasks import charlm, hierarchical, mnist, pc_tasks, shd, synthetic
from dynlab.tasks.base import Task

__all__ = ["Task", "charlm", "hierarchical", "mnist", "pc_tasks", "shd", "synthetic"]
