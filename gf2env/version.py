"""The package version, read by the build (pyproject) and reported by the servers."""

__version__ = "0.1.0"
