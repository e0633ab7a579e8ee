"""The hierarchical-language generator: grammar properties, dilation, stream, bad input."""

import jax
import numpy as np
import pytest

import dynlab
from dynlab.errors import ConfigError
from dynlab.tasks.hierarchical import HierarchicalLanguageTask, dilate, grammar


def triplets(seqs, unit):
    """All aligned triplets of ``unit``-long items (as tuples) in the sequences."""
    out = []
    for s in seqs:
        items = [tuple(s[i:i + unit]) for i in range(0, len(s), unit)]
        out += [tuple(items[i:i + 3]) for i in range(0, len(items), 3)]
    return out


def determined(pairs):
    seen = {}
    for key, val in pairs:
        if seen.setdefault(key, val) != val:
            return False
    return True


@pytest.mark.parametrize("seed", [None, 0, 7])
def test_grammar_properties(seed):
    g = grammar(4, seed=seed)
    assert g.shape == (9, 81)
    assert len({tuple(r) for r in g}) == 9  # nine distinct sequences
    np.testing.assert_array_equal(np.bincount(g.ravel(), minlength=9), np.full(9, 81))  # uniform marginals
    for unit in (1, 3, 9, 27):  # letters, words, sentences, paragraphs
        tri = triplets(g, unit)
        assert determined([((a, b), c) for a, b, c in tri]), unit  # first two determine the third
        assert not determined([(a, c) for a, b, c in tri]), unit  # neither alone does
        assert not determined([(b, c) for a, b, c in tri]), unit


def test_unscrambled_language_matches_paper():
    g = grammar(4, seed=None)
    assert "".join(str(s + 1) for s in g[0, :9]) == "147267357"


def test_scrambling_is_seeded():
    np.testing.assert_array_equal(grammar(4, seed=3), grammar(4, seed=3))
    assert not np.array_equal(grammar(4, seed=3), grammar(4, seed=4))


def test_dilation_modes():
    x = np.eye(9, dtype=np.float32)[[2, 5]][None]  # [1, 2, 9]
    p = dilate(x, 3, "pulse")[0]
    h = dilate(x, 3, "hold")[0]
    assert p.shape == h.shape == (6, 9)
    np.testing.assert_array_equal(p.argmax(1)[[0, 3]], [2, 5])
    assert p[[1, 2, 4, 5]].sum() == 0
    np.testing.assert_array_equal(h.argmax(1), [2, 2, 2, 5, 5, 5])


def test_task_batch_and_stream():
    task = dynlab.build("task", "hierarchical-language", dilation=2, mode="hold")
    assert task.length == 81 * 9 and task.chance == pytest.approx(1 / 9)
    x, y, mask = task.batch(jax.random.key(0), 18)
    assert x.shape == (18, 729, 9) and np.all(np.bincount(np.asarray(y), minlength=9) == 2)
    np.testing.assert_array_equal(np.asarray(x)[np.arange(18), ::9].argmax(-1), task.symbols[np.asarray(y)])
    assert float(mask[:, -1].sum()) == 18 and float(mask.sum()) == 18
    s = task.stream()
    assert s.shape == (729, 9)
    np.testing.assert_array_equal(s.argmax(1), task.symbols.ravel())


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(dilation=-1), "task.dilation must be a non-negative integer exponent"),
    (dict(mode="stretch"), "task.mode must be one of 'pulse', 'hold'"),
    (dict(levels=0), "task.levels must be a positive integer"),
])
def test_bad_task_config(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        dynlab.build("task", "hierarchical-language", **kwargs)
