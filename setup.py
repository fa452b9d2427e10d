"""ms-scatter: MindSpore's scatter family as a plugin, on its own kernels.

`pip install .` maps ops/ -> ms_scatter, infer/ -> ms_scatter.infer,
kernels/ -> ms_scatter.kernels, and builds the CPU kernel library once per variant of the
machine's architecture (kernels/cpu_variants.py: x86-64-v4, -v3 and the -v2 baseline;
armv8-a), in parallel, as ms_scatter/kernels/libms_scatter_cpu.<variant>.so plus
cpu_variants.json (kernels/cpu/build_cpu.py); `import ms_scatter` loads the best one this
CPU runs. Nothing is compiled at import or at first call.

Build switches (environment variables at install time):
  MS_SCATTER_CPU_VARIANTS comma-separated variants to build (default: all of the architecture's;
                          the baseline is always built).
  MS_SCATTER_NATIVE=1     also build a -march=native variant, loaded first on a CPU with every
                          feature of the building one (a wheel built so is for that machine).
  MS_SCATTER_BUILD_JOBS   compilers run at once (default: the CPUs, at most the variants).
  MS_SCATTER_PORTABLE     retired: every build is portable now (the variants); setting it
                          changes nothing but a note.
  MS_SCATTER_CXXFLAGS     extra compiler flags (e.g. sanitizers for a test build).
  MS_SCATTER_GPU          unset: build the CUDA library ms_scatter/kernels/libms_scatter_gpu.so
                          when nvcc is found and the machine has the NVIDIA driver (a GPU to run
                          it); 1: require it (fail without nvcc; no driver needed); 0: never.
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
import ctypes
import importlib.util
import os
import re

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
# The CPU variants are built by kernels/cpu/build_cpu.py; this Extension stands for them (it
# makes the wheel a platform wheel), its file being the manifest the build writes.
CPU_LIBRARY = "ms_scatter.kernels.libms_scatter_cpu"


def version():
    """The version in ops/_version.py, the one source (ms_scatter.__version__ imports it)."""
    text = open(os.path.join(HERE, "ops", "_version.py"), encoding="utf-8").read()
    return re.search(r'^__version__ = "([^"]+)"$', text, re.M).group(1)


# What `sphinx-build -W docs` needs (the docs extra; the test extra too, so that the README's test
# command builds the site): versions that run on Python 3.9-3.12.
# (sphinx-mathjax-offline: MathJax ships inside the site, so formulas render offline)
DOCS_REQUIRES = ["sphinx==7.4.7", "myst-parser==3.0.1", "furo==2024.8.6", "sphinx-mathjax-offline==0.0.2"]


class BuildKernels(build_ext):
    """Builds the kernel libraries as plain shared objects (MindSpore dlopens them)."""

    def get_ext_filename(self, fullname):
        name = super().get_ext_filename(fullname)
        if fullname == CPU_LIBRARY:
            name = os.path.join(os.path.dirname(name), "cpu_variants.json")
        return name

    def get_export_symbols(self, ext):
        return []  # not Python modules: no PyInit_ symbol

    def run(self):
        super().run()
        self.build_gpu()
        self.build_ascend()

    def build_extension(self, ext):
        if ext.name != CPU_LIBRARY:
            return super().build_extension(ext)
        if os.environ.get("MS_SCATTER_PORTABLE"):
            print("ms_scatter: MS_SCATTER_PORTABLE is retired: every build is portable (the CPU variants); "
                  "MS_SCATTER_CPU_VARIANTS=x86-64-v2 builds the baseline alone")
        build_cpu = self._load("ms_scatter_build_cpu", "kernels", "cpu", "build_cpu.py")
        names = [n for n in os.environ.get("MS_SCATTER_CPU_VARIANTS", "").split(",") if n]
        jobs = int(os.environ.get("MS_SCATTER_BUILD_JOBS", "0") or 0) or None
        build_cpu.build(os.path.dirname(self.get_ext_fullpath(ext.name)), names or None,
                        native=os.environ.get("MS_SCATTER_NATIVE", "0") == "1",
                        extra=tuple(os.environ.get("MS_SCATTER_CXXFLAGS", "").split()), jobs=jobs)
        return None

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
        base = os.path.join(HERE, "kernels") if self.inplace else os.path.join(self.build_lib, "ms_scatter", "kernels")
        stale = os.path.join(base, "libms_scatter_gpu.so")  # an earlier build's, never shipped by this one
        if wanted == "0":
            print("ms_scatter: GPU library not built (MS_SCATTER_GPU=0)")
            if os.path.exists(stale):
                os.remove(stale)
            return
        if wanted != "1" and not _nvidia_driver():
            print("ms_scatter: no NVIDIA driver on this machine, so no GPU to run CUDA kernels: the GPU library "
                  "is not built (MS_SCATTER_GPU=1 builds it anyway, e.g. for a wheel)")
            if os.path.exists(stale):
                os.remove(stale)
            return
        build_gpu = self._load("ms_scatter_build_gpu", "kernels", "gpu", "build_gpu.py")
        nvcc = build_gpu.find_nvcc()
        if not nvcc:
            if wanted == "1":
                raise RuntimeError("MS_SCATTER_GPU=1 but no nvcc was found")
            print("ms_scatter: no CUDA compiler found; the GPU library is not built (CPU only)")
            if os.path.exists(stale):
                os.remove(stale)
            return
        os.makedirs(base, exist_ok=True)
        archs = [a for a in os.environ.get("MS_SCATTER_CUDA_ARCHS", "").split(",") if a] or build_gpu.default_archs(nvcc)
        print(f"ms_scatter: building the GPU library with {nvcc} for sm_{', sm_'.join(archs)}")
        build_gpu.build(os.path.join(base, "libms_scatter_gpu.so"), nvcc, archs=tuple(archs),
                        extra_flags=tuple(os.environ.get("MS_SCATTER_NVCC_FLAGS", "").split()),
                        cudart=os.environ.get("MS_SCATTER_CUDART", "static"))


def _nvidia_driver():
    """Whether this machine has the NVIDIA driver (its libcuda), without which no CUDA kernel runs."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


