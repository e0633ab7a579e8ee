"""dynlab: recurrent neuron models, learning rules and dynamical analyses, side by side, in JAX.

The stable entry points::

    dynlab.names("unit")                                    # registered names of a kind
    unit = dynlab.build("unit", "aru", input_size=1, key=jax.random.key(0), hidden=64)
    model = dynlab.build("model", unit="aru", input_size=1, output_size=10, key=..., hidden=64)
"""

__version__ = "0.1.0"

from dynlab.registry import KINDS, build, names  # noqa: E402

# Importing the plug-in packages registers their contents.
from dynlab import ffmodels, losses, models, rnn_param, tasks, units  # noqa: E402,F401
from dynlab import rules  # noqa: E402,F401
from dynlab import analyses, scenarios  # noqa: E402,F401
from dynlab import perturbations  # noqa: E402,F401  (registers the perturb analysis)

__all__ = ["KINDS", "build", "names", "__version__"]
