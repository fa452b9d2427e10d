"""The builds ("variants") of the CPU kernel library, and the choice of one for this CPU.

``pip install .`` compiles the same source once per variant of the machine's architecture
(kernels/cpu/build_cpu.py) into ``libms_scatter_cpu.<variant>.so`` and writes the list it
built, best first, to ``cpu_variants.json`` next to them. MindSpore loads an aot library by
path, so choosing a variant is choosing a file: at import, ms_scatter takes the first
listed variant whose CPU features this CPU has (read once from /proc/cpuinfo), or the one
``MS_SCATTER_CPU_VARIANT`` names. Nothing here imports MindSpore or compiles anything.
"""
import json
import os
import platform
import re

MANIFEST = "cpu_variants.json"
ENV_FORCE = "MS_SCATTER_CPU_VARIANT"

# x86-64 micro-architecture levels (the psABI's), as /proc/cpuinfo names their features.
_X86_V2 = ("cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3")
_X86_V3 = _X86_V2 + ("abm", "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "movbe", "xsave")
_X86_V4 = _X86_V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")

# Per architecture (platform.machine()): (name, compiler flags, features the CPU needs), best
# first; the last is the baseline, built always. AArch64 has one: its float16 conversions
# (fcvt, and NEON's fcvtl/fcvtn for 4 lanes) are baseline ARMv8-A.
VARIANTS = {
    "x86_64": (
        ("x86-64-v4", ("-march=x86-64-v4", "-mtune=generic"), _X86_V4),
        ("x86-64-v3", ("-march=x86-64-v3", "-mtune=generic"), _X86_V3),
        ("x86-64-v2", ("-march=x86-64-v2", "-mtune=generic"), _X86_V2),
    ),
    "aarch64": (
        ("armv8-a", ("-march=armv8-a",), ("fp", "asimd")),
    ),
}
NATIVE = "native"  # MS_SCATTER_NATIVE=1 at install: -march=native, listed first

# Feature names -march=native may turn on (x86 /proc/cpuinfo "flags", aarch64 "Features"):
# the native variant needs every one of them that the building CPU had.
_ISA_FEATURE = re.compile(
    r"^(sse\w*|ssse3|pni|avx\w*|fma\w*|f16c|bmi\d|adx|aes|vaes|pclmulqdq|vpclmulqdq|sha_ni|gfni|movbe|popcnt|abm|"
    r"cx16|lahf_lm|xsave\w*|rdrand|rdseed|clflushopt|clwb|prfchw|3dnowprefetch|xop|tbm|clzero|mwaitx|rdpid|"
    r"movdir\w*|serialize|amx\w*|fp|asimd\w*|fphp|sve\w*|atomics|crc32|pmull|sha\d|sm\d|lrcpc|dcpop|jscvt|fcma|"
    r"dotprod|i8mm|bf16|flagm\w*|uscat|ilrcpc|ssbs|sb|paca|pacg|dit|frint|rng|bti|mte\w*)$")


def machine():
    """This machine's architecture as VARIANTS names it ('x86_64', 'aarch64', ...)."""
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def library_file(name):
    return f"libms_scatter_cpu.{name}.so"


def cpu_features(path="/proc/cpuinfo"):
    """The CPU features the kernel reports (the first processor's 'flags' / 'Features' line);
    None where the file cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return frozenset()


def isa_features(features):
    """The features of a set that -march=native can depend on (what a native build needs)."""
    return sorted(f for f in (features or ()) if _ISA_FEATURE.match(f))


def build_list(arch, names=None, native=False, baseline=True):
    """[(name, flags, requires)] to build for `arch`, best first: `names` (default all of the
    architecture's; the baseline is among them unless `baseline` is False: an installed set
    always has it), with native first when asked for."""
    table = VARIANTS.get(arch)
    if not table:
        table = (("generic", (), ()),)  # an architecture without levels: the compiler's default
    known = [v[0] for v in table]
    if names:
        unknown = [n for n in names if n not in known and n != NATIVE]
        if unknown:
            raise ValueError(f"For 'MS_SCATTER_CPU_VARIANTS', each name must be one of {', '.join(known)} "
                             f"(or {NATIVE}), but got {', '.join(map(repr, unknown))}.")
        native = native or NATIVE in names
        wanted = set(names) | ({known[-1]} if baseline else set())
        table = tuple(v for v in table if v[0] in wanted)
    out = [(n, tuple(f), tuple(r)) for n, f, r in table]
    if native:
        out.insert(0, (NATIVE, ("-march=native",), tuple(isa_features(cpu_features()))))
    return out


def write_manifest(directory, arch, built, commands=None):
    """cpu_variants.json: the variants built into `directory`, best first (with the command
    that built each, which a later build compares to keep a library that is up to date)."""
    commands = commands or {}
    data = {"machine": arch, "variants": [{"name": n, "file": library_file(n), "requires": list(r),
                                           "command": commands.get(n)} for n, _f, r in built]}
    with open(os.path.join(directory, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")


def read_manifest(directory):
    """[{'name', 'file', 'requires'}] built into `directory`, best first ([] when none)."""
    try:
        with open(os.path.join(directory, MANIFEST), encoding="utf-8") as f:
            return json.load(f)["variants"]
    except (OSError, ValueError, KeyError):
        return []


def missing(variant, features):
    """The features `variant` needs that a CPU with `features` lacks."""
    return [r for r in variant["requires"] if r not in features]


def choose(variants, features, forced=None):
    """The variant to load: `forced` (MS_SCATTER_CPU_VARIANT) if this CPU can run it, else the
    first listed one it can run. Where the CPU's features cannot be read (features None):
    the forced one unchecked, else the baseline."""
    names = [v["name"] for v in variants]
    if forced:
        if forced not in names:
            raise ValueError(f"For '{ENV_FORCE}', the value must be one of the variants built ({', '.join(names)}), "
                             f"but got {forced!r}.")
        variant = variants[names.index(forced)]
        lacks = missing(variant, features) if features is not None else []
        if lacks:
            able = [v["name"] for v in variants if not missing(v, features)]
            raise ValueError(f"For '{ENV_FORCE}', the variant must be one this CPU can run "
                             f"({', '.join(able) or 'none'}; {forced} needs {', '.join(lacks)}), but got {forced!r}.")
        return variant
    if features is None and variants:
        return variants[-1]
    for variant in variants:
        if not missing(variant, features):
            return variant
    raise RuntimeError(f"ms_scatter: this CPU can run none of the CPU kernel builds ({', '.join(names)}; "
                       f"the baseline {names[-1] if names else '?'} needs "
                       f"{', '.join(missing(variants[-1], features)) if variants else '?'}).")


def select(directory, environ=None):
    """(variant name, library path) for this CPU, or (None, None) where nothing was built."""
    environ = os.environ if environ is None else environ
    variants = read_manifest(directory)
    if not variants:
        return None, None
    variant = choose(variants, cpu_features(), environ.get(ENV_FORCE) or None)
    return variant["name"], os.path.join(directory, variant["file"])


def runnable(directory, features=None):
    """The names of the variants built into `directory` that this CPU can run, best first."""
    variants = read_manifest(directory)
    features = cpu_features() if features is None else features
    if features is None:  # unknown: the baseline only
        return [v["name"] for v in variants[-1:]]
    return [v["name"] for v in variants if not missing(v, features)]
