"""ms-scatter: MindSpore's scatter family as a plugin, on its own kernels.

`pip install .` maps ops/ -> ms_scatter, infer/ -> ms_scatter.infer,
kernels/ -> ms_scatter.kernels, and builds the CPU kernel library
ms_scatter/kernels/libms_scatter_cpu.so with optimisation on. Nothing is compiled at
import or at first call.

Build switches (environment variables at install time):
  MS_SCATTER_PORTABLE=1   build for baseline x86-64 instead of the installing machine's
                          vector width (-march=native); measured 1.5-1.7x slower.
  MS_SCATTER_CXXFLAGS     extra compiler flags (e.g. sanitizers for a test build).
"""
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_LIBRARY = "ms_scatter.kernels.libms_scatter_cpu"


def cpu_flags():
    flags = ["-O3", "-std=c++17", "-fno-math-errno", "-fvisibility=hidden", "-Wall"]
    if os.environ.get("MS_SCATTER_PORTABLE", "0") != "1":
        flags.append("-march=native")
    flags += os.environ.get("MS_SCATTER_CXXFLAGS", "").split()
    return flags


class BuildKernels(build_ext):
    """Builds the kernel libraries as plain shared objects (MindSpore dlopens them)."""

    def get_ext_filename(self, fullname):
        name = super().get_ext_filename(fullname)
        if fullname.split(".")[-1] == CPU_LIBRARY.split(".")[-1]:
            name = os.path.join(os.path.dirname(name), CPU_LIBRARY.split(".")[-1] + ".so")
        return name

    def get_export_symbols(self, ext):
        return []  # not Python modules: no PyInit_ symbol


setup(
    name="ms-scatter",
    version="0.1.0",
    description="MindSpore scatter operators (ScatterAdd ... TensorScatterUpdate) as a Custom-op plugin",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.9",
    packages=["ms_scatter", "ms_scatter.infer", "ms_scatter.kernels"],
    package_dir={"ms_scatter": "ops", "ms_scatter.infer": "infer", "ms_scatter.kernels": "kernels"},
    ext_modules=[
        Extension(
            CPU_LIBRARY,
            sources=["kernels/cpu/scatter_cpu.cc"],
            include_dirs=["kernels/include"],
            depends=[os.path.join(d, f) for d in ("kernels/include/ms_scatter", "kernels/cpu")
                     for f in sorted(os.listdir(os.path.join(HERE, d))) if f.endswith(".h")],
            language="c++",
            extra_compile_args=cpu_flags(),
            extra_link_args=["-pthread"],
        )
    ],
    cmdclass={"build_ext": BuildKernels},
    install_requires=["mindspore==2.10.0", "numpy<2"],
    extras_require={
        "test": ["pytest", "hypothesis", "decorator"],
        "bench": ["matplotlib", "torch", "jax[cpu]"],
    },
    zip_safe=False,
)
