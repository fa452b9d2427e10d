"""The package's version: the one source, read by ops/__init__.py (ms_scatter.__version__) and
by setup.py (the distribution's metadata)."""
__version__ = "0.1.0"
