"""How gaussopt's compiled code is compiled, cached, loaded and called.

gaussopt's step, integrator and kernels are compiled by numba the first time a
machine runs them and cached on disk; later processes load them from the
cache. Three things here keep that first time short and the cache honest.

**Units.** numba links every function a compiled function calls into its
machine code and optimizes and generates the whole tree again for each caller:
a function called (directly or not) from seven entry points was compiled eight
times. A *unit* (:func:`unit`) is compiled once, alone, for one declared
signature, and compiled callers call it through a pointer (an indirect call of
a few nanoseconds; the caller's machine code holds no copy of the unit). Each
calling module keeps the pointer in a private variable that its first call fills
by looking the unit up (:func:`_lookup`, a C callback into Python) by a key that
hashes the unit's name and full signature: a unit nobody loaded yet is loaded
then (a *lazy* unit -- a path not every run takes, such as the O(n) step of
large models -- is loaded only that way), and code compiled against another
version of gaussopt gets ``RuntimeError``, never a jump to the wrong place. A
compiled function loads the units it may call (found in its bytecode,
:func:`deps_of`) before it is first compiled or loaded for a signature
(:class:`_Dispatcher`), so that a run does not stop to load them, and
:func:`ensure` loads a set of units ahead (before a timed run, say). A run
compiles only what it uses.

Small helpers stay ordinary compiled functions, linked into their callers; a
helper that returns a view of an array into a function compiled without
reference counting must be inlined (``inline="always"``). Inlining costs
compile time at every call site, and so do slice assignments of arrays
(``x[:n] = y``: numba compiles broadcasting and overlap checks for each), so the
compiled code uses loops.

**Wrappers on demand.** numba gives every compiled function a wrapper that Python
calls through and one for first-class function values; most of gaussopt's compiled
functions are only called by other compiled code, and the wrappers were about a third of
the machine code of a small helper. A function is compiled without them for its
compiled callers, and with the first the first time Python calls it (:class:`_Dispatcher`;
:func:`unit` with ``python=True`` for the entry points that Python calls). The second is
never made: gaussopt makes first-class function values from :class:`cfunc` only, and
calls units at their machine code's own address (a first run compiles a tenth to a fifth
less without it: the README pendulum's compile CPU in its two processes, 41.9 and 37.4 s
with it, 33.2 and 33.3 s without, in interleaved pairs).

**Cache.** Compiled code is cached under :func:`cache_dir` (``$GAUSSOPT_CACHE_DIR``,
default ``~/.cache/gaussopt``) in a directory named by a hash of the source of
every module of the package (:func:`source_hash`): numba keys its cache on
each function's own file, and a function inlined from another file kept
running its old body after that file changed. Any edit of gaussopt therefore
compiles afresh, and an installed copy and a source checkout of the same
version share one cache.

**No loop unrolling in the engine.** LLVM's loop unrolling (at numba's ``-O3``) copies
the body of every loop whose trip count it cannot see four or eight times, with a
remainder loop, and the machine code generated from that is what a first run waits
for. The engine's loops run over a model's coordinates and rows (a handful to a few
dozen), so unrolling them bought nothing measurable (the step and run benchmarks:
within their noise), while it cost about 9 % of a first run's compile CPU (the
README's pendulum in one process, five interleaved pairs: 35.4 s with it, 32.1 s
without). gaussopt's own functions are therefore compiled without it (:func:`_tuned`),
except the multibody kernels (:data:`_UNROLLED`), whose 3- and 6-vector algebra has
constant trip counts that full unrolling turns into straight-line code (a tree's
step was about 7 % slower without it). A user's own numba code is untouched.

**Notice and time.** The first compilation in a process prints one line on
stderr (:func:`notice`); :func:`compile_seconds` counts the time numba spent
compiling, so that run times reported by gaussopt exclude it. :func:`compile_all`
compiles every unit ahead of time (``gaussopt compile``).
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import dis
import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import shutil
import sys
import tempfile
import threading
import time
import types as pytypes
from pathlib import Path
from typing import Callable, Iterable, Optional

import llvmlite.binding as ll
import numba as nb
import numpy as np
from llvmlite import ir
from numba import types as nt
from numba.core import cgutils
from numba.core import event as nb_event
from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator
from numba.core.ccallback import CFunc
from numba.core.compiler_lock import global_compiler_lock
from numba.core.errors import TypingError
from numba.core.registry import CPUDispatcher
from numba.core.extending import _Intrinsic

__all__ = ["cache_dir", "code_cache_dir", "source_hash", "jit", "cfunc", "unit", "Unit", "ensure",
           "units", "compile_all", "compile_seconds", "spent", "notice", "TYPES", "declare_types"]

_PKG = Path(__file__).resolve().parent.parent      # the package gaussopt
_LOCK = threading.RLock()


class _Locks:
    """numba's compiler lock, then :data:`_LOCK`: the one order in which any thread
    holds both (numba holds its lock while it types a caller, which may load a unit
    or print the notice; taking ``_LOCK`` first elsewhere would deadlock two threads
    that compile at once)."""

    def __enter__(self):
        global_compiler_lock.acquire()
        _LOCK.acquire()

    def __exit__(self, *exc):
        _LOCK.release()
        global_compiler_lock.release()


_LOCKS = _Locks()


# --------------------------------------------------------------------------- cache location
def models_dir() -> Path:
    """Directory of the generated model modules (:mod:`gaussopt.core.codegen`): ``models/`` in
    :func:`cache_dir`."""
    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


_GENERATED_LOCK = threading.Lock()


def import_generated(name: str):
    """The generated module ``name`` (``gaussopt_model_<hash>``) from :func:`models_dir`,
    imported if it is not yet (also by a helper process compiling it)."""
    with _GENERATED_LOCK:
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, models_dir() / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod


def cache_dir() -> Path:
    """The root of gaussopt's caches: ``$GAUSSOPT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/gaussopt`` or ``~/.cache/gaussopt`` (a temporary directory when
    none of these is writable). Compiled code goes to :func:`code_cache_dir`, generated
    model modules to ``models/``."""
    env = os.environ.get("GAUSSOPT_CACHE_DIR")
    base = Path(env) if env else \
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gaussopt"
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    tmp = Path(tempfile.gettempdir()) / "gaussopt-cache"
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp


_HASH: Optional[str] = None


def source_hash() -> str:
    """A hash of the source of every module of the package and of numba's version: the
    name of the directory of the compiled code (computed once per process)."""
    global _HASH
    if _HASH is None:
        h = hashlib.sha256(f"numba {nb.__version__} python {sys.version_info[:2]}".encode())
        for path in sorted(_PKG.rglob("*.py")):
            h.update(str(path.relative_to(_PKG)).encode())
            h.update(b"\0")
            h.update(path.read_bytes())
            h.update(b"\0")
        _HASH = h.hexdigest()[:20]
    return _HASH


def code_cache_dir() -> Path:
    """The directory of the compiled code of this version of gaussopt."""
    return cache_dir() / "compiled" / source_hash()


@functools.lru_cache(maxsize=None)
def _file_hash(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:20]
    except OSError:
        return ""


class _Locator(_CacheLocator):
    """numba's cache of a gaussopt function in :func:`code_cache_dir`, its freshness
    stamp the package's :func:`source_hash` (not the function's own file)."""

    def __init__(self, py_func, py_file):
        self._path = str(code_cache_dir())
        mod = py_func.__module__ or "gaussopt"
        self._disambiguator = f"{mod}-{py_func.__code__.co_firstlineno}"
        path = Path(py_file).resolve()
        self._own = "" if _PKG in path.parents else _file_hash(str(path))

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        # the package's hash; for a function outside the package (a user's or a
        # benchmark's, made with :func:`jit`), also its own file's
        return source_hash(), self._own


    def get_disambiguator(self):
        return self._disambiguator

    @classmethod
    def from_function(cls, py_func, py_file):
        self = cls(py_func, py_file)
        try:
            self.ensure_cache_path()
        except OSError:
            return None
        return self


class _CacheImpl(CompileResultCacheImpl):
    _locator_classes = [_Locator] + list(CompileResultCacheImpl._locator_classes)


class _Cache(FunctionCache):
    _impl_class = _CacheImpl


class _PyLocator(_Locator):
    """The cache of a function's versions callable from Python (:class:`_Dispatcher`)."""

    def get_disambiguator(self):
        return self._disambiguator + "-py"


