"""The layering of the code (DESIGN §2 "Layers"), checked on the import graph of the source.

core (``dynlab/``: registry, config, units, tasks, models, trainer, store, figures) <- rules <-
analyses <- scenarios <- cli. An import may only point to its own layer or a lower one, and no
two modules may import each other, directly or through others. Every ``import`` statement counts,
also those inside functions (a lazy import still ties the two modules together).

The interfaces are the top layer: the command line (``dynlab.cli``) and its twin, the Python API
(``dynlab.api``). A package importing its own submodules re-exports them (the root package
``dynlab`` re-exports the Python API): such an edge is neither upward nor part of a cycle.
"""

import ast
import os
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"dynlab": ROOT / "dynlab", "dynlab.rules": ROOT / "rules", "dynlab.analyses": ROOT / "analyses",
            "dynlab.scenarios": ROOT / "scenarios"}
RANK = {"core": 0, "rules": 1, "analyses": 2, "scenarios": 3, "cli": 4}


INTERFACES = ("dynlab.api",)
"""The Python API: of the command line's layer (module docstring)."""


def layer(module: str) -> str:
    if module in INTERFACES:
        return "cli"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("rules", "analyses", "scenarios"):
        return parts[1]
    if len(parts) > 1 and (parts[1] == "cli" or parts[1].startswith("cli_")):
        return "cli"
    return "core"


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if package == "dynlab" and parts and parts[0] in ("rules", "analyses", "scenarios"):
                continue
            found[".".join([package, *parts])] = path
    return found


def imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The dynlab modules ``path`` imports (``from a import b`` counts as ``a.b`` when that is a module)."""
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def import_graph() -> nx.DiGraph:
    found = modules()
    graph = nx.DiGraph()
    for module, path in found.items():
        graph.add_node(module, package=path.name == "__init__.py")
        for target in imports(path, module, set(found)):
            graph.add_edge(module, target)
    return graph


def violations(graph: nx.DiGraph) -> tuple[list[str], list[list[str]]]:
    # a package's __init__ importing its own modules (to register or re-export them) is neither an
    # upward import nor a cycle of design
    own = [(a, b) for a, b in graph.edges if graph.nodes[a]["package"] and b.startswith(a + ".")]
    upward = [f"{a} ({layer(a)}) imports {b} ({layer(b)})" for a, b in graph.edges
              if RANK[layer(b)] > RANK[layer(a)] and (a, b) not in own]
    acyclic = graph.copy()
    acyclic.remove_edges_from(own)
    cycles = [c for c in nx.simple_cycles(acyclic)]
    return upward, cycles


def test_imports_point_down_and_form_no_cycle():
    upward, cycles = violations(import_graph())
    assert not upward, "upward imports:\n" + "\n".join(upward)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + [c[0]]) for c in cycles)


@pytest.mark.parametrize("source, target", [("dynlab.train", "dynlab.analyses.lyapunov"),
                                            ("dynlab.units.sith", "dynlab.units.continuum")])
def test_the_check_fails_on_a_deliberate_violation(source, target):
    """The same check on the graph with one bad edge added: an upward import, then a cycle."""
    graph = import_graph()
    graph.add_edge(source, target)
    upward, cycles = violations(graph)
    assert upward or cycles


LOADED_WHEN_USED = ("matplotlib", "scipy.stats", "scipy.optimize", "scipy.special", "diffrax")
"""Libraries imported by the functions that use them, not while the plug-ins load (together about
2 s of every command's start; matplotlib also because pyplot would choose the backend)."""


def test_importing_dynlab_does_not_import_jax_and_plugins_leave_the_backend_alone():
    """``import dynlab`` and the CLI's top level stay light: plug-ins load on first lookup. Loading
    them imports none of [`LOADED_WHEN_USED`][]; a figure drawn afterwards is a plain matplotlib
    figure: pyplot is not imported and a notebook's backend is not changed."""
    import subprocess
    import sys

    code = ("import sys, dynlab, dynlab.cli; assert 'jax' not in sys.modules, 'jax imported'\n"
            "dynlab.names('analysis')\n"
            f"loaded = [m for m in {LOADED_WHEN_USED!r} if m in sys.modules]; assert not loaded, loaded\n"
            "import matplotlib, xarray as xr; matplotlib.use('svg'); fig = dynlab.plot(xr.Dataset({'x': ('t', [1.0, 2.0])}))\n"
            "assert type(fig).__name__ == 'Figure' and matplotlib.get_backend() == 'svg' and 'matplotlib.pyplot' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT.parent, env={**os.environ, "MPLBACKEND": ""})
