"""Models trained elsewhere, as dynlab run directories (``dynlab import``).

[`weights`][dynlab.imports.weights] reads a weight file (safetensors, or PyTorch's
``torch.save`` with ``weights_only=True``) without executing anything;
[`run`][dynlab.imports.run] defines a weight format (a registered builder of kind ``"format"``)
and writes an imported model as a run directory; each other module is the formats of one
source: [`torch_rnn`][dynlab.imports.torch_rnn] (``torch-rnn``, ``torch-gru``, ``torch-lstm``),
and the papers' published code: [`elm`][dynlab.imports.elm] (``elm-neuron``: the ELM neuron and
Branch-ELM), [`aru`][dynlab.imports.aru] (``arun``, ``rnn-gamma-nonlinmod``) and
[`sithcon`][dynlab.imports.sithcon] (``sithcon``), each with its unit's public-code conventions
selected. ``dynlab list formats`` lists them. [`options`][dynlab.imports.options] reads a
format's options from a file (``--options-file``: the ``model_config.json`` published beside
the weights).
"""

from dynlab.imports import aru, elm, sithcon, torch_rnn  # noqa: F401  (registers their formats)
