"""Results of an evaluation: tidy CSVs and summaries, the figures, and the effective-prefix fit."""
