"""Issue 50 §4: every generated option has help text, read from its function's ``Args:`` section.

The options of ``dynlab analyze NAME``, ``dynlab compare pc-bp`` and ``dynlab transfer NAME`` are
generated from the registered functions' signatures ([`dynlab.cli.analyze.signature_options`][]);
the help of each is the docstring's ``Args:`` line for it. An option without one shows only its
kind and default (``[int; default 200]``), which says nothing of what it does.
"""

from __future__ import annotations

import re

from dynlab import registry
from dynlab.cli.analyze import parameter_help, signature_options


def _generated():
    """``(command, signature options)`` for every registered analysis and transfer, with the
    ``exclude`` each command uses."""
    from dynlab.transfer import TRANSFER_ARGUMENTS

    registry.load_plugins()
    for entry in registry.entries("analysis"):
        exclude = {} if registry.of_what_it_takes(entry.obj, entry.takes) else {"exclude": ("task", "progress")}
        yield f"analyze {entry.name}", signature_options(entry.name, entry.obj, **exclude)
    for entry in registry.entries("transfer"):
        yield f"transfer {entry.name}", signature_options(entry.name, entry.obj, exclude=TRANSFER_ARGUMENTS)


def test_every_generated_option_has_help_text():
    missing, count = [], 0
    for command, signature in _generated():
        for key, decorate in signature.options.items():
            (option,) = decorate(lambda: None).__click_params__
            count += 1
            # what the docstring gave comes before the generated "[kind; default ...]" / "(default: ...)"
            if not re.sub(r"\s*(\[[^\]]*\]|\(default: [^)]*\))$", "", option.help or "").strip():
                missing.append(f"{command} {option.opts[0]}")
    assert count > 100  # the registry was listed: the test saw the analyses' options
    assert not missing, f"options without help text (add an Args: line): {', '.join(missing)}"


def test_args_section_is_read_as_written():
    doc = """Do it.

    Args:
        a, b: the first
            and second.
        c (int): see [`x`][dynlab.x] and $k$.

    Returns:
        c: not a parameter.
    """
    import inspect

    assert parameter_help(inspect.cleandoc(doc)) == {"a": "the first and second.", "b": "the first and second.",
                                                     "c": "see `x` and k."}
    assert parameter_help("No arguments.") == {}


def test_a_docstring_the_parser_refuses_gives_no_help_not_an_error():
    assert parameter_help("Args:\n    steps: a section without a summary line above it.") == {}
