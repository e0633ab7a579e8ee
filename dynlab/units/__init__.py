"""Recurrent units (one layer, one sample, one step).

``rnn``, ``rnn-gamma``, ``aru`` (the ARU family); ``gru``, ``lstm`` (gated baselines);
``blockdiag`` and the SITH continuum ``rnn-generic``, ``rnn-blockdiag``, ``rnn-diag-uniform``,
``rnn-diag-geometric``, ``sith-rnn``, ``sithcon``; ``elm`` (ELM neuron, Branch-ELM) and
``elm-net`` (ELM network layer); ``rate`` (the leaky rate network of
Sompolinsky, Crisanti & Sommers, [`dynlab.units.rate`][]). ``dynlab list units`` describes each.
"""

from dynlab.units import aru, blockdiag, continuum, gated, sith
from dynlab.units import elm, elm_net, rate
from dynlab.units.base import Cell

__all__ = ["Cell", "aru", "blockdiag", "continuum", "gated", "rate", "sith"]
