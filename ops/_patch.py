"""``ms_scatter.patch()``: MindSpore's own scatter entry points run on ms_scatter.

What is replaced (the *sites*), found by introspection of the running MindSpore:

* MindSpore's 21 classes (``ScatterAdd`` ... ``TensorScatterUpdate``) and 20 functions
  (``scatter_add`` ... ``tensor_scatter_update``; ``scatter_sub`` it lacks), and its unsorted
  segment operators (``UnsortedSegmentSum / Prod / Max / Min``, ``unsorted_segment_sum`` ...,
  ops/segment.py; not ``scatter_nd``, which MindSpore's Tensor item assignment calls on bool
  tensors) are looked up
  in its public namespaces (``HOMES``); every attribute of a loaded ``mindspore`` module
  that *is* one of them (``ops.operations``, ``ops.functional``, ``ops.function.array_func``,
  ``ops.auto_generate``, aliases such as ``ops.tensor_method.tensor_scatter_add``) becomes
  ours, and so does every module-level *instance* of those classes (``array_func.scatter_add_``,
  ``gen_ops_def.tensor_scatter_add_op``; an instance bound to one of the 20 function names
  in ``mindspore.ops`` becomes our function);
* the entries of ``tensor_operator_registry`` that are one of them (``Tensor.scatter_max``
  and the graph-mode Tensor methods call through it);
* the ``Tensor`` methods ``scatter_add`` (its ``(indices, updates)`` form), ``scatter_sub``,
  ``scatter_mul``, ``scatter_div``, ``scatter_max``, ``scatter_min`` (out of place, as
  MindSpore's); ``Parameter`` inherits them;
* the sites in ``_patch_sites.SITES``, the same introspection run once over every module of
  each supported MindSpore release (``python -m ms_scatter.patch --write-sites PATH`` on
  that release; the running release's table is used): a site whose name MindSpore no
  longer has (or has hidden) gets ours again, and a module not imported yet is patched
  when it is imported.

Modules of MindSpore imported while patched are scanned when they are imported (an import
hook), so ``from mindspore.ops import ScatterAdd`` anywhere after ``patch()`` gets ours.
``unpatch()`` puts back every value it replaced and removes every name it added.
MindSpore's graph compiler resolves these names when it compiles a graph: graphs compiled
before ``patch()`` keep the built-ins (as those compiled under it keep ours).
"""
import contextlib
import importlib.abc
import inspect
import sys
import threading
import warnings

from . import infer
from ._compat import STANDARD_METHOD
from ._lib import call_counts
from .primitives import FUNCTIONS as _FAMILY_FUNCTIONS, PRIMITIVES as _FAMILY_PRIMITIVES
from .segment import SEGMENT_FUNCTIONS, SEGMENT_PRIMITIVES

# What a patch routes: the family's 21 classes and 20 functions, and MindSpore's unsorted
# segment operators (UnsortedSegmentSum/Prod/Max/Min and their functions). Not scatter_nd:
# MindSpore's own Tensor item assignment calls it on every dtype, bool included, which the
# family's kernels do not take.
_SEGMENT_ROUTED = tuple(infer.SEGMENT_OPERATORS)
PRIMITIVES = {**_FAMILY_PRIMITIVES, **{op: SEGMENT_PRIMITIVES[op] for op in _SEGMENT_ROUTED}}
FUNCTION_OF = {op: record.function for op, record in infer.OPERATORS.items()}
FUNCTION_OF.update({op: infer.SEGMENT_OPERATORS[op].function for op in _SEGMENT_ROUTED})
FUNCTIONS = {**_FAMILY_FUNCTIONS, **{FUNCTION_OF[op]: SEGMENT_FUNCTIONS[FUNCTION_OF[op]] for op in _SEGMENT_ROUTED}}
OPS = tuple(PRIMITIVES)
OP_OF = {fn: op for op, fn in FUNCTION_OF.items()}


def _in_place(op):
    """Whether `op` is an in-place operator of the family (its class takes use_locking)."""
    record = infer.OPERATORS.get(op)
    return record is not None and record.in_place

# Where MindSpore's own objects are looked up (their aliases elsewhere are found by
# identity), and where a name MindSpore lacks is added.
HOMES = {"class": ("mindspore.ops", "mindspore.ops.operations"),
         "function": ("mindspore.ops", "mindspore.ops.functional", "mindspore.ops.function")}