class _PyCacheImpl(CompileResultCacheImpl):
    _locator_classes = [_PyLocator] + list(CompileResultCacheImpl._locator_classes)


class _PyCache(FunctionCache):
    _impl_class = _PyCacheImpl


#: numba options of a version of a function that only compiled code calls: no CPython
#: wrapper (the boxing and unboxing of every argument and result), no C wrapper (for
#: first-class function values, which gaussopt makes from :class:`cfunc` only)
_NATIVE_ONLY = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


# --------------------------------------------------------------------------- optimization
#: modules whose compiled loops keep LLVM's unrolling (prefixes): the multibody kernels'
#: small vector algebra of constant trip counts
_UNROLLED = ("gaussopt.multibody.",)
#: whether the function being compiled (the innermost compilation) is one of gaussopt's
#: that is compiled without loop unrolling (:func:`_tuned`)
_NO_UNROLL = [False]


class _tuned:
    """While a gaussopt function is compiled: LLVM's loop unrolling off unless its module
    is one of :data:`_UNROLLED` (see the module docstring). Nested compilations (a
    helper typed inside its caller's compilation) set their own and restore the
    caller's. (numba's compiler lock is held meanwhile, so that a compilation in another
    thread never sees this one's setting.)"""

    def __init__(self, py_func):
        mod = getattr(py_func, "__module__", "") or ""
        self.off = mod.startswith("gaussopt.") and not mod.startswith(_UNROLLED)

    def __enter__(self):
        global_compiler_lock.acquire()
        self.prev = _NO_UNROLL[0]
        _NO_UNROLL[0] = self.off

    def __exit__(self, *exc):
        _NO_UNROLL[0] = self.prev
        global_compiler_lock.release()


def _install_tuning() -> None:
    """Wrap numba's pass builder so that it turns loop unrolling off while
    :data:`_NO_UNROLL` says so (numba >= 0.61, LLVM's new pass manager; with another
    numba, nothing changes)."""
    from numba.core import codegen as nb_codegen

    base = getattr(nb_codegen, "CPUCodegen", None)
    orig = getattr(base, "_pass_builder", None)
    if orig is None or getattr(orig, "_gaussopt", False) \
            or not hasattr(ll, "create_pipeline_tuning_options"):
        return

    def _pass_builder(self, **kwargs):
        if not _NO_UNROLL[0]:
            return orig(self, **kwargs)
        from numba.core import config

        pto = ll.create_pipeline_tuning_options()
        pto.speed_level = kwargs.pop("opt", config.OPT)
        pto.slp_vectorization = kwargs.pop("slp_vectorize", config.SLP_VECTORIZE)
        pto.loop_vectorization = kwargs.pop("loop_vectorize", config.LOOP_VECTORIZE)
        pto.loop_unrolling = False
        return ll.create_pass_builder(self._tm, pto)

    _pass_builder._gaussopt = True
    base._pass_builder = _pass_builder


_install_tuning()
_PYCALL = threading.local()


