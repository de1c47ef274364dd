"""The task and its rules: supports and their ranks, the hidden circuit and the step-g oracle, the
validator and step transition, and the exact posteriors over the next term."""