TENSOR_MODULE, TENSOR_CLASS = "mindspore.common.tensor", "Tensor"
REGISTRY_MODULE, REGISTRY = "mindspore.common._register_for_tensor", "tensor_operator_registry"
# Tensor methods of the family: Tensor.scatter_<r>(indices, updates) is MindSpore's
# tensor_scatter_<r> (out of place); scatter_add also has a (dim, index, src) form.
TENSOR_METHODS = {"scatter_" + r.lower(): "tensor_scatter_" + r.lower()
                  for r in ("Add", "Sub", "Mul", "Div", "Max", "Min")}
# In a graph, MindSpore compiles Tensor.scatter_<r> as standard_method.tensor_scatter_<r>;
# 2.10 lacks tensor_scatter_div there (``x.scatter_div`` fails to compile), the patch adds it.
GRAPH_METHODS = STANDARD_METHOD

_ABSENT = object()
_KEEP = object()  # restore: leave the value as it is
_LOCK = threading.RLock()


# --------------------------------------------------------------------------- replacements

def _wants_use_locking(function_name):
    """MindSpore's scatter_nd_* functions take ``use_locking=False`` after the inputs."""
    record = infer.OPERATORS.get(OP_OF[function_name])
    return record is not None and record.in_place and not record.depth_one


def _adapter(name):
    """Our functional form with MindSpore's signature: its scatter_nd_* functions take
    ``use_locking=False`` besides the three inputs; ours take the three."""
    ours = FUNCTIONS[name]
    if not _wants_use_locking(name) or "use_locking" in inspect.signature(ours).parameters:
        return ours
    cls = PRIMITIVES[OP_OF[name]]

    def function(input_x, indices, updates, use_locking=False):
        if not isinstance(use_locking, bool):
            cls(use_locking)  # raises the primitive's TypeError (at compile time in a graph)
        return ours(input_x, indices, updates)

    function.__name__ = function.__qualname__ = name
    function.__module__ = "ms_scatter"
    function.__doc__ = ours.__doc__
    return function


def _method(name, fallback):
    """A Tensor method ``scatter_<r>(self, indices, updates)`` on our tensor_scatter_<r>.
    ``fallback`` (MindSpore's own method) keeps the other forms of scatter_add."""
    ours = FUNCTIONS[TENSOR_METHODS[name]]
    if name == "scatter_add" and fallback is not None:
        def method(self, *args, **kwargs):
            # (indices, updates): the deprecated form, MindSpore's tensor_scatter_add;
            # (dim, index, src): the other one, left to MindSpore
            if len(args) + len(kwargs) == 2 and not {"dim", "index", "src"} & set(kwargs):
                return ours(self, *args, **kwargs)
            return fallback(self, *args, **kwargs)
    else:
        def method(self, indices, updates):
            return ours(self, indices, updates)
    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__doc__ = (f"``Tensor.{name}(indices, updates)`` on ms_scatter: ``ms_scatter.{TENSOR_METHODS[name]}"
                      f"(self, indices, updates)`` (out of place, as MindSpore's).")
    return method


class _Replacements:
    """The objects a patch hands out, made once per patch (so identity tells them apart)."""

    def __init__(self):
        self.functions = {name: _adapter(name) for name in FUNCTIONS}
        self.instances = {}
        self.methods = {}

    def instance(self, op, use_locking):
        key = (op, use_locking)
        if key not in self.instances:
            cls = PRIMITIVES[op]
            self.instances[key] = cls(bool(use_locking)) if _in_place(op) else cls()
        return self.instances[key]

    def method(self, name, fallback):
        if name not in self.methods:
            self.methods[name] = _method(name, fallback)
        return self.methods[name]

    def value(self, role, op, use_locking, name, fallback=None):
        if role == "class":
            return PRIMITIVES[op]
        if role == "function":
            return self.functions[FUNCTION_OF[op]]
        if role == "instance":
            return self.instance(op, use_locking)
        if role == "method":
            return self.method(name, fallback)
        raise ValueError(f"unknown site role {role!r}")

    def ours(self, value):
        return any(value is v for v in self.functions.values()) or \
            any(value is v for v in self.instances.values()) or \
            any(value is v for v in self.methods.values())


# --------------------------------------------------------------------------- introspection

