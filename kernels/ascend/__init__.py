"""Ascend backend of ms_scatter: MindSpore hybrid-DSL (AKG) kernels, see hybrid.py.

Nothing is compiled at import: a hybrid kernel is compiled by MindSpore's AKG build server
at the first launch of each (kernel, shapes, dtypes).
"""