class _Dispatcher(CPUDispatcher):
    """numba's dispatcher that, before its function is first compiled or loaded for a
    signature (a call from Python with new argument types, or the typing of a
    compiled caller), loads the units the function may call (:func:`deps_of`).

    **Wrappers on demand.** numba gives every compiled function two wrappers: one that
    Python calls (converting every argument and the result) and one for first-class
    function values. Most of gaussopt's compiled functions are only ever called by
    other compiled code, and the wrappers were about a third of the machine code numba
    generated for a small helper (0.19 s -> 0.09 s each without them). So a signature
    compiled for a compiled caller has neither (:data:`_NATIVE_ONLY`), and is not
    entered in the table that Python calls look up; the first call from Python with
    those argument types compiles (or loads from its own cache) the version with the
    wrappers, which then serves both."""

    _gaussopt_deps_loaded = False
    #: argument types whose version Python can call (made on first use: numba also
    #: builds dispatchers of this class itself, when it unpickles one)
    _gaussopt_py: Optional[set] = None

    def _python_sigs(self) -> set:
        if self._gaussopt_py is None:
            self._gaussopt_py = set()
        return self._gaussopt_py

    def _compile_for_args(self, *args, **kws):
        # (numba's entry when a call from Python finds no compiled version to call)
        _PYCALL.want = True
        try:
            return super()._compile_for_args(*args, **kws)
        finally:
            _PYCALL.want = False

    def compile(self, sig):
        want_py = getattr(_PYCALL, "want", False)
        _PYCALL.want = False                # (not for the functions it calls)
        if not self._gaussopt_deps_loaded and not _BATCH[0]:
            self._gaussopt_deps_loaded = True
            deps = deps_of(self.py_func)
            if deps:
                ensure(*deps)
        with _tuned(self.py_func):
            if not want_py:
                return super().compile(sig)
            return self.compile_for_python(sig)

    def compile_for_python(self, sig):
        """The version of ``sig`` that Python can call (compiled or loaded from its
        cache, replacing a version without wrappers)."""
        args, _ = nb.core.sigutils.normalize_signature(sig)
        args = tuple(args)
        with _LOCKS:
            py = self._python_sigs()
            if args in py:
                return self.overloads[args].entry_point
            wrapped = self._gaussopt_wrapped
            old = self.overloads.pop(args, None) if wrapped is not None else None
            compiler, cache = self._compiler.targetoptions, self._cache
            if wrapped is not None:
                self._compiler.targetoptions = wrapped
                if self._gaussopt_py_cache is not None:
                    self._cache = self._gaussopt_py_cache
            self._gaussopt_python = True
            try:
                entry = super().compile(sig)
            except BaseException:
                if old is not None:
                    self.overloads[args] = old
                raise
            finally:
                self._gaussopt_python = False
                self._compiler.targetoptions, self._cache = compiler, cache
            py.add(args)
            if _TRACE:
                print(f"[python] {os.getpid()} {self.py_func.__module__}."
                      f"{self.py_func.__qualname__} {args}", file=sys.stderr, flush=True)
            return entry

    def add_overload(self, cres):
        if self._gaussopt_python or self._gaussopt_wrapped is None:
            super().add_overload(cres)
            self._python_sigs().add(tuple(cres.signature.args))
        else:
            # (compiled callers only: kept from the table Python calls look up, whose
            # entry would call a wrapper that does not exist)
            self.overloads[tuple(cres.signature.args)] = cres

    _gaussopt_python = False
    #: the options with the wrappers (None: the function always has them)
    _gaussopt_wrapped: Optional[dict] = None
    _gaussopt_py_cache = None


def jit(**options):
    """``numba.njit(**options)`` with gaussopt's cache (``cache=True``: in
    :func:`code_cache_dir`), whose dispatcher loads the units its function may call
    before its first compilation and compiles the wrappers a call from Python needs
    only when Python calls it (:class:`_Dispatcher`; every compiled function of
    gaussopt is made by :func:`jit` or :func:`unit`). ``python=True``: a function that
    Python calls, always compiled with them."""
    cache = options.pop("cache", False)
    python = options.pop("python", False)

    def deco(py_func):
        # (the wrapper Python calls, but never the one for first-class function values:
        # gaussopt makes those from :class:`cfunc` only, and units are called at their
        # machine code's own address)
        wrapped = {"nopython": True, "no_cfunc_wrapper": True, **options}
        # (python=True: always with the wrapper, one version and one cache)
        disp = _Dispatcher(py_func=py_func, locals={},
                           targetoptions=wrapped if python else {**wrapped, **_NATIVE_ONLY})
        if not python:
            disp._gaussopt_wrapped = wrapped
        if cache:
            disp._cache = _Cache(py_func)
            if not python:
                disp._gaussopt_py_cache = _PyCache(py_func)
        return disp
    return deco


#: what :func:`ensure` and the helper process compile, by name: units and cfuncs
_ITEMS: dict = {}


class cfunc:
    """``numba.cfunc(signature, cache=True, **options)`` compiled on first use (``address``),
    not when its module is imported, and cached in :func:`code_cache_dir`; :func:`ensure`
    and :func:`prefetch` take it like a unit."""

    def __init__(self, signature, **options):
        self._sig = nb.core.sigutils.normalize_signature(signature)
        self._options = options
        self._fn: Optional[CFunc] = None

    def __call__(self, py_func):
        self._py_func = py_func
        self.__name__ = py_func.__name__
        self.__qualname__ = py_func.__qualname__
        self.__doc__ = py_func.__doc__
        self.__module__ = py_func.__module__
        self.name = f"{py_func.__module__}.{py_func.__qualname__}"
        _ITEMS[self.name] = self
        return self

    @property
    def py_func(self):
        return self._py_func

    # (what :func:`ensure` and the helper process ask of what they compile)
    @property
    def loaded(self) -> bool:
        return self._fn is not None

    def load(self) -> None:
        self.compiled

    def in_cache(self) -> bool:
        try:
            cache = _Cache(self._py_func)
            target = CFunc._targetdescr.target_context
            return cache._index_key(self._sig, target.codegen()) in cache._cache_file._load_index()
        except Exception:  # noqa: BLE001 - another numba: compile as if it were missing
            return False

    @property
    def compiled(self) -> CFunc:
        """numba's ``CFunc``, compiled (or loaded from the cache) on first access. (As
        ``CFunc.compile`` does, with numba's compile event around a compilation, so that
        :func:`compile_seconds` and :func:`notice` see it.)"""
        if self._fn is None:
            with _LOCKS:
                if self._fn is None:
                    fn = CFunc(self._py_func, self._sig, locals={}, options=self._options)
                    fn._cache = _Cache(self._py_func)
                    target = fn._targetdescr.target_context
                    cres = fn._cache.load_overload(fn._sig, target)
                    if cres is None:
                        data = {"dispatcher": self, "args": fn._sig.args,
                                "return_type": fn._sig.return_type}
                        with nb_event.trigger_event("numba:compile", data=data), \
                                _tuned(self._py_func):
                            cres = fn._compile_uncached()
                        fn._cache.save_overload(fn._sig, cres)
                    fn._library = cres.library
                    fn._wrapper_name = cres.fndesc.llvm_cfunc_wrapper_name
                    fn._wrapper_address = fn._library.get_pointer_to_function(fn._wrapper_name)
                    self._fn = fn
        return self._fn

    @property
    def address(self) -> int:
        """The C entry point (compiled or loaded from the cache on first access)."""
        return self.compiled.address

    def __repr__(self):
        return f"<gaussopt cfunc {self.__module__}.{self.__qualname__}>"


