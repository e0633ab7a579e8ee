"""dynlab: recurrent neuron models, learning rules and dynamical analyses, side by side, in JAX.

The stable entry points:

    dynlab.names("unit")                                    # registered names of a kind
    unit = dynlab.build("unit", "aru", input_size=1, key=jax.random.key(0), hidden=64)
    model = dynlab.build("model", unit="aru", input_size=1, output_size=10, key=..., hidden=64)
"""

__version__ = "0.1.0"

from dynlab.registry import KINDS, build, load_plugins, names  # noqa: E402

# The plug-ins (built-in and installed through the "dynlab.plugins" entry points) are imported
# on the first registry lookup (dynlab.registry.load_plugins), so importing dynlab is cheap.

__all__ = ["KINDS", "build", "load_plugins", "names", "__version__"]
