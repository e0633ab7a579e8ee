"""The papers dynlab reproduces: the ``paper`` a scenario file names, and what ``dynlab reproduce`` lists.

A paper scenario's TOML says ``paper = "ID"`` with one of these ids; ``dynlab reproduce ID`` runs
every built-in scenario that names it and prints each one's verdicts (its program's claims,
[`dynlab.claims`][]). The texts are in ``../shared/papers`` (``file``).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Paper:
    id: str
    citation: str
    file: str


PAPERS = {p.id: p for p in (
    Paper("aru", "Geadah, Horoi, Kerg, Wolf & Lajoie: Neural networks with optimized single-neuron adaptation "
                 "uncover biologically plausible regularization", "aru-single-neuron-adaptation.txt"),
    Paper("elm-neuron", "Spieler, Rahaman, Martius, Schölkopf & Levina: The ELM neuron, an efficient and expressive "
                        "cortical neuron model can solve long-horizon tasks", "elm-neuron.txt"),
    Paper("elm-scaling", "Spieler, Martius & Levina: Scaling laws and trade-offs in recurrent networks of expressive "
                         "neurons", "elm-network-scaling-laws.txt"),
    Paper("pc-width-depth", "Innocenti, Achour & Bogacz: On the infinite width and depth limits of predictive coding "
                            "networks", "pc-infinite-width-depth.txt"),
    Paper("sith", "Sarkar & Howard: hierarchical temporal receptive windows from scale-invariant time cells "
                  "(SITHCon, SITH-RNN)", "sith-rnn-temporal-receptive-windows.txt"),
)}
"""Paper id -> [`Paper`][]."""