# --------------------------------------------------------------------------- compile events
class _Watch(nb_event.Listener):
    """Counts the time numba spends compiling (outermost compilations only) and prints
    :func:`notice` before the first compilation of gaussopt code in the process."""

    def __init__(self):
        self.depth = 0
        self.t0 = 0.0
        self.total = 0.0
        self.outside = 0.0          # (compiling outside ensure(), which times itself)
        self.noticed = False

    def on_start(self, event):
        if self.depth == 0:
            self.t0 = time.perf_counter()
            if not self.noticed:
                f = getattr(event.data.get("dispatcher"), "py_func", None)
                mod = getattr(f, "__module__", "") or ""
                if mod.startswith("gaussopt"):
                    self.noticed = True
                    notice()
                    if PREFETCH:
                        prefetch(*PREFETCH)
        self.depth += 1

    def on_end(self, event):
        self.depth -= 1
        if self.depth == 0:
            d = time.perf_counter() - self.t0
            self.total += d
            if _ENSURING[0] == 0:
                self.outside += d


_WATCH = _Watch()
nb_event.register("numba:compile", _WATCH)

#: where the notice goes (None: nowhere); a command line with a progress bar sets it
NOTICE_STREAM = sys.stderr

#: ``None``, or ``progress(done, total)`` called by :func:`ensure` as it loads the units
#: of a batch that compiles something (the command line draws its progress bar with it)
PROGRESS: Optional[Callable[[int, int], None]] = None


def notice() -> None:
    """The one line printed before gaussopt first compiles code in a process (set
    ``$GAUSSOPT_QUIET=1`` to silence it)."""
    stream = NOTICE_STREAM if NOTICE_STREAM is not None else None
    if stream is None or os.environ.get("GAUSSOPT_QUIET"):
        return
    print("gaussopt: compiling for this machine (once per version; cached in "
          f"{code_cache_dir()}; `gaussopt compile` does it ahead)...", file=stream, flush=True)


def compile_seconds() -> float:
    """Seconds numba has spent compiling in this process so far (every compilation,
    gaussopt's or not; loading from the cache is not counted)."""
    with _LOCK:
        extra = time.perf_counter() - _WATCH.t0 if _WATCH.depth > 0 else 0.0
        return _WATCH.total + extra


def spent() -> float:
    """Seconds this process has spent on compiled code that was not running: in
    :func:`ensure` (compiling, waiting for the helper, loading from the cache) and
    compiling elsewhere. A run's wall time is the time it took less what this grew by
    (:func:`~gaussopt.simulate`)."""
    with _LOCK:
        extra = time.perf_counter() - _WATCH.t0 if (_WATCH.depth > 0 and _ENSURING[0] == 0) else 0.0
        ens = time.perf_counter() - _ENSURE_T0[0] if _ENSURING[0] > 0 else 0.0
        return _ENSURE_SECONDS[0] + ens + _WATCH.outside + extra


#: depth of :func:`ensure` calls, when the outermost began, the seconds spent in them
_ENSURING = [0]
_ENSURE_T0 = [0.0]
_ENSURE_SECONDS = [0.0]


# --------------------------------------------------------------------------- types of signatures
#: short names of numba types for unit signatures (:func:`unit`); modules add theirs
#: with :func:`declare_types`
TYPES: dict[str, object] = {
    "f8": nt.float64, "i8": nt.int64, "b1": nt.boolean, "void": nt.void, "none": nt.none,
    "f8v": nt.float64[::1], "f8m": nt.float64[:, ::1], "i8v": nt.int64[::1],
    "i8m": nt.int64[:, ::1], "b1v": nt.boolean[::1], "b1m": nt.boolean[:, ::1],
    "Tuple": nt.Tuple, "UniTuple": nt.UniTuple,
}
_TYPE_MAKERS: list[Callable[[], dict]] = []


def declare_types(maker: Callable[[], dict]) -> Callable[[], dict]:
    """Register ``maker() -> {name: numba type}``: names usable in unit signatures,
    built on the first signature that needs them (they may compile). A maker may use the
    names other makers declare (``TYPES[name]``, or ``ns[name]`` of ``ns = dict(TYPES)``):
    one that raises ``KeyError`` for a name not made yet is called again after the
    others."""
    _TYPE_MAKERS.append(maker)
    return maker


def _namespace() -> dict:
    while _TYPE_MAKERS:
        made, waiting = False, []
        while _TYPE_MAKERS:
            maker = _TYPE_MAKERS.pop(0)
            try:
                TYPES.update(maker())
                made = True
            except KeyError as e:           # (a name another maker declares)
                waiting.append((maker, e))
        _TYPE_MAKERS.extend(m for m, _ in waiting)
        if waiting and not made:
            names = "; ".join(f"{m.__module__}.{m.__qualname__} needs {e}" for m, e in waiting)
            raise RuntimeError(f"gaussopt: compiled types that no imported module declares: {names}")
    return TYPES


# --------------------------------------------------------------------------- units
_UNITS: dict[str, "Unit"] = {}
#: units by their key (:attr:`Unit.key`: what a compiled caller asks the lookup for)
_BY_KEY: dict[int, "Unit"] = {}


