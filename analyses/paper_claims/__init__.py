"""The papers' claims: for each paper dynlab reproduces ([`dynlab.scenarios.papers.PAPERS`][]), its
statements with the statistic that measures each on the datasets its program writes, and the
interval that decides the verdict ([`dynlab.claims`][]). A paper scenario's program registers them
(``register("program", ..., claims=...)``); the program itself only computes the datasets."""