def _module_dict(name):
    module = sys.modules.get(name)
    try:
        return vars(module) if module is not None else None
    except TypeError:
        return None


def originals():
    """MindSpore's own classes and functions of the family, from its public namespaces:
    ({op: class}, {function name: function or primitive instance})."""
    classes, functions = {}, {}
    ours = set(map(id, PRIMITIVES.values())) | set(map(id, FUNCTIONS.values()))
    for home in HOMES["class"]:
        d = _module_dict(home) or {}
        for op in OPS:
            v = d.get(op)
            if isinstance(v, type) and id(v) not in ours:
                classes.setdefault(op, v)
    for home in HOMES["function"]:
        d = _module_dict(home) or {}
        for name in OP_OF:
            v = d.get(name)
            if callable(v) and not isinstance(v, type) and id(v) not in ours:
                functions.setdefault(name, v)
    return classes, functions


class _Matcher:
    """Tells what a value is: (role, op, use_locking) or None."""

    def __init__(self, classes, functions, replacements=None):
        self.by_id = {}
        for op, cls in classes.items():
            self.by_id[id(cls)] = ("class", op, None)
        for name, fn in functions.items():
            self.by_id[id(fn)] = ("function", OP_OF[name], None)
        for op, cls in PRIMITIVES.items():
            self.by_id[id(cls)] = ("class", op, None)
        if replacements is not None:
            for name, fn in replacements.functions.items():
                self.by_id[id(fn)] = ("function", OP_OF[name], None)
        self.op_of_type = {id(cls): op for op, cls in list(classes.items()) + list(PRIMITIVES.items())}
        # the operator whose instances a type makes (None: not one), decided once per type: an
        # isinstance against the ~50 classes cost ~14 us a value, 0.7 s for MindSpore's ~48,000
        self._op_of_instances = {}

    def _instances_of(self, kind):
        if issubclass(kind, type):  # a class is matched by identity above, never as an instance
            return None
        return next((self.op_of_type[id(c)] for c in kind.__mro__ if id(c) in self.op_of_type), None)

    def match(self, name, value):
        hit = self.by_id.get(id(value))
        if hit is not None:
            return hit
        kind = type(value)
        try:
            op = self._op_of_instances[kind]
        except KeyError:
            op = self._op_of_instances[kind] = self._instances_of(kind)
        except TypeError:  # an unhashable type object
            op = self._instances_of(kind)
        if op is None:
            return None
        if name in OP_OF and OP_OF[name] == op:
            return ("function", op, None)
        return ("instance", op, getattr(value, "use_locking", None))


def scan_module(module_name, matcher):
    """The sites of one loaded module: [(module, path, role, op, use_locking)]."""
    d = _module_dict(module_name)
    if d is None:
        return []
    sites = []
    for name, value in list(d.items()):
        hit = matcher.match(name, value)
        if hit is not None:
            sites.append((module_name, name) + hit)
    if module_name == REGISTRY_MODULE and d.get(REGISTRY) is not None:
        # the registry Tensor methods call through (imported by many modules: scanned here)
        for key, entry in list(vars(d[REGISTRY]).items()):
            hit = matcher.match(key, entry)
            if hit is not None:
                sites.append((module_name, f"{REGISTRY}.{key}") + hit)
    if module_name == TENSOR_MODULE and isinstance(d.get(TENSOR_CLASS), type):
        tensor = d[TENSOR_CLASS]
        for method, function in TENSOR_METHODS.items():
            if hasattr(tensor, method):
                sites.append((module_name, f"{TENSOR_CLASS}.{method}", "method", OP_OF[function], None))
    return sites


def _mindspore_modules():
    return sorted(name for name in list(sys.modules) if name == "mindspore" or name.startswith("mindspore."))


def discover(matcher=None):
    """Every site in the loaded MindSpore modules, sorted."""
    if matcher is None:
        matcher = _Matcher(*originals())
    sites = set()
    for module_name in _mindspore_modules():
        sites.update(scan_module(module_name, matcher))
    return sorted(sites, key=lambda s: (s[0], s[1]))


def _home_sites(functions):
    """Where a name MindSpore lacks is added: its public namespaces."""
    sites = []
    for home in HOMES["class"]:
        sites += [(home, op, "class", op, None) for op in OPS]
    for home in HOMES["function"]:
        sites += [(home, name, "function", op, None) for name, op in OP_OF.items()]
    sites += [(GRAPH_METHODS, name, "function", OP_OF[name], None) for name in TENSOR_METHODS.values()]
    return sites