def _lookup(key: int) -> int:
    """Called (through a C callback) by compiled code the first time a call site calls a
    unit in a process: loads the unit (compiled, or from the cache) and returns its
    address; 0 when no unit of this gaussopt has the key (code compiled against another
    version, with another signature) or loading failed (after printing why): the
    caller then raises ``RuntimeError``."""
    with _ensuring():                         # (loading compiled code: not a run's time)
        u = _BY_KEY.get(key)
        if u is None:
            for v in list(_UNITS.values()):      # (keys need the signatures: built on demand)
                _BY_KEY.setdefault(v.key, v)
            u = _BY_KEY.get(key)
            if u is None:
                return 0
        try:
            if _BATCH[0] or _ACTIVE[0] is None:
                u.load()
            else:
                ensure(u)       # (the helper may be compiling it: BACKGROUND)
            return u.address
        except BaseException:  # noqa: BLE001 - reported, then the compiled caller raises
            import traceback

            traceback.print_exc()
            return 0


_LOOKUP = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int64)(_lookup)
#: the one symbol compiled callers of units refer to (stable across versions of gaussopt:
#: code compiled against another version finds it, and gets a clean error from it)
_LOOKUP_SYMBOL = "gaussopt_unit_lookup_v1"
ll.add_symbol(_LOOKUP_SYMBOL, ctypes.cast(_LOOKUP, ctypes.c_void_p).value)


class Unit:
    """A separately compiled function of one declared signature (see the module
    docstring); made by :func:`unit`. ``unit.dispatcher`` is its numba dispatcher;
    ``python``: an entry that Python calls (compiled with the wrapper Python needs, see
    :class:`_Dispatcher`; a unit without it that Python calls gets that version then)."""

    def __init__(self, py_func, signature: str, lazy: bool, options: dict, python: bool = False):
        self.py_func = py_func
        self.name = f"{py_func.__module__}.{py_func.__qualname__}"
        self.lazy = lazy
        self.python = python
        self._sig_text = signature
        self._sig = None
        self.dispatcher = jit(cache=True, **options)(py_func)
        self.address = 0
        self._key: Optional[int] = None
        self.loaded = False
        self._loading = False
        _UNITS[self.name] = self
        _ITEMS[self.name] = self

    @property
    def signature(self):
        """The numba signature (``return_type(arg types)``), built on first use."""
        if self._sig is None:
            with _LOCKS:
                ns = _namespace()
                try:
                    sig = eval(self._sig_text, {"__builtins__": {}}, ns)  # noqa: S307 - our own text
                except Exception as e:
                    raise RuntimeError(f"gaussopt: bad signature of {self.name}: "
                                       f"{self._sig_text!r}: {e}") from e
                if not isinstance(sig, nb.core.typing.templates.Signature):
                    raise RuntimeError(f"gaussopt: the signature of {self.name} must be "
                                       f"'return_type(args)', found {self._sig_text!r}")
                self._sig = sig
        return self._sig

    @property
    def key(self) -> int:
        """A 64-bit hash of the unit's name and full signature (every field of every
        record type in it): what compiled callers look the unit up by."""
        if self._key is None:
            h = hashlib.blake2b(f"{self.name}|{self.signature}".encode(), digest_size=8)
            self._key = int.from_bytes(h.digest(), "little", signed=True)
        return self._key

    def load(self) -> None:
        """Compile this unit or load it from the cache (with the units it may call:
        :class:`_Dispatcher`); its machine code's address in :attr:`address`."""
        if self.loaded:
            return
        with _LOCKS:
            if self.loaded or self._loading:
                return
            self._loading = True
            t0 = time.perf_counter()
            try:
                sig = self.signature
                disp = self.dispatcher
                _PYCALL.want = self.python        # (the version Python calls)
                disp.compile(sig)
                cres = disp.overloads[tuple(sig.args)]
                self.address = int(cres.library.get_pointer_to_function(
                    cres.fndesc.llvm_func_name))
                _BY_KEY[self.key] = self
                self.loaded = True
                if _TRACE:
                    print(f"[unit] {os.getpid()} {t0 - _T0:8.3f} {time.perf_counter() - _T0:8.3f} "
                          f"{self.name}", file=sys.stderr, flush=True)
            finally:
                self._loading = False

    def in_cache(self) -> bool:
        """Whether numba's cache has this unit for its signature (its index, read without
        loading anything; False when that cannot be told)."""
        try:
            disp = self.dispatcher
            cache = disp._gaussopt_py_cache if self.python else disp._cache
            key = cache._index_key(self.signature, disp.targetctx.codegen())
            return key in cache._cache_file._load_index()
        except Exception:  # noqa: BLE001 - another numba: compile as if it were missing
            return False

    def __repr__(self):
        return f"<gaussopt unit {self.name}{' (loaded)' if self.loaded else ''}>"


_DEPS: dict[int, list] = {}
#: ``$GAUSSOPT_DEBUG_COMPILE``: each unit's load (compiled or from the cache) on stderr,
#: with the process and its start and end (seconds since gaussopt was imported)
_TRACE = bool(os.environ.get("GAUSSOPT_DEBUG_COMPILE"))
_T0 = time.perf_counter()


def deps_of(py_func) -> list["Unit"]:
    """The units ``py_func`` may call, directly or through the compiled helpers it
    calls (found in its bytecode), lazy units excepted; computed once."""
    key = id(py_func.__code__)
    if key not in _DEPS:
        found: dict[str, Unit] = {}
        _scan(py_func, found, set())
        _DEPS[key] = [u for u in found.values()
                      if not u.lazy and u.py_func is not py_func]
    return _DEPS[key]


def _scan(f, found: dict, seen: set) -> None:
    """Units referenced by ``f`` and by the compiled helpers it references (not through
    other units: a unit loads its own)."""
    code = getattr(f, "__code__", None)
    if code is None or id(code) in seen:
        return
    seen.add(id(code))
    g = f.__globals__
    ins = list(dis.get_instructions(code))
    for i, x in enumerate(ins):
        if x.opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
            continue
        obj = g.get(x.argval)
        if isinstance(obj, pytypes.ModuleType) and i + 1 < len(ins) \
                and ins[i + 1].opname in ("LOAD_ATTR", "LOAD_METHOD"):
            obj = getattr(obj, ins[i + 1].argval, None)
        u = getattr(obj, "_gaussopt_unit", None)
        if isinstance(u, Unit):
            found.setdefault(u.name, u)
        elif isinstance(obj, CPUDispatcher):
            _scan(obj.py_func, found, seen)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            _scan(pytypes.FunctionType(c, g), found, seen)


