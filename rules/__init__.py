"""Learning rules (installed as ``dynlab.rules``): ``bptt``."""

from dynlab.rules import bptt
from dynlab.rules.base import Rule

__all__ = ["Rule", "bptt"]