class PlatformWheel(bdist_wheel):
    """The kernel libraries are plain shared objects that MindSpore loads (no CPython API):
    the wheel is py3-none-<platform>, one for every Python MindSpore has wheels for."""

    def get_tag(self):
        return ("py3", "none") + tuple(super().get_tag()[2:])


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
        "Programming Language :: Python :: 3.12",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    python_requires=">=3.9,<3.13",  # where MindSpore 2.7.1-2.10 have wheels (README)
    packages=["ms_scatter", "ms_scatter.patch", "ms_scatter.infer", "ms_scatter.kernels", "ms_scatter.kernels.ascend"],
    package_dir={"ms_scatter": "ops", "ms_scatter.infer": "infer", "ms_scatter.kernels": "kernels"},
    package_data={"ms_scatter": ["__init__.pyi", "py.typed"]},  # the 42 names for IDEs and type checkers (_stub.py)
    ext_modules=[
        Extension(CPU_LIBRARY, sources=["kernels/cpu/scatter_cpu.cc", "kernels/cpu/glibc_compat.cc"],
                  depends=[os.path.join(d, f) for d in ("kernels/include/ms_scatter", "kernels/cpu")
                           for f in sorted(os.listdir(os.path.join(HERE, d))) if f.endswith((".h", ".py"))],
                  language="c++")
    ],
    cmdclass={"build_ext": BuildKernels, "bdist_wheel": PlatformWheel},
    # the releases tested (README, Quick start); MindSpore before 2.11 needs NumPy 1.x
    install_requires=["mindspore>=2.7.1,<2.11", "numpy<2"],
    extras_require={
        "test": ["pytest", "pytest-xdist", "hypothesis", "mypy"] + DOCS_REQUIRES,
        "docs": DOCS_REQUIRES,
        "bench": ["matplotlib", "torch==2.13.0", "jax[cpu]==0.7.1"],  # torch 2.13 CPU wheel; jax 0.7 works with numpy<2
    },
    zip_safe=False,
)