#: while :func:`ensure` loads a closed set of units, their dispatchers do not load their
#: own dependencies one by one (the set has them)
_BATCH = [0]
#: share the compilation with a helper process when at least this many units are missing
PARALLEL_MIN = 4
#: set in the helper process (it compiles what it is told, alone)
_HELPER_ENV = "GAUSSOPT_COMPILE_HELPER"


def _as_item(t):
    """A unit or a :class:`cfunc` (what :func:`ensure` takes)."""
    if isinstance(t, (Unit, cfunc)):
        return t
    u = getattr(t, "_gaussopt_unit", None)
    if u is None:
        raise TypeError(f"ensure() takes gaussopt units (and cfuncs), found {t!r}")
    return u


def _closure(items: Iterable) -> list:
    """The items and every (not lazy) unit they may call, transitively, not yet loaded."""
    out: dict = {}
    stack = list(items)
    while stack:
        u = stack.pop()
        if u.name in out or u.loaded:
            continue
        out[u.name] = u
        if isinstance(u, Unit):
            stack.extend(deps_of(u.py_func))
    return list(out.values())


def _cost(u) -> int:
    """A rough measure of the time ``u`` takes to compile: its lines of source."""
    try:
        return len(inspect.getsourcelines(u.py_func)[0])
    except (OSError, TypeError):
        return 50


def _parallel() -> bool:
    """Share compilation with a second process: not in the helper itself, with at least
    two CPUs, unless ``$GAUSSOPT_COMPILE_JOBS=1``."""
    return (os.environ.get(_HELPER_ENV) is None and (os.cpu_count() or 1) >= 2
            and os.environ.get("GAUSSOPT_COMPILE_JOBS", "2").strip() != "1")


#: the helper process ends after this many seconds without work
HELPER_IDLE = 30.0


class _Batch:
    """Units (and cfuncs) compiled by this process and a helper process together: the
    helper takes names from a pipe, this process adds to it (:meth:`add`); each side
    claims an item before compiling it (a file created exclusively in the batch's
    directory) and marks it done after. This side waits only for an item it needs that
    the helper is compiling, and meanwhile compiles others of the batch."""

    def __init__(self):
        import subprocess

        self.items: dict = {}
        self.order: list[str] = []
        root = code_cache_dir()
        for old in root.glob("claims-*"):            # (left by a process that was killed)
            try:
                if time.time() - old.stat().st_mtime > 3600:
                    shutil.rmtree(old, ignore_errors=True)
            except OSError:
                pass
        self.dir = Path(tempfile.mkdtemp(prefix="claims-", dir=root))
        env = dict(os.environ, GAUSSOPT_CACHE_DIR=str(cache_dir()), GAUSSOPT_QUIET="1")
        env[_HELPER_ENV] = "1"
        env["PYTHONPATH"] = os.pathsep.join([str(_PKG.parent)] + [
            p for p in (os.environ.get("PYTHONPATH") or "").split(os.pathsep) if p])
        # (this gaussopt first on the path: ``python -c`` puts the working directory
        # first, which may hold another checkout of gaussopt, whose source hash differs)
        code = (f"import sys; sys.path.insert(0, {str(_PKG.parent)!r}); "
                "from gaussopt.core.compiled import _helper_main; sys.exit(_helper_main())")
        self.log = open(root / "helper.log", "a")
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     stderr=self.log, text=True, bufsize=1)
        self._write([source_hash(), str(self.dir)])

    def _write(self, lines: list[str]) -> bool:
        try:
            self.proc.stdin.write("".join(x + "\n" for x in lines))
            self.proc.stdin.flush()
            return True
        except (OSError, ValueError):
            return False

    def add(self, items: Iterable) -> None:
        """Hand the items the cache lacks to the helper (the costliest first)."""
        new = [u for u in items if u.name not in self.items and not u.loaded
               and not u.in_cache()]
        new.sort(key=_cost, reverse=True)
        if new and self._write([u.name for u in new]):
            for u in new:
                self.items[u.name] = u
                self.order.append(u.name)

    def claim(self, name: str) -> bool:
        return _claim(self.dir, name)

    def done(self, name: str) -> bool:
        return (self.dir / f"{name}.done").exists()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def next_unclaimed(self, among):
        """The first item of the batch in ``among`` (names) that neither side has claimed
        (claimed now)."""
        for name in self.order:
            if name in among and not (self.dir / name).exists() and self.claim(name):
                return self.items[name]
        return None

    def close(self, kill: bool = False) -> None:
        try:
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        if kill and self.alive():
            self.proc.kill()
            self.proc.wait()
        if not self.alive():
            shutil.rmtree(self.dir, ignore_errors=True)
            self.log.close()


