"""Every printed example of the reference pages (MindSpore's ScatterSub, ScatterMin,
ScatterAdd and tensor_scatter_max docs), verbatim: inputs and the printed output.

Used by the demo (python -m ms_scatter) and by st/test_seeds.py.
"""
_Z = [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
_U2 = [[[1.0, 1.0, 1.0], [3.0, 3.0, 3.0]], [[7.0, 7.0, 7.0], [9.0, 9.0, 9.0]]]
_ONES223 = [[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]

SEED_EXAMPLES = [
    {"page": "ScatterSub", "op": "ScatterSub", "kind": "primitive",
     "input_x": [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], "indices": [[0, 1]],
     "updates": [[[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]],
     "expected": "[[-1. -1. -1.]\n [-1. -1. -1.]]"},
    {"page": "ScatterSub", "op": "ScatterSub", "kind": "primitive",
     "input_x": _Z, "indices": [[0, 1], [1, 1]], "updates": _U2,
     "expected": "[[ -1.  -1.  -1.]\n [-19. -19. -19.]]"},
    {"page": "ScatterSub", "op": "ScatterSub", "kind": "primitive",
     "input_x": _Z, "indices": [[1, 0], [1, 1]], "updates": _U2,
     "expected": "[[ -3.  -3.  -3.]\n [-17. -17. -17.]]"},
    {"page": "ScatterSub", "op": "ScatterSub", "kind": "primitive",
     "input_x": _Z, "indices": [[0, 1], [0, 1]], "updates": _U2,
     "expected": "[[ -8.  -8.  -8.]\n [-12. -12. -12.]]"},
    {"page": "ScatterMin", "op": "ScatterMin", "kind": "primitive",
     "input_x": [[0.0, 1.0, 2.0], [0.0, 0.0, 0.0]], "indices": [[0, 0], [1, 1]], "updates": _ONES223,
     "expected": "[[0. 1. 1.]\n [0. 0. 0.]]"},
    {"page": "ScatterAdd", "op": "ScatterAdd", "kind": "primitive",
     "input_x": _Z, "indices": [[0, 1], [1, 1]], "updates": _ONES223,
     "expected": "[[1. 1. 1.]\n [3. 3. 3.]]"},
    {"page": "ScatterAdd", "op": "ScatterAdd", "kind": "primitive",
     "input_x": _Z, "indices": [[0, 1], [1, 1]], "updates": _U2,
     "expected": "[[ 1.  1.  1.]\n [19. 19. 19.]]"},
    {"page": "ScatterAdd", "op": "ScatterAdd", "kind": "primitive",
     "input_x": _Z, "indices": [[1, 0], [1, 1]], "updates": _U2,
     "expected": "[[ 3.  3.  3.]\n [17. 17. 17.]]"},
    {"page": "ScatterAdd", "op": "ScatterAdd", "kind": "primitive",
     "input_x": _Z, "indices": [[0, 1], [0, 1]], "updates": _U2,
     "expected": "[[ 8.  8.  8.]\n [12. 12. 12.]]"},
    {"page": "tensor_scatter_max", "op": "tensor_scatter_max", "kind": "function",
     "input_x": [[-0.1, 0.3, 3.6], [0.4, 0.5, -3.2]], "indices": [[0, 0], [0, 0]], "updates": [1.0, 2.2],
     "expected": "[[ 2.2  0.3  3.6]\n [ 0.4  0.5 -3.2]]"},
]
for _example in SEED_EXAMPLES:
    _example.setdefault("dtype", "float32")
    _example.setdefault("indices_dtype", "int32")


def run_example(example, mode):
    """Run one example through ms_scatter in `mode` ("PYNATIVE" or "GRAPH"); returns the
    output Tensor. In GRAPH mode the call sits in an nn.Cell holding the Parameter."""
    import numpy as np
    import mindspore as ms
    from mindspore import Parameter, Tensor, nn

    import ms_scatter

    ms.set_context(mode=ms.GRAPH_MODE if mode == "GRAPH" else ms.PYNATIVE_MODE)
    dtype = getattr(ms, example["dtype"])
    x = Tensor(np.array(example["input_x"]), dtype)
    indices = Tensor(np.array(example["indices"]), getattr(ms, example["indices_dtype"]))
    updates = Tensor(np.array(example["updates"]), dtype)
    if example["kind"] == "primitive":
        call = getattr(ms_scatter, example["op"])()
        x = Parameter(x, name="input_x")
    else:
        call = getattr(ms_scatter, example["op"])
    if mode != "GRAPH":
        return call(x, indices, updates)

    class Net(nn.Cell):
        def __init__(self, target, fn):
            super().__init__()
            self.target = target
            self.fn = fn

        def construct(self, i, u):
            return self.fn(self.target, i, u)

    return Net(x, call)(indices, updates)
