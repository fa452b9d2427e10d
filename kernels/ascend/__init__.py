"""Ascend backend of ms_scatter: a CANN custom-op package (vendor "ms_scatter", ops MsScatterNd<R>).

Sources: scatter_core.h (the CANN-free engine: tiling, checks, the per-core loop),
op_host/ (op definitions, inference, tiling), op_kernel/ (the Ascend C kernel layer),
build_ascend.py (the build, run by ``pip install .`` where a CANN toolkit is found),
check_ascend.py (the check for an Ascend host). The built package, if any, is in opp/vendors/ms_scatter;
``python -m ms_scatter.kernels.ascend`` says whether it is there and prints the
ASCEND_CUSTOM_OPP_PATH line that makes it visible to MindSpore. Nothing is compiled at import.
"""