def _claim(directory: Path, name: str) -> bool:
    try:
        os.close(os.open(directory / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


_ACTIVE: list = [None]          # the batch shared with the helper, while it runs


def _helper_main() -> int:
    """The helper process: after the parent's source hash (which must be this one's) and
    the batch's directory, compile the items named on stdin that the parent has not
    claimed, marking each done; end at the end of stdin or after :data:`HELPER_IDLE`
    seconds without a name."""
    import importlib
    import queue

    stdin = sys.stdin
    head = [stdin.readline().strip(), stdin.readline().strip()]
    if head[0] != source_hash():
        return 3
    directory = Path(head[1])
    names: queue.Queue = queue.Queue()

    def read():
        for line in stdin:
            names.put(line.strip())
        names.put(None)

    threading.Thread(target=read, daemon=True).start()
    _BATCH[0] += 1                       # (the parent loads every unit's dependencies)
    while True:
        try:
            name = names.get(timeout=HELPER_IDLE)
        except queue.Empty:
            return 0
        if name is None:
            return 0
        if name and _claim(directory, name):
            try:
                module = name.rpartition(".")[0]
                if module.startswith("gaussopt_model_"):      # (a generated model)
                    import_generated(module)
                else:
                    importlib.import_module(module)
                _ITEMS[name].load()
                gc.collect()             # (what lives on is set aside from later full
                gc.freeze()              # collections: ensure())
            except Exception:  # noqa: BLE001 - the parent compiles it itself
                import traceback

                traceback.print_exc()
            (directory / f"{name}.done").touch()


def _batch_for(todo: list) -> Optional[_Batch]:
    """The running batch (given the items of ``todo`` the cache lacks), or a new one when
    enough are missing (None: compile alone)."""
    batch = _ACTIVE[0]
    if batch is not None and not batch.alive():
        batch.close()
        batch = _ACTIVE[0] = None
    if batch is None and _parallel() and len(todo) >= PARALLEL_MIN:
        if sum(not u.in_cache() for u in todo) >= PARALLEL_MIN:
            try:
                batch = _ACTIVE[0] = _Batch()
            except OSError:
                batch = None
    if batch is not None:
        batch.add(todo)
    return batch


def prefetch(*targets) -> None:
    """Have a helper process compile the given units or cfuncs (and the units they may
    call) that the cache lacks, and return at once: a later :func:`ensure` finds them
    compiled or shares the rest. Called when gaussopt first compiles in a process (with
    :data:`PREFETCH`: what every run needs), so that the helper works while this process
    builds a model, and by front ends with the model's own compiled functions."""
    if _parallel():
        with _LOCKS:
            try:
                batch = _ACTIVE[0]
                todo = _closure(_as_item(t) for t in targets)
                if batch is not None and batch.alive():
                    batch.add(todo)
                elif todo:
                    _batch_for(todo)
            except Exception:  # noqa: BLE001 - a speculation: never in the way
                if os.environ.get("GAUSSOPT_DEBUG_COMPILE"):
                    import traceback

                    traceback.print_exc()


#: what :func:`prefetch` compiles ahead when gaussopt first compiles in a process (the
#: engine's entry points of a default run, the step of a compiled model); modules add
#: their units here
PREFETCH: list = []
#: lazy units that a run takes only in some cases (a singular position, rows that are
#: not disjoint): handed to the helper when the first :func:`ensure` that shared work
#: with it is done, so that it compiles them while this process runs, not before; a run
#: that takes one before then waits for the helper's copy (:func:`_lookup`)
BACKGROUND: list = []


@atexit.register
def _end_batch() -> None:
    batch = _ACTIVE[0]
    if batch is not None:
        batch.close(kill=True)


class _ensuring:
    """Counts the time of the outermost :func:`ensure` (for :func:`spent`)."""

    def __enter__(self):
        if _ENSURING[0] == 0:
            _ENSURE_T0[0] = time.perf_counter()
        _ENSURING[0] += 1

    def __exit__(self, *exc):
        _ENSURING[0] -= 1
        if _ENSURING[0] == 0:
            _ENSURE_SECONDS[0] += time.perf_counter() - _ENSURE_T0[0]


def ensure(*targets, progress: Optional[Callable[["Unit"], None]] = None) -> float:
    """Load the given units (or the functions :func:`unit` returns) and every unit they
    may call: compiled, or loaded from the cache. Returns the seconds it took.
    ``progress(unit)`` is called after each unit is loaded.

    When several of them are missing from the cache, a helper process shares the work
    (numba compiles in one thread: two processes take about half the time on two cores;
    :class:`_Batch`); ``$GAUSSOPT_COMPILE_JOBS=1`` compiles everything here."""
    t0 = time.perf_counter()
    todo = _closure(_as_item(t) for t in targets)
    if not todo:
        return 0.0
    with _LOCKS, _ensuring():
        _BATCH[0] += 1
        # (Python's full garbage collections scan every object: numba's compiler makes
        # many, and the collections took ~10 % of a compilation. Those before the batch
        # are set aside meanwhile, and collected with the rest once it is done: the
        # next full collection, 50-70 ms after loading compiled code, would otherwise
        # fall in the run that follows)
        gc.freeze()
        bar = PROGRESS if (PROGRESS is not None
                           and any(not u.loaded and not u.in_cache() for u in todo)) else None
        count = [0]

        def loaded(u):
            count[0] += 1
            if bar is not None:
                bar(count[0], len(todo))
            if progress is not None:
                progress(u)

        try:
            batch = _batch_for(todo)
            waiting = []
            for u in sorted(todo, key=_cost, reverse=True):
                if batch is not None and u.name in batch.items and not batch.claim(u.name):
                    waiting.append(u)            # the helper's: loaded when it is done
                    continue
                u.load()
                if batch is not None and u.name in batch.items:
                    (batch.dir / f"{u.name}.done").touch()
                loaded(u)
            names = {u.name for u in todo}
            for u in waiting:
                while not batch.done(u.name) and batch.alive():
                    other = batch.next_unclaimed(names)     # meanwhile, the others needed
                    if other is not None:
                        other.load()
                        (batch.dir / f"{other.name}.done").touch()
                    else:
                        time.sleep(0.01)
                u.load()         # (from the cache the helper wrote; compiled if it died)
                loaded(u)
            if os.environ.get("GAUSSOPT_DEBUG_COMPILE") and batch is not None:
                print(f"[ensure] {len(todo)} ({todo[0].name} ...), {len(waiting)} from the "
                      f"helper, {time.perf_counter() - t0:.2f} s", file=sys.stderr)
        finally:
            _BATCH[0] -= 1
            gc.unfreeze()
            gc.collect()
        if batch is not None and BACKGROUND and _BATCH[0] == 0:
            # what a run may need later, for the helper while this process runs
            prefetch(*BACKGROUND)
            BACKGROUND.clear()
    return time.perf_counter() - t0


def units() -> list[Unit]:
    """Every unit of the modules imported so far."""
    return list(_UNITS.values())


def compile_all(*extra, progress: Optional[Callable[[Unit, int, int], None]] = None) -> float:
    """Import every module of gaussopt that defines units and load them all, with
    gaussopt's cfuncs and the ``extra`` units or cfuncs given (a model's compiled
    functions), compiling what the cache lacks: ``gaussopt compile``.
    ``progress(unit, i, total)`` after each. Returns the seconds it took."""
    import importlib

    for name in _UNIT_MODULES:
        importlib.import_module(name)
    todo = [u for u in units() if not u.loaded]
    todo += [f for f in _ITEMS.values() if isinstance(f, cfunc) and not f.loaded
             and f.__module__.startswith("gaussopt.")]
    todo += [_as_item(f) for f in extra]
    done = [0]

    def step(u):
        done[0] += 1
        if progress is not None:
            progress(u, done[0], len(todo))

    return ensure(*todo, progress=step)


#: modules that define units (imported by :func:`compile_all`)
_UNIT_MODULES = ("gaussopt.gauss.dense_step", "gaussopt.gauss.band_step", "gaussopt.integrate.engine", "gaussopt.gauss.compiled_step",
                 "gaussopt.core.model_interface",
                 "gaussopt.gauss.solvers.qp.compiled_qp", "gaussopt.gauss.solvers.ga.pygad_ga",
                 "gaussopt.multibody.planar.compiled_model", "gaussopt.gauss.lcp")


def _caller(u: Unit, params: list[str]):
    """The intrinsic through which compiled code calls ``u``: checks the argument types
    against the declared signature, then calls ``u`` through its pointer."""

    def typer(typingctx, args):
        sig = u.signature
        if len(args) != len(sig.args):
            raise TypingError(f"gaussopt unit {u.name} takes {len(sig.args)} arguments, "
                              f"found {len(args)}")
        for k, (a, d) in enumerate(zip(args, sig.args)):
            if a != d and typingctx.can_convert(a, d) is None:
                raise TypingError(f"gaussopt unit {u.name}: argument {params[k]!r} must be "
                                  f"{d}, found {a}")

        def codegen(context, builder, signature, llargs):
            fnty = context.call_conv.get_function_type(sig.return_type, sig.args)
            mod = builder.module
            i8p = ir.IntType(8).as_pointer()
            # the unit's address, cached per module in a private variable of its own:
            # looked up (:func:`_lookup`, through a C callback) on the first call
            name = f"gaussopt.site.{u.key & 0xFFFFFFFFFFFFFFFF:016x}"
            gv = mod.globals.get(name)
            if gv is None:
                gv = ir.GlobalVariable(mod, i8p, name)
                gv.linkage = "internal"
                gv.initializer = ir.Constant(i8p, None)
            ptr = builder.load(gv)
            slot = cgutils.alloca_once_value(builder, ptr)
            with cgutils.if_unlikely(builder, cgutils.is_null(builder, ptr)):
                i64 = ir.IntType(64)
                lookup = cgutils.get_or_insert_function(mod, ir.FunctionType(i8p, [i64]),
                                                        _LOOKUP_SYMBOL)
                got = builder.call(lookup, [ir.Constant(i64, u.key)])
                with cgutils.if_unlikely(builder, cgutils.is_null(builder, got)):
                    context.call_conv.return_user_exc(
                        builder, RuntimeError,
                        (f"gaussopt: loading the compiled function {u.name} failed (the "
                         "error is printed above; or this code was compiled against "
                         "another version of gaussopt: clear numba's cache of it)",))
                builder.store(got, gv)
                builder.store(got, slot)
            ptr = builder.load(slot)
            fn = builder.bitcast(ptr, fnty.as_pointer())
            status, res = context.call_conv.call_function(builder, fn, sig.return_type,
                                                          sig.args, llargs)
            with cgutils.if_unlikely(builder, status.is_error):
                context.call_conv.return_status_propagate(builder, status)
            return res

        return sig, codegen

    plist = ", ".join(params)
    ns = {"_typer": typer}
    exec(f"def {u.py_func.__name__}(typingctx, {plist}):\n"
         f"    return _typer(typingctx, ({plist}{',' if len(params) == 1 else ''}))\n", ns)
    return ns[u.py_func.__name__]


class UnitFunction(_Intrinsic):
    """What :func:`unit` returns: to compiled code an intrinsic (a call through the
    unit's pointer, typed by its declared signature), to Python a function that runs the
    unit's dispatcher (``.dispatcher``; ``.unit`` is the :class:`Unit`)."""

    def __call__(self, *args):
        # arrays the unit takes as C-contiguous: a read-only or non-contiguous one (an
        # input: outputs are the caller's own buffers) is passed as a C-contiguous copy,
        # so that the dispatcher runs the declared signature instead of compiling another
        # whose calls into other units would not type
        kinds = self._arrays
        if kinds is None:
            kinds = self._arrays = tuple(isinstance(t, nt.Array) for t in self.unit.signature.args)
        for k, x in enumerate(args):
            if k < len(kinds) and kinds[k] and isinstance(x, np.ndarray) \
                    and not (x.flags.c_contiguous and x.flags.writeable):
                args = args[:k] + (np.array(x, order="C"),) + args[k + 1:]
        return self.dispatcher(*args)

    _arrays = None

    def __repr__(self):
        return f"<gaussopt compiled function {self._name}>"


def unit(signature: str, *, lazy: bool = False, python: bool = False, **options):
    """Decorator: compile the function as a :class:`Unit` of ``signature``, a string
    ``"return_type(arg, ...)"`` of numba types or of the short names of :data:`TYPES`
    (``"i8(f8m, w, i8)"``). Returns a :class:`UnitFunction`: called from Python it runs
    the unit's dispatcher (which loads the units it may call first); called from compiled
    code it is a call through the unit's pointer. ``python=True``: an entry point of
    Python's (:class:`Unit`). ``options`` go to numba (``cache=True`` implied)."""

    def deco(py_func):
        u = Unit(py_func, signature, lazy, options, python)
        params = list(inspect.signature(py_func).parameters)
        fn = UnitFunction(u.name, _caller(u, params))
        fn._register()
        fn.__doc__ = py_func.__doc__
        fn.__module__ = py_func.__module__
        fn.__qualname__ = py_func.__qualname__
        fn.__wrapped__ = py_func
        fn.dispatcher = u.dispatcher
        fn.unit = fn._gaussopt_unit = u
        return fn
    return deco
