"""Learning rules (installed as ``dynlab.rules``): ``bptt``, ``pc`` (predictive coding), ``bp``, ``pc-time``."""

from dynlab.rules import bp, bptt, pc, pc_time
from dynlab.rules.base import Rule

__all__ = ["Rule", "bp", "bptt", "pc", "pc_time"]
