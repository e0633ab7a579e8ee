"""Recurrent units (one layer, one sample, one step): ``rnn``, ``rnn-gamma``, ``aru``, ``gru``, ``lstm``."""

from dynlab.units import aru, gated
from dynlab.units.base import Cell

__all__ = ["Cell", "aru"]
