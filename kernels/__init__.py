"""ms_scatter kernel libraries (built at install time) and their sources."""
