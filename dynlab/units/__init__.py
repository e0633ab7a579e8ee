"""Recurrent units (one layer, one sample, one step): ``rnn``, ``rnn-gamma``, ``aru``."""

from dynlab.units import aru
from dynlab.units.base import Cell

__all__ = ["Cell", "aru"]
