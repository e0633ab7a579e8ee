"""Recovery scores: how much of a teacher's dynamics ([`dynlab.teachers`][]) a student recovered.

[`fingerprint`][dynlab.analyses.recovery.fingerprint] measures fixed points and Lyapunov spectra of
a teacher or a model the same way; [`truth`][dynlab.analyses.recovery.truth] computes a teacher's
once and caches it; the scores are [`dsa_score`][dynlab.analyses.recovery.dsa_score],
[`fixed_point_score`][dynlab.analyses.recovery.fixed_point_score],
[`spectrum_score`][dynlab.analyses.recovery.spectrum_score] and
[`state_r2`][dynlab.analyses.recovery.state_r2]; [`model`][dynlab.analyses.recovery.model] registers
the analysis ``recovery`` (figure and summary in [`figure`][dynlab.analyses.recovery.figure]).
"""

from dynlab.analyses.recovery.model import recovery_analysis, teacher_of

__all__ = ["recovery_analysis", "teacher_of"]
