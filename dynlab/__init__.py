"""dynlab: recurrent neuron models, learning rules and dynamical analyses, side by side, in JAX.

The Python API, the command line's twin ([`dynlab.api`][]; docs: "Use dynlab from Python"):

    import dynlab
    run = dynlab.load("runs/gru")                               # a run directory (dynlab train / import)
    fresh = dynlab.model("gru", task="flipflop", hidden=64)     # a freshly initialised model
    run = dynlab.fit("gru", task="flipflop", steps=500, out="runs/gru")   # dynlab train
    ds = dynlab.analyze("fixed-points", run)                    # the dataset dynlab analyze writes
    result = dynlab.Study.load("compare-units").run(out="runs/cu", workers=2)   # dynlab run
    fig = dynlab.plot(ds)                                       # dynlab plot
    dynlab.names("analysis")                                    # registered names of a kind
    unit = dynlab.build("unit", "aru", input_size=1, key=jax.random.key(0), hidden=64)
"""

__version__ = "0.1.0"

from dynlab.registry import KINDS, build, load_plugins, names  # noqa: E402

# The plug-ins (built-in and installed through the "dynlab.plugins" entry points) are imported
# on the first registry lookup (dynlab.registry.load_plugins), so importing dynlab is cheap; so is
# the Python API, whose functions import what they need when called.
from dynlab.api import Study, StudyResult, analyze, fit, load, model, plot  # noqa: E402

__all__ = ["KINDS", "Study", "StudyResult", "analyze", "build", "fit", "load", "load_plugins", "model", "names", "plot",
           "__version__"]
