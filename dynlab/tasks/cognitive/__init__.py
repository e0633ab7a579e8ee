"""Cognitive tasks with known dynamical solutions: ``flipflop``, ``context-integration``,
``perceptual-decision``, ``delayed-match``, ``sine-generation``; trial timing in
[`periods`][dynlab.tasks.cognitive.periods] and what the trial tasks share in
[`trial`][dynlab.tasks.cognitive.trial]."""

from dynlab.tasks.cognitive import context_integration, delayed_match, flipflop, perceptual_decision, sine_generation

__all__ = ["context_integration", "delayed_match", "flipflop", "perceptual_decision", "sine_generation"]
