"""Learning rules (installed as ``dynlab.rules``): ``bptt``, ``pc`` (predictive coding), ``bp``."""

from dynlab.rules import bp, bptt, pc
from dynlab.rules.base import Rule

__all__ = ["Rule", "bp", "bptt", "pc"]
