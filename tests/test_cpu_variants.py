"""The CPU library's variants (kernels/cpu_variants.py, built by kernels/cpu/build_cpu.py).

* the variant loaded is the first built one this CPU runs, or MS_SCATTER_CPU_VARIANT's
  (and a clear error for a name not built or a variant this CPU cannot run);
* the kernel oracle suite (tests/test_kernels.py) on every other variant this CPU runs, in a
  subprocess each (MS_SCATTER_CPU_VARIANT=<name>), ~45 s a variant;
* the instructions: the baseline has no AVX register (ymm/zmm) and no F16C conversion, the
  x86-64-v3 build has both (so that the check can fail);
* what a library needs of the machine it runs on: no glibc symbol above GLIBC_2.28, no
  libstdc++ (GLIBCXX/CXXABI), only system libraries a manylinux wheel may use, and it
  exports only our entry points.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

import ms_scatter
from ms_scatter import _lib
from ms_scatter.kernels import cpu_variants

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILT = cpu_variants.read_manifest(_lib.KERNEL_DIR)
NAMES = [v["name"] for v in BUILT]
RUNNABLE = cpu_variants.runnable(_lib.KERNEL_DIR)
FILES = {v["name"]: os.path.join(_lib.KERNEL_DIR, v["file"]) for v in BUILT}
MANYLINUX_GLIBC = (2, 28)
MANYLINUX_LIBGCC = (7, 0, 0)  # libgcc_s versions a manylinux_2_28 wheel may need
SYSTEM_LIBRARIES = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1",
                    "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
EXPORTED = re.compile(r"^(Scatter|TensorScatter|UnsortedSegment|Gspmm|Gsddmm|SegmentArg|SegmentSoftmax|SegmentReduce|SegmentCsr|ms_scatter_)\w*$")


def _env(**extra):
    env = dict(os.environ, MS_SCATTER_QUIET="1", GLOG_v="3")
    env.pop(cpu_variants.ENV_FORCE, None)
    env.update(extra)
    return env


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found (binutils)")
    return path


# ------------------------------------------------------------------ which variant is loaded

def test_the_loaded_variant_is_the_best_this_cpu_runs():
    assert BUILT and NAMES[-1] in RUNNABLE, (NAMES, RUNNABLE)  # the baseline runs everywhere it is meant to
    for name in NAMES:
        assert os.path.isfile(FILES[name]), name
    forced = os.environ.get(cpu_variants.ENV_FORCE)
    assert ms_scatter.cpu_variant() == (forced or RUNNABLE[0])
    assert ms_scatter._lib.CPU_LIBRARY == FILES[ms_scatter.cpu_variant()]
    if cpu_variants.machine() == "x86_64":
        assert NAMES[-3:] == ["x86-64-v4", "x86-64-v3", "x86-64-v2"]


def _variants(*specs):
    return [{"name": n, "file": cpu_variants.library_file(n), "requires": list(r)} for n, r in specs]


def test_choice_rules():
    built = _variants(("native", ("avx512f", "avx2", "sha_ni")), ("v4", ("avx512f", "avx2")), ("v3", ("avx2",)),
                      ("v2", ("sse4_2",)))
    choose = cpu_variants.choose
    assert choose(built, frozenset({"sse4_2", "avx2", "avx512f", "sha_ni"}))["name"] == "native"
    assert choose(built, frozenset({"sse4_2", "avx2", "avx512f"}))["name"] == "v4"
    assert choose(built, frozenset({"sse4_2", "avx2"}))["name"] == "v3"
    assert choose(built, frozenset({"sse4_2"}))["name"] == "v2"
    assert choose(built, None)["name"] == "v2"  # features unknown: the baseline
    assert choose(built, frozenset({"sse4_2", "avx2", "avx512f"}), "v3")["name"] == "v3"
    assert choose(built, None, "v4")["name"] == "v4"  # cannot check: as asked
    with pytest.raises(ValueError, match=r"^For 'MS_SCATTER_CPU_VARIANT', the value must be one of the variants "
                                         r"built \(native, v4, v3, v2\), but got 'v5'\.$"):
        choose(built, frozenset({"sse4_2"}), "v5")
    with pytest.raises(ValueError, match=r"^For 'MS_SCATTER_CPU_VARIANT', the variant must be one this CPU can run "
                                         r"\(v3, v2; v4 needs avx512f\), but got 'v4'\.$"):
        choose(built, frozenset({"sse4_2", "avx2"}), "v4")
    with pytest.raises(RuntimeError, match="can run none of the CPU kernel builds .* v2 needs sse4_2"):
        choose(built, frozenset({"sse2"}))


def test_cpu_features_parse(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 avx2\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_variants.cpu_features(str(x86)) == {"fpu", "sse4_2", "avx2"}  # the first processor's
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd evtstrm fphp asimdhp\n")
    assert cpu_variants.cpu_features(str(arm)) == {"fp", "asimd", "evtstrm", "fphp", "asimdhp"}
    assert cpu_variants.cpu_features(str(tmp_path / "none")) is None
    assert cpu_variants.isa_features({"avx512f", "hypervisor", "constant_tsc", "sha_ni", "asimd"}) == \
        ["asimd", "avx512f", "sha_ni"]


def test_build_list():
    x86 = cpu_variants.build_list("x86_64")
    assert [v[0] for v in x86] == ["x86-64-v4", "x86-64-v3", "x86-64-v2"]
    assert [v[0] for v in cpu_variants.build_list("x86_64", ["x86-64-v3"])] == ["x86-64-v3", "x86-64-v2"]
    native = cpu_variants.build_list("x86_64", native=True)
    assert native[0][0] == "native" and native[0][1] == ("-march=native",)
    assert [v[0] for v in cpu_variants.build_list("aarch64")] == ["armv8-a"]
    with pytest.raises(ValueError, match="For 'MS_SCATTER_CPU_VARIANTS', each name must be one of"):
        cpu_variants.build_list("x86_64", ["x86-64-v9"])


def _import_in_subprocess(variant):
    code = "import ms_scatter; print('LOADED', ms_scatter.cpu_variant(), ms_scatter._lib.CPU_LIBRARY)"
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(MS_SCATTER_CPU_VARIANT=variant),
                          capture_output=True, text=True, timeout=300)


def test_forcing_a_variant_that_is_not_built_fails_at_import():
    proc = _import_in_subprocess("x86-64-v9")
    assert proc.returncode != 0 and "LOADED" not in proc.stdout
    assert (f"ValueError: For 'MS_SCATTER_CPU_VARIANT', the value must be one of the variants built "
            f"({', '.join(NAMES)}), but got 'x86-64-v9'.") in proc.stderr, proc.stderr[-2000:]


def test_forcing_a_variant_this_cpu_cannot_run_fails_at_import():
    cannot = [n for n in NAMES if n not in RUNNABLE]
    if not cannot:
        pytest.skip(f"this CPU runs every variant built ({', '.join(NAMES)}); test_choice_rules covers the rule")
    proc = _import_in_subprocess(cannot[0])
    assert proc.returncode != 0 and "the variant must be one this CPU can run" in proc.stderr, proc.stderr[-2000:]


OTHER_VARIANTS = [n for n in RUNNABLE if n != ms_scatter.cpu_variant()]


@pytest.fixture(scope="module")
def oracle_suite_runs(tmp_path_factory):
    """tests/test_kernels.py in one subprocess per other variant, started together (each is
    one Python process: on 2 cores two variants take the time of one)."""
    out = tmp_path_factory.mktemp("variants")
    procs = {}
    for variant in OTHER_VARIANTS:
        log = open(out / f"{variant}.log", "w+")
        procs[variant] = (subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                                            "tests/test_kernels.py"], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                           text=True, env=_env(MS_SCATTER_CPU_VARIANT=variant)), log)
    yield procs
    for proc, log in procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


@pytest.mark.parametrize("variant", OTHER_VARIANTS or ["(none)"])
def test_kernel_oracle_suite_on_every_variant(variant, oracle_suite_runs):
    """tests/test_kernels.py (every entry point x dtype x index dtype against the oracle, the
    policies, the multi-thread path) on a variant this process did not load."""
    if variant == "(none)":
        pytest.skip("this CPU runs only the variant already tested by tests/test_kernels.py")
    proc, log = oracle_suite_runs[variant]
    rc = proc.wait(timeout=1200)
    log.seek(0)
    output = log.read()
    tail = output[-4000:]
    assert f"ms_scatter CPU variant: {variant} ({cpu_variants.library_file(variant)})" in output, tail
    assert rc == 0 and re.search(r"\b\d{4,} passed\b", output), tail


@pytest.mark.parametrize("variant", RUNNABLE)
def test_fused_kernels_give_the_loop_oracles_bits_on_every_variant(variant):
    """The fused message-passing and segment-arg kernels (kernels/cpu/message.h) against the
    sanitizer driver's loop oracles, bit for bit, on each variant this CPU runs (an FMA that
    the compiler fused on one variant only would change the last bit there)."""
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "_sanitize_driver.py"), "--library",
                           FILES[variant], "--sections", "message"], capture_output=True, text=True, timeout=600,
                          env=_env())
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and re.search(r"sanitize driver: \d+ kernel calls, 0 failures", output), output[-4000:]


# ------------------------------------------------------------------ instructions

def _disassembly(path):
    return subprocess.run([_tool("objdump"), "-d", "--no-show-raw-insn", path], check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.skipif(cpu_variants.machine() != "x86_64", reason="x86-64 levels only")
def test_baseline_has_no_avx_and_v3_has_it():
    base = _disassembly(FILES["x86-64-v2"])
    assert not re.search(r"%[yz]mm\d", base), "the x86-64-v2 baseline uses AVX registers"
    assert "vcvtph2ps" not in base and "vcvtps2ph" not in base
    assert re.search(r"%xmm\d", base)  # SSE, as x86-64-v2 allows
    v3 = _disassembly(FILES["x86-64-v3"])
    assert re.search(r"%ymm\d", v3) and "vcvtph2ps" in v3 and "vcvtps2ph" in v3  # AVX2 and F16C
    assert not re.search(r"%zmm\d", v3), "x86-64-v3 uses AVX-512 registers"


@pytest.mark.skipif(cpu_variants.machine() != "x86_64", reason="x86-64 levels only")
@pytest.mark.parametrize("variant", [n for n in NAMES if n.startswith("x86-64")])
def test_float16_never_calls_libgcc(variant):
    # GCC 12 without AVX-512 FP16 emulates _Float16 comparisons in libgcc (__eqhf2, __nehf2, ...):
    # a call per element, which kept the v3 float16 Max/Min rows scalar and 2-5x slower.
    calls = sorted(set(re.findall(r"call\s+[0-9a-f]+ <(__\w*hf\w*)(?:@plt)?>", _disassembly(FILES[variant]))))
    assert not calls, f"{variant} calls libgcc's float16 helpers: {calls}"


# ------------------------------------------------------------------ what a library needs

def _dynamic_symbols(path):
    return subprocess.run([_tool("objdump"), "-T", path], check=True, capture_output=True, text=True).stdout


def _version(text):
    return tuple(int(p) for p in text.split("."))


@pytest.mark.parametrize("variant", NAMES)
def test_library_needs_nothing_of_the_build_machine(variant):
    path = FILES[variant]
    table = _dynamic_symbols(path)
    glibc = [_version(v) for v in re.findall(r"\bGLIBC_(\d+(?:\.\d+)+)", table)]
    assert glibc and max(glibc) <= MANYLINUX_GLIBC, \
        [line for line in table.splitlines() if re.search(r"GLIBC_2\.(29|[3-9]\d)", line)]
    assert not re.search(r"GLIBCXX_|CXXABI_", table), "the library needs the system's libstdc++"
    gcc = [_version(v) for v in re.findall(r"\bGCC_(\d+(?:\.\d+)+)", table)]
    assert not gcc or max(gcc) <= MANYLINUX_LIBGCC, \
        [line for line in table.splitlines() if re.search(r"GCC_([89]|\d\d)", line)]  # manylinux_2_28 allows GCC_7.0.0
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                            subprocess.run([_tool("readelf"), "-d", path], check=True, capture_output=True,
                                           text=True).stdout))
    assert needed and needed <= SYSTEM_LIBRARIES, needed - SYSTEM_LIBRARIES
    defined = [line.split()[-1] for line in table.splitlines()
               if re.match(r"^[0-9a-f]{8,}\s", line) and "*UND*" not in line and (" DF " in line or " DO " in line)]
    assert defined and all(EXPORTED.match(name) for name in defined), [n for n in defined if not EXPORTED.match(n)]
