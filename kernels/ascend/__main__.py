"""``python -m ms_scatter.kernels.ascend``: where ms_scatter's Ascend package is, and the line that
makes it visible to MindSpore (``import ms_scatter`` sets the variable itself, which is enough
when it happens before the process runs its first Ascend op)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = os.path.join(HERE, "opp", "vendors", "ms_scatter")


def main():
    if os.path.isfile(os.path.join(VENDOR, "op_api", "lib", "libcust_opapi.so")):
        print(f"export ASCEND_CUSTOM_OPP_PATH={VENDOR}${{ASCEND_CUSTOM_OPP_PATH:+:$ASCEND_CUSTOM_OPP_PATH}}")
        return 0
    print(f"ms_scatter: no Ascend package at {VENDOR}: it is built by 'pip install .' only where a CANN toolkit "
          "is found (MS_SCATTER_ASCEND=1 makes that a requirement).", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