def release_key(version=None):
    """'2.10' for MindSpore 2.10.0 (the running one by default): the site tables' key."""
    if version is None:
        import mindspore
        version = mindspore.__version__
    return ".".join(version.split(".")[:2])


def _key_order(key):
    return tuple(int(part) if part.isdigit() else -1 for part in key.split("."))


def table_key(tables, key=None):
    """The table for this release: its own, else the newest older one, else the oldest."""
    key = release_key() if key is None else key
    if key in tables:
        return key
    if not tables:
        return None
    older = [k for k in tables if _key_order(k) <= _key_order(key)]
    return max(older, key=_key_order) if older else min(tables, key=_key_order)


def _table():
    try:
        from ._patch_sites import SITES
    except ImportError:  # pragma: no cover - the table ships with the package
        return []
    key = table_key(SITES)
    return [tuple(s) for s in SITES[key]] if key else []


def _table_by_module(table):
    """{module: [its sites]} of a site table."""
    by_module = {}
    for site in table:
        by_module.setdefault(site[0], []).append(site)
    return by_module


# --------------------------------------------------------------------------- patch state

def _resolve(module_name, path):
    """(owner object, attribute name) of a site, or None where its module is not loaded."""
    module = sys.modules.get(module_name)
    if module is None:
        return None
    parts = path.split(".")
    owner = module
    for part in parts[:-1]:
        owner = vars(owner).get(part) if hasattr(owner, "__dict__") else None
        if owner is None:
            return None
    return owner, parts[-1]


def _own(owner, name):
    """The owner's own value of `name` (not an inherited one), or _ABSENT."""
    try:
        return vars(owner).get(name, _ABSENT)
    except TypeError:
        return _ABSENT


_WARNED = set()  # operators whose pre-patch instance has warned (once per process)


def _warning_call(op, call):
    """MindSpore's ``__call__`` of `op`'s class, warning once that it runs MindSpore's kernel."""
    def __call__(self, *args, **kwargs):
        if op not in _WARNED:
            _WARNED.add(op)
            warnings.warn(f"ms_scatter.patch: a MindSpore {op} made before patch() ran MindSpore's own kernel; "
                          f"make the op after patch(), or use ms_scatter.{op}.", RuntimeWarning, stacklevel=2)
        return call(self, *args, **kwargs)
    __call__.__wrapped__ = call
    return __call__


