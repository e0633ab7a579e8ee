"""Tasks: ``adding``, ``recall`` (synthetic memory), ``hierarchical-language`` (SITH paper),
``pc-toy`` and ``pc-mnist`` (fixed-batch feed-forward tasks of the PC paper)."""

from dynlab.tasks import hierarchical, pc_tasks, synthetic
from dynlab.tasks.base import Task

__all__ = ["Task", "hierarchical", "pc_tasks", "synthetic"]
