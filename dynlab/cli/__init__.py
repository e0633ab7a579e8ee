"""The ``dynlab`` command line (console script ``dynlab = dynlab.cli:console``).

[`main`][dynlab.cli.main] holds the top-level group and its error handling; every other module
adds its commands to it (``train``, ``import``, ``analyze …``, ``run``/``sweep``, ``plot``, ``compare``,
``transfer``) and imports only downwards. Importing this package assembles them; nothing here
imports JAX, so ``dynlab --help`` is fast.
"""

from dynlab.cli.main import console, main
from dynlab.cli import importer, plot, reproduce, run, train, transfer  # noqa: F401  (they register their commands)
from dynlab.cli.analyze import analyze
from dynlab.cli.compare import compare, comparison_command

main.add_command(analyze)
main.add_command(compare)
compare.lazy["pc-bp"] = analyze.lazy["pc-bp"] = lambda: comparison_command("pc-bp", "mlp")  # one command, two names
analyze.lazy["pc-bptt"] = lambda: comparison_command("pc-bptt", "rnn")

__all__ = ["console", "main"]