class Handle:
    """What a ``patch()`` replaced. ``replaced``: the sites, as ``"module:path"`` strings;
    ``added``: those where MindSpore had no such name; ``calls()``: launches of our kernels
    since the patch, per operator; ``active``: whether the patch is still applied."""

    def __init__(self):
        self.replacements = _Replacements()
        self._records = []  # (owner, name, value to restore or _ABSENT / _KEEP, site, added)
        self._done = set()  # (id(owner), name) applied
        self._classes, self._functions = originals()
        self.matcher = _Matcher(self._classes, self._functions, self.replacements)
        self._start_counts = _safe_counts()
        self.active = False

    # -- applying
    def _ours(self, value):
        """A value a patch put there: one of our classes, functions or instances."""
        return self.replacements.ours(value) or any(value is c for c in PRIMITIVES.values()) or \
            any(value is f for f in FUNCTIONS.values()) or isinstance(value, tuple(PRIMITIVES.values()))

    def _apply(self, site):
        module_name, path, role, op, use_locking = site
        where = _resolve(module_name, path)
        if where is None:
            return
        owner, name = where
        key = (id(owner), name)
        if key in self._done:
            return
        previous = _own(owner, name)
        fallback = None
        if role == "method":
            fallback = getattr(owner, name, None)
            if self._ours(fallback):
                fallback = None
        value = self.replacements.value(role, op, use_locking, name, fallback)
        if previous is not value:
            setattr(owner, name, value)
        # a value that is already ours: a module imported under the patch, which gets
        # MindSpore's own object back on unpatch
        undo = self._without_patch(role, op, use_locking) if self._ours(previous) else previous
        self._records.append((owner, name, undo, (module_name, path), previous is _ABSENT))
        self._done.add(key)

    def _without_patch(self, role, op, use_locking):
        """What a site imported under the patch holds without one (_KEEP where MindSpore
        has no such object)."""
        if role == "class":
            return self._classes.get(op, _KEEP)
        if role == "function":
            return self._functions.get(FUNCTION_OF[op], _KEEP)
        if role == "instance" and op in self._classes:
            try:
                cls = self._classes[op]
                return cls(bool(use_locking)) if _in_place(op) else cls()
            except Exception:  # noqa: BLE001 - hidden or changed: keep ours
                return _KEEP
        return _KEEP

    def apply_module(self, module_name, by_module=None):
        """by_module: the site table by module (_table_by_module), made here when not given."""
        by_module = _table_by_module(_table()) if by_module is None else by_module
        sites = scan_module(module_name, self.matcher)
        sites += by_module.get(module_name, [])
        if module_name in HOMES["class"] or module_name in HOMES["function"] or module_name == GRAPH_METHODS:
            sites += [s for s in _home_sites(self._functions) if s[0] == module_name]
        for site in sites:
            self._apply(site)

    def prepare(self):
        """Makes the primitive instances the table's sites need."""
        for _module, _path, role, op, use_locking in _table():
            if role == "instance":
                self.replacements.instance(op, use_locking)

    def apply_all(self):
        by_module = _table_by_module(_table())
        modules = set(_mindspore_modules())
        for module_name in sorted(modules):
            self.apply_module(module_name, by_module)
        self._warn_old_instances()

    def _warn_old_instances(self):
        """An instance of MindSpore's own class made before patch() keeps MindSpore's kernel: a
        Python call of one (PYNATIVE) warns, once per operator, while the patch is active."""
        self._warners = []
        for op, cls in self._classes.items():
            if not isinstance(cls, type) or any(cls is c for c in PRIMITIVES.values()):
                continue
            previous = _own(cls, "__call__")
            cls.__call__ = _warning_call(op, getattr(cls, "__call__"))
            self._warners.append((cls, previous))

    # -- restoring
    def restore(self):
        for cls, previous in reversed(getattr(self, "_warners", [])):
            if previous is _ABSENT:
                try:
                    delattr(cls, "__call__")
                except AttributeError:
                    pass
            else:
                cls.__call__ = previous
        self._warners = []
        for owner, name, undo, _key, _added in reversed(self._records):
            if undo is _KEEP:
                continue
            if undo is _ABSENT:
                try:
                    delattr(owner, name)
                except AttributeError:
                    pass
            else:
                setattr(owner, name, undo)
        self._records.clear()
        self._done.clear()
        self.active = False

    # -- reporting
    @property
    def replaced(self):
        return [f"{key[0]}:{key[1]}" for _o, _n, _u, key, _a in self._records]

    @property
    def added(self):
        return [f"{key[0]}:{key[1]}" for _o, _n, _u, key, added in self._records if added]

    def calls(self):
        """{operator: launches of our kernels since this patch} (non-zero ones)."""
        now = _safe_counts()
        out = {}
        for entry, count in now.items():
            delta = count - self._start_counts.get(entry, 0)
            if delta:
                op = entry.rsplit("_", 1)[0] if entry.endswith(("_token", "_return")) else entry
                out[op] = out.get(op, 0) + delta
        return dict(sorted(out.items()))

    def report(self):
        calls = self.calls()
        ran = ", ".join(f"{op} {n}" for op, n in calls.items()) or "none"
        return (f"ms_scatter.patch: {len(self._records)} MindSpore entry points replaced "
                f"({len(self.added)} added); our kernels launched since the patch: {ran}")

    def __repr__(self):
        state = "active" if self.active else "restored"
        return f"<ms_scatter.patch handle ({state}): {len(self._records)} sites replaced, {len(self.added)} added>"


def _safe_counts():
    try:
        return call_counts()
    except (OSError, RuntimeError, AttributeError):
        return {}


# --------------------------------------------------------------------------- import hook

class _Loader:
    """Runs the real loader, then patches the new module (while a patch is active); every
    other attribute is the real loader's."""

    def __init__(self, loader):
        self._loader = loader

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        with _LOCK:
            if _STATE is not None and _STATE.active:
                _STATE.apply_module(module.__name__)


