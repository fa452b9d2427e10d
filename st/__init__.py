"""System tests: real MindSpore graphs in PYNATIVE and GRAPH mode. The seed examples
live in the package (ms_scatter.seed_examples) so that the demo and these tests share
them."""
