"""Models trained elsewhere: the papers' published PyTorch models as dynlab models.

Each module is the formats of one source: [`elm`][dynlab.imports.elm] (the ELM neuron and
Branch-ELM), [`aru`][dynlab.imports.aru] (NonlinMod's ARUN and RNN+γ) and
[`sithcon`][dynlab.imports.sithcon] (SITHCon). A format is a function
``build(weights: dict[str, np.ndarray], **options) -> (config, model)`` of a flat state dict.
"""
