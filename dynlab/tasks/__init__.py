"""Tasks: ``adding``, ``recall``."""

from dynlab.tasks import synthetic
from dynlab.tasks.base import Task

__all__ = ["Task", "synthetic"]
