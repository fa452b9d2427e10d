"""python -m ms_scatter: run every example of the reference pages through ms_scatter in
PYNATIVE and GRAPH mode and print each output next to the expected one."""
import sys

import mindspore as ms

from .seed_examples import SEED_EXAMPLES, run_example


def main():
    if hasattr(ms, "set_device"):  # MindSpore 2.7+: set_context(device_target=...) is deprecated
        ms.set_device("CPU")
    else:  # pragma: no cover - older MindSpore
        ms.set_context(device_target="CPU")
    failures = 0
    for mode in ("PYNATIVE", "GRAPH"):
        print(f"==================== {mode}_MODE ====================")
        for n, example in enumerate(SEED_EXAMPLES, 1):
            got = str(run_example(example, mode))
            ok = got == example["expected"]
            failures += not ok
            call = f"ms_scatter.{example['op']}" + ("()" if example["kind"] == "primitive" else "")
            print(f"--- {example['page']} example {n}: {call}(input_x, indices, updates)"
                  f"  [{'OK' if ok else 'MISMATCH'}]")
            print(f"input_x = {example['input_x']}\nindices = {example['indices']}\nupdates = {example['updates']}")
            got_lines, exp_lines = got.splitlines(), example["expected"].splitlines()
            width = max(len(line) for line in got_lines + ["ours"])
            print(f"{'ours':<{width}}    expected")
            for i in range(max(len(got_lines), len(exp_lines))):
                a = got_lines[i] if i < len(got_lines) else ""
                b = exp_lines[i] if i < len(exp_lines) else ""
                print(f"{a:<{width}}    {b}")
    total = 2 * len(SEED_EXAMPLES)
    print(f"\n{total - failures} of {total} seed outputs match the reference pages exactly.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
