"""ms-scatter: MindSpore's scatter family as a plugin, on its own kernels.

`pip install .` maps ops/ -> ms_scatter, infer/ -> ms_scatter.infer,
kernels/ -> ms_scatter.kernels, and builds the CPU kernel library
ms_scatter/kernels/libms_scatter_cpu.so with optimisation on. Nothing is compiled at
import or at first call.

Build switches (environment variables at install time):
  MS_SCATTER_PORTABLE=1   build for baseline x86-64 instead of the installing machine's
                          vector width (-march=native); measured 1.5-1.7x slower.
  MS_SCATTER_CXXFLAGS     extra compiler flags (e.g. sanitizers for a test build).
  MS_SCATTER_GPU          unset: build the CUDA library ms_scatter/kernels/libms_scatter_gpu.so
                          when nvcc is found; 1: require it (fail without nvcc); 0: never.
  MS_SCATTER_NVCC         the nvcc to use (empty: act as if there were none).
  MS_SCATTER_CUDA_ARCHS   comma-separated SM versions (default 75,80,86,89,90 + PTX).
  MS_SCATTER_NVCC_FLAGS   extra nvcc flags; MS_SCATTER_CUDART=static|shared (default static).
  MS_SCATTER_ASCEND       unset: build the Ascend kernels (a CANN custom-op package, installed as
                          ms_scatter/kernels/ascend/opp/vendors/ms_scatter) when a CANN toolkit is
                          found; 1: require it (fail without CANN); 0: never.
  MS_SCATTER_CANN         the CANN toolkit root (empty: act as if there were none); default
                          $ASCEND_HOME_PATH and the usual install paths (kernels/ascend/build_ascend.py).
  MS_SCATTER_ASCEND_SOCS  ';'-separated SoCs (default ascend910b;ascend910_93).
"""
import importlib.util
import os
import re

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
CPU_LIBRARY = "ms_scatter.kernels.libms_scatter_cpu"


def version():
    """The version in ops/_version.py, the one source (ms_scatter.__version__ imports it)."""
    text = open(os.path.join(HERE, "ops", "_version.py"), encoding="utf-8").read()
    return re.search(r'^__version__ = "([^"]+)"$', text, re.M).group(1)


# What `sphinx-build -W docs` needs (the docs extra; the test extra too, so that the README's test
# command builds the site): versions that run on Python 3.9-3.11.
DOCS_REQUIRES = ["sphinx==7.4.7", "myst-parser==3.0.1", "furo==2024.8.6"]


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

    def run(self):
        super().run()
        self.build_gpu()
        self.build_ascend()

    def _load(self, name, *path):
        spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, *path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    def build_ascend(self):
        wanted = os.environ.get("MS_SCATTER_ASCEND", "")
        if wanted == "0":
            print("ms_scatter: Ascend kernels not built (MS_SCATTER_ASCEND=0)")
            return
        build_ascend = self._load("ms_scatter_build_ascend", "kernels", "ascend", "build_ascend.py")
        cann = build_ascend.find_cann()
        if not cann:
            if wanted == "1":
                raise RuntimeError("MS_SCATTER_ASCEND=1 but no CANN toolkit was found (set MS_SCATTER_CANN or "
                                   "ASCEND_HOME_PATH, or source the toolkit's set_env.sh)")
            print("ms_scatter: no CANN toolkit found; the Ascend kernels are not built")
            return
        base = os.path.join(HERE, "kernels") if self.inplace else os.path.join(self.build_lib, "ms_scatter", "kernels")
        socs = tuple(s for s in os.environ.get("MS_SCATTER_ASCEND_SOCS", "").split(";") if s) or \
            build_ascend.DEFAULT_SOCS
        build_ascend.build(os.path.join(base, "ascend", "opp"), cann, socs,
                           work=os.path.join(os.path.abspath(self.build_temp), "ascend"), verbose=True)

    def build_gpu(self):
        wanted = os.environ.get("MS_SCATTER_GPU", "")
        if wanted == "0":
            print("ms_scatter: GPU library not built (MS_SCATTER_GPU=0)")
            return
        build_gpu = self._load("ms_scatter_build_gpu", "kernels", "gpu", "build_gpu.py")
        nvcc = build_gpu.find_nvcc()
        if not nvcc:
            if wanted == "1":
                raise RuntimeError("MS_SCATTER_GPU=1 but no nvcc was found")
            print("ms_scatter: no CUDA compiler found; the GPU library is not built (CPU only)")
            return
        base = os.path.join(HERE, "kernels") if self.inplace else os.path.join(self.build_lib, "ms_scatter", "kernels")
        os.makedirs(base, exist_ok=True)
        archs = [a for a in os.environ.get("MS_SCATTER_CUDA_ARCHS", "").split(",") if a] or build_gpu.default_archs(nvcc)
        print(f"ms_scatter: building the GPU library with {nvcc} for sm_{', sm_'.join(archs)}")
        build_gpu.build(os.path.join(base, "libms_scatter_gpu.so"), nvcc, archs=tuple(archs),
                        extra_flags=tuple(os.environ.get("MS_SCATTER_NVCC_FLAGS", "").split()),
                        cudart=os.environ.get("MS_SCATTER_CUDART", "static"))


setup(
    name="ms-scatter",
    version=version(),
    description="MindSpore scatter operators (ScatterAdd ... TensorScatterUpdate) as a Custom-op plugin",
    long_description=open(os.path.join(HERE, "README.md"), encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    classifiers=[
        "Development Status :: 4 - Beta",
        "Intended Audience :: Developers",
        "Intended Audience :: Science/Research",
        "License :: OSI Approved :: Apache Software License",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: C++",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3 :: Only",
        "Programming Language :: Python :: 3.9",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    python_requires=">=3.9",
    packages=["ms_scatter", "ms_scatter.patch", "ms_scatter.infer", "ms_scatter.kernels", "ms_scatter.kernels.ascend"],
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
        "test": ["pytest", "hypothesis"] + DOCS_REQUIRES,
        "docs": DOCS_REQUIRES,
        "bench": ["matplotlib", "torch==2.13.0", "jax[cpu]==0.7.1"],  # torch 2.13 CPU wheel; jax 0.7 works with numpy<2
    },
    zip_safe=False,
)
