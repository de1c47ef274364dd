"""Settings declared once: the task family and depth lists, YAML read into dataclasses, and the types
of the ``gf2`` flags."""