class _Finder(importlib.abc.MetaPathFinder):
    _busy = threading.local()

    def find_spec(self, fullname, path, target=None):
        if not (fullname == "mindspore" or fullname.startswith("mindspore.")) or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._busy.on = False
        if spec.loader is not None and hasattr(spec.loader, "exec_module") and not isinstance(spec.loader, _Loader):
            spec.loader = _Loader(spec.loader)
        return spec


_FINDER = _Finder()
_STATE = None


# --------------------------------------------------------------------------- public API

def patch():
    """From now on every MindSpore entry point of the scatter family runs on ms_scatter.
    Idempotent (a second call returns the same handle); thread-safe. Returns the handle."""
    global _STATE
    with _LOCK:
        if _STATE is not None and _STATE.active:
            return _STATE
    # Our objects are made before the lock is taken: making a primitive may import modules,
    # and the import hook takes the lock.
    handle = Handle()
    handle.prepare()
    with _LOCK:
        if _STATE is not None and _STATE.active:
            return _STATE
        handle.active = True
        _STATE = handle
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
        try:
            handle.apply_all()
        except BaseException:
            sys.meta_path.remove(_FINDER)
            handle.restore()
            _STATE = None
            raise
        return handle


def unpatch():
    """Puts back everything the patch replaced and removes what it added. Returns the
    handle of the patch undone, or None when none was active."""
    global _STATE
    with _LOCK:
        handle = _STATE
        if handle is None or not handle.active:
            return None
        if _FINDER in sys.meta_path:
            sys.meta_path.remove(_FINDER)
        handle.restore()
        _STATE = None
        return handle


def is_patched():
    with _LOCK:
        return _STATE is not None and _STATE.active


def current():
    """The active patch's handle, or None."""
    with _LOCK:
        return _STATE if _STATE is not None and _STATE.active else None


@contextlib.contextmanager
def patched():
    """``with ms_scatter.patched():`` patches for the block; leaves a patch that was
    already active in place."""
    with _LOCK:
        was_active = is_patched()
        handle = patch()
    try:
        yield handle
    finally:
        if not was_active:
            unpatch()


# --------------------------------------------------------------------------- the site table

# Subpackages left out of the table's full import: kernel compilers and device back ends
# (they import toolchains this package never touches, and hold no scatter entry point).
_SKIP = ("mindspore._akg", "mindspore._extends.graph_kernel", "mindspore.lite", "mindspore.profiler",
         "mindspore.experimental.llm_boost", "mindspore.tools", "mindspore.mindrecord", "mindspore.dataset")


def import_all_mindspore():
    """Imports every module of the installed MindSpore that imports cleanly (but _SKIP);
    returns the names of those that did not."""
    import importlib
    import pkgutil
    import warnings

    import mindspore
    failed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for info in pkgutil.walk_packages(mindspore.__path__, "mindspore.", onerror=failed.append):
            if info.name.startswith(_SKIP) or info.name in sys.modules:
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # noqa: BLE001 - optional parts (other devices, toolchains)
                failed.append(info.name)
    return failed


def write_sites(path):
    """Regenerates _patch_sites.py: the table of the installed MindSpore release (the sites of
    every module it has) replaces that release's in the shipped tables; the others are kept."""
    import mindspore
    failed = import_all_mindspore()
    sites = discover()
    try:
        from ._patch_sites import SITES, VERSIONS
    except ImportError:  # pragma: no cover - the table ships with the package
        SITES, VERSIONS = {}, {}
    tables, versions = dict(SITES), dict(VERSIONS)
    key = release_key()
    tables[key], versions[key] = sites, mindspore.__version__
    lines = ['"""The sites ms_scatter.patch() replaces, found by introspection of every module of each',
             'supported MindSpore release (generated by `python -m ms_scatter.patch --write-sites PATH`, run',
             'on each release in VERSIONS; st/test_patch.py checks the running release\'s table against',
             'its wheel). The running release\'s table is used: a site whose name MindSpore no longer has',
             'gets ours anyway. Per release: (module, attribute path, role, operator, use_locking)."""',
             "VERSIONS = {"]
    lines += [f"    {k!r}: {versions.get(k, '?')!r}," for k in sorted(tables, key=_key_order)]
    lines += ["}", "SITES = {"]
    for k in sorted(tables, key=_key_order):
        lines.append(f"    {k!r}: [")
        lines += [f"        {tuple(site)!r}," for site in tables[k]]
        lines.append("    ],")
    lines += ["}", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    return sites, failed

