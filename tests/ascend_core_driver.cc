// ms-scatter: the Ascend backend's CANN-free core (kernels/ascend/scatter_core.h) on the host,
// for tests/test_ascend_core.py (ctypes) and, as an aot library, for the Ascend path's Python
// layer run through MindSpore on CPU (st/test_ascend_emulated.py). Built by
// tests/_ascend_build.py with g++; never installed.
//
// HostMem plays the AI core: the UB windows are host buffers of exactly the sizes the tiling
// gave, and every move is checked the way the device needs it (count within its window, UB
// offsets on 32-byte blocks, GM ranges inside their tensor); every 32-byte block of y and of
// the workspace records the core that wrote it first, and a second core writing it is a
// violation. The cores of a call run one after another in a permuted order (the order must
// not matter: they share nothing).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/plan.h"
#include "ms_scatter/reducer.h"
#include "scatter_core.h"

namespace {

using ms_scatter::ascend::Tiling;
using ms_scatter::ascend::TilingInput;

constexpr int kViolation = 5;
constexpr int64_t kUbKeptByOpHost = 8 * 1024;  // op_host/ms_scatter_nd.cpp's kUbKept

}  // namespace

// tests/ascend_kernel_tu.cc (the kernel layer on the stand-in Ascend C calls)
extern "C" {
void mss_stub_reset(int64_t ub_bytes);
void mss_stub_register(void *base, int64_t bytes, int is_output);
void mss_stub_set_core(int core);
int mss_stub_problem(char *buf, int len);
int mss_kernel_launch(const char *reduction, const char *dtype, const char *index_dtype, uint8_t *x,
                      uint8_t *indices, uint8_t *updates, uint8_t *y, uint8_t *status, uint8_t *workspace,
                      uint8_t *tiling);
}

namespace {

struct Checker {
  std::string problem;  // the first violation
  void fail(const std::string &what) {
    if (problem.empty()) problem = what;
  }
};

// Which core wrote each 32-byte block of a GM tensor.
struct Owners {
  std::vector<int> owner;
  int64_t elem_bytes = 1;
  void reset(int64_t numel, int64_t bytes) {
    elem_bytes = bytes;
    owner.assign(static_cast<size_t>((numel * bytes + 31) / 32 + 1), -1);
  }
  void claim(int core, int64_t gm, int64_t n, const char *what, Checker &c) {
    if (n <= 0) return;
    const int64_t first = gm * elem_bytes / 32, last = ((gm + n) * elem_bytes - 1) / 32;
    for (int64_t b = first; b <= last; ++b) {
      int &o = owner[static_cast<size_t>(b)];
      if (o < 0) o = core;
      if (o != core)
        c.fail(std::string("cores ") + std::to_string(o) + " and " + std::to_string(core) + " both write block " +
               std::to_string(b) + " of " + what);
    }
  }
};

template <typename T, typename I>
struct HostMem {
  using Acc = typename ms_scatter::AccOf<T>::type;
  const Tiling &t;
  const T *x;
  const I *indices;
  const T *updates;
  T *y;
  int64_t *status;
  std::vector<Acc> &workspace;
  int64_t x_numel, idx_numel, upd_numel;
  int core;
  Owners &y_owners;
  Owners &ws_owners;
  Checker &check;
  std::vector<I> idx_win;
  std::vector<T> upd_win;
  std::vector<Acc> acc_win;
  int64_t moves = 0;

  HostMem(const Tiling &t_, const T *x_, const I *i_, const T *u_, T *y_, int64_t *s_, std::vector<Acc> &ws,
          int64_t xn, int64_t in, int64_t un, int core_, Owners &yo, Owners &wo, Checker &c)
      : t(t_), x(x_), indices(i_), updates(u_), y(y_), status(s_), workspace(ws), x_numel(xn), idx_numel(in),
        upd_numel(un), core(core_), y_owners(yo), ws_owners(wo), check(c),
        idx_win(static_cast<size_t>(t_.idx_window)), upd_win(static_cast<size_t>(t_.upd_window)),
        acc_win(static_cast<size_t>(t_.acc_window)) {}

  bool range(int64_t gm, int64_t n, int64_t numel, const char *what) {
    if (gm < 0 || n < 0 || gm + n > numel) {
      check.fail(std::string(what) + " range [" + std::to_string(gm) + ", +" + std::to_string(n) +
                 ") outside the tensor (" + std::to_string(numel) + " elements)");
      return false;
    }
    return true;
  }
  bool window(int64_t win, int64_t n, const char *what) {
    if (win < 0 || n < 0 || win + n > t.acc_window) {
      check.fail(std::string(what) + ": accumulator window overflow");
      return false;
    }
    if ((win * static_cast<int64_t>(sizeof(Acc))) % 32 != 0) {
      check.fail(std::string(what) + ": UB offset not on a 32-byte block");
      return false;
    }
    return true;
  }

  void fetch_indices(int64_t begin, int64_t count) {
    ++moves;
    if (count > t.idx_window) return check.fail("index window overflow");
    if (!range(begin, count, idx_numel, "indices")) return;
    std::memcpy(idx_win.data(), indices + begin, static_cast<size_t>(count) * sizeof(I));
  }
  int64_t index_at(int64_t j) { return static_cast<int64_t>(idx_win[static_cast<size_t>(j)]); }
  void fetch_updates(int64_t begin, int64_t count) {
    ++moves;
    if (count > t.upd_window) return check.fail("updates window overflow");
    if (!range(begin, count, upd_numel, "updates")) return;
    std::memcpy(upd_win.data(), updates + begin, static_cast<size_t>(count) * sizeof(T));
  }
  Acc update_at(int64_t j) { return ms_scatter::to_acc<T>(upd_win[static_cast<size_t>(j)]); }
  void acc_from_x(int64_t win, int64_t gm, int64_t n) {
    ++moves;
    if (!window(win, n, "acc_from_x") || !range(gm, n, x_numel, "x")) return;
    for (int64_t j = 0; j < n; ++j) acc_win[static_cast<size_t>(win + j)] = ms_scatter::to_acc<T>(x[gm + j]);
  }
  void acc_from_gm(int64_t win, int64_t gm, int64_t n) {
    ++moves;
    if (!window(win, n, "acc_from_gm") || !range(gm, n, x_numel, "accumulator")) return;
    for (int64_t j = 0; j < n; ++j)
      acc_win[static_cast<size_t>(win + j)] =
          t.workspace_acc ? workspace[static_cast<size_t>(gm + j)] : ms_scatter::to_acc<T>(y[gm + j]);
  }
  void acc_to_gm(int64_t win, int64_t gm, int64_t n) {
    ++moves;
    if (!window(win, n, "acc_to_gm") || !range(gm, n, x_numel, "accumulator")) return;
    if (t.workspace_acc) {
      if (workspace.size() * sizeof(Acc) > static_cast<size_t>(t.workspace_bytes))
        return check.fail("workspace larger than the tiling asked for");
      ws_owners.claim(core, gm, n, "the workspace", check);
      for (int64_t j = 0; j < n; ++j) workspace[static_cast<size_t>(gm + j)] = acc_win[static_cast<size_t>(win + j)];
    } else {
      acc_to_y(win, gm, n);
    }
  }
  void acc_to_y(int64_t win, int64_t gm, int64_t n) {
    ++moves;
    if (!window(win, n, "acc_to_y") || !range(gm, n, x_numel, "y")) return;
    y_owners.claim(core, gm, n, "y", check);
    for (int64_t j = 0; j < n; ++j) y[gm + j] = ms_scatter::from_acc<T>(acc_win[static_cast<size_t>(win + j)]);
  }
  Acc acc_at(int64_t j) { return acc_win[static_cast<size_t>(j)]; }
  void acc_set(int64_t j, Acc v) { acc_win[static_cast<size_t>(j)] = v; }
  void write_status(const int64_t *s) {
    if (core != 0) check.fail("a core other than 0 wrote the status");
    std::memcpy(status, s, sizeof(int64_t) * ms_scatter::ascend::kStatusWords);
  }
};

// A permutation of [0, n) from a seed (0: in order, 1: reversed, else an LCG shuffle).
std::vector<int> core_order(int n, int64_t seed) {
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[static_cast<size_t>(i)] = seed == 1 ? n - 1 - i : i;
  if (seed > 1) {
    uint64_t s = static_cast<uint64_t>(seed);
    for (int i = n - 1; i > 0; --i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      const int j = static_cast<int>((s >> 33) % static_cast<uint64_t>(i + 1));
      std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
    }
  }
  return order;
}

struct Call {
  const char *reduction;
  const char *dtype;
  const char *index_dtype;
  void *x, *indices, *updates, *y;
  int64_t *status;
  int ndims[4];
  int64_t *shapes[4];
  TilingInput in;
  int64_t order_seed;
  int64_t *tiling_out;    // kTilingWords, or null
  int64_t *stats_out;     // [cores run, GM<->UB moves], or null
  char *problem;
  int problem_len;
  bool kernel;  // run the Ascend C kernel layer (tests/ascend_kernel_tu.cc) instead of HostMem
};

template <typename Op, typename T, typename I>
int run_typed(Call &c, const Tiling &t) {
  using Acc = typename ms_scatter::AccOf<T>::type;
  if (c.tiling_out) std::memcpy(c.tiling_out, &t, sizeof t);
  const int64_t x_numel = t.rows * t.slice;
  std::vector<Acc> workspace(static_cast<size_t>(t.workspace_bytes / static_cast<int64_t>(sizeof(Acc))));
  Owners y_owners, ws_owners;
  y_owners.reset(x_numel, sizeof(T));
  ws_owners.reset(x_numel, sizeof(Acc));
  Checker check;
  const int64_t idx_numel = t.n * t.depth, upd_numel = t.n * t.slice;
  int64_t moves = 0;
  for (int core : core_order(static_cast<int>(t.cores), c.order_seed)) {
    HostMem<T, I> m(t, static_cast<const T *>(c.x), static_cast<const I *>(c.indices),
                    static_cast<const T *>(c.updates), static_cast<T *>(c.y), c.status, workspace, x_numel,
                    idx_numel, upd_numel, core, y_owners, ws_owners, check);
    ms_scatter::ascend::run_core<Op, Acc>(t, core, m);
    moves += m.moves;
  }
  if (c.stats_out) {
    c.stats_out[0] = t.cores;
    c.stats_out[1] = moves;
  }
  if (!check.problem.empty()) {
    if (c.problem && c.problem_len > 0)
      std::snprintf(c.problem, static_cast<size_t>(c.problem_len), "%s", check.problem.c_str());
    return kViolation;
  }
  return 0;
}

// The kernel layer's cores, on the stand-in UB (the whole of c.in.ub_bytes; the tiling got
// that less what op_host keeps for Ascend C itself).
int run_kernel_cores(Call &c, const Tiling &t) {
  if (c.tiling_out) std::memcpy(c.tiling_out, &t, sizeof t);
  ms_scatter::ascend::DtypeInfo v;
  int64_t index_bytes = 0;
  ms_scatter::ascend::ascend_value_dtype(c.dtype, &v);
  ms_scatter::ascend::ascend_index_dtype(c.index_dtype, &index_bytes);
  std::vector<int64_t> tiling(static_cast<size_t>(ms_scatter::ascend::kTilingWords));
  std::memcpy(tiling.data(), &t, sizeof t);
  std::vector<int64_t> workspace(static_cast<size_t>((t.workspace_bytes + 7) / 8));
  const int64_t x_bytes = t.rows * t.slice * v.bytes;
  mss_stub_reset(c.in.ub_bytes);
  mss_stub_register(c.x, x_bytes, 0);
  mss_stub_register(c.indices, t.n * t.depth * index_bytes, 0);
  mss_stub_register(c.updates, t.n * t.slice * v.bytes, 0);
  mss_stub_register(tiling.data(), static_cast<int64_t>(sizeof t), 0);
  mss_stub_register(c.y, x_bytes, 1);
  mss_stub_register(c.status, ms_scatter::ascend::kStatusWords * 8, 1);
  mss_stub_register(workspace.data(), t.workspace_bytes, 1);
  for (int core : core_order(static_cast<int>(t.cores), c.order_seed)) {
    mss_stub_set_core(core);
    if (mss_kernel_launch(c.reduction, c.dtype, c.index_dtype, static_cast<uint8_t *>(c.x),
                          static_cast<uint8_t *>(c.indices), static_cast<uint8_t *>(c.updates),
                          static_cast<uint8_t *>(c.y), reinterpret_cast<uint8_t *>(c.status),
                          reinterpret_cast<uint8_t *>(workspace.data()),
                          reinterpret_cast<uint8_t *>(tiling.data())) != 0) {
      ms_scatter::set_error(ms_scatter::kBadArguments, "no kernel for %s %s %s", c.reduction, c.dtype, c.index_dtype);
      return ms_scatter::kBadArguments;
    }
  }
  if (c.stats_out) {
    c.stats_out[0] = t.cores;
    c.stats_out[1] = 0;
  }
  if (mss_stub_problem(c.problem, c.problem_len) > 0) return kViolation;
  return 0;
}

// The host tiling (what op_host runs), then every core of the call.
template <typename Op>
int run_op(Call &c, const char *op_name) {
  Tiling t;
  const int64_t ub = c.kernel ? c.in.ub_bytes - kUbKeptByOpHost : c.in.ub_bytes;
  if (ms_scatter::ascend::tiling_for_call(op_name, ms_scatter::RejectsZero<Op>::value, c.ndims, c.shapes, c.dtype,
                                          c.index_dtype, c.in.cores, ub, c.in.force_mode, &t) != ms_scatter::kOk)
    return ms_scatter::kBadArguments;
  if (c.kernel) return run_kernel_cores(c, t);
#define MSS_INDEX_CASE(IN, IT) \
  if (std::strcmp(c.index_dtype, #IN) == 0) return run_typed<Op, T, IT>(c, t);
#define MSS_VALUE_CASE(VN, VT)              \
  if (std::strcmp(c.dtype, #VN) == 0) {     \
    using T = VT;                           \
    MS_SCATTER_INDEX_DTYPES(MSS_INDEX_CASE) \
  }
  MS_SCATTER_ASCEND_VALUE_DTYPES(MSS_VALUE_CASE)
#undef MSS_VALUE_CASE
#undef MSS_INDEX_CASE
  return ms_scatter::kBadArguments;  // not reached: tiling_for_call checked the dtypes
}

int run(Call &c) {
#define MSS_REDUCTION_CASE(R, OP) \
  if (std::strcmp(c.reduction, #R) == 0) return run_op<OP>(c, "MsScatterNd" #R);
  MS_SCATTER_REDUCTIONS(MSS_REDUCTION_CASE)
#undef MSS_REDUCTION_CASE
  ms_scatter::set_error(ms_scatter::kBadArguments, "unknown reduction %s", c.reduction);
  return ms_scatter::kBadArguments;
}

// The emulated device of the aot entries: 8 cores, a 4 KiB UB (small, so that ordinary test
// shapes take many windows and blocks).
constexpr int64_t kEmulatedCores = 8;
constexpr int64_t kEmulatedUb = 4096;

int aot_entry(const char *reduction, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  if (nparam != 5) {
    ms_scatter::set_error(ms_scatter::kBadArguments, "MsScatterNd%s: expected 3 inputs and 2 outputs, got %d",
                          reduction, nparam);
    return ms_scatter::kBadArguments;
  }
  if (ndims[4] != 1 || shapes[4][0] != 4 || std::strcmp(dtypes[4], "int64") != 0 ||
      std::strcmp(dtypes[0], dtypes[2]) != 0 || std::strcmp(dtypes[0], dtypes[3]) != 0) {
    ms_scatter::set_error(ms_scatter::kBadArguments, "MsScatterNd%s: bad outputs or dtypes", reduction);
    return ms_scatter::kBadArguments;
  }
  Call c{};
  c.reduction = reduction;
  c.dtype = dtypes[0];
  c.index_dtype = dtypes[1];
  c.x = params[0];
  c.indices = params[1];
  c.updates = params[2];
  c.y = params[3];
  c.status = static_cast<int64_t *>(params[4]);
  for (int a = 0; a < 4; ++a) {
    c.ndims[a] = ndims[a];
    c.shapes[a] = shapes[a];
  }
  c.in.cores = kEmulatedCores;
  c.in.ub_bytes = kEmulatedUb;
  c.order_seed = 1;
  return run(c);
}

}  // namespace

#define MSS_EXPORT extern "C" __attribute__((visibility("default")))

// One call of the Ascend op on host buffers: x, indices (..., d), updates -> y, status.
// Returns 0, plan.h's 1 (bad shapes or dtypes, or no tiling for this UB size: message in
// mss_last_error), 5 (a device rule broken: message in `problem`).
namespace {
int run_exported(bool kernel, const char *reduction, const char *dtype, const char *index_dtype, void *x,
                 void *indices, void *updates, void *y, int64_t *status, int x_ndim, int64_t *x_shape, int idx_ndim,
                 int64_t *idx_shape, int upd_ndim, int64_t *upd_shape, int64_t cores, int64_t ub_bytes,
                 int64_t force_mode, int64_t order_seed, int64_t *tiling_out, int64_t *stats_out, char *problem,
                 int problem_len) {
  try {
    Call c{};
    c.kernel = kernel;
    c.reduction = reduction;
    c.dtype = dtype;
    c.index_dtype = index_dtype;
    c.x = x;
    c.indices = indices;
    c.updates = updates;
    c.y = y;
    c.status = status;
    c.ndims[0] = x_ndim;
    c.ndims[1] = idx_ndim;
    c.ndims[2] = upd_ndim;
    c.ndims[3] = x_ndim;
    c.shapes[0] = x_shape;
    c.shapes[1] = idx_shape;
    c.shapes[2] = upd_shape;
    c.shapes[3] = x_shape;
    c.in.cores = cores;
    c.in.ub_bytes = ub_bytes;
    c.in.force_mode = force_mode;
    c.order_seed = order_seed;
    c.tiling_out = tiling_out;
    c.stats_out = stats_out;
    c.problem = problem;
    c.problem_len = problem_len;
    return run(c);
  } catch (const std::exception &e) {
    ms_scatter::set_error(ms_scatter::kBadArguments, "mss_ascend_run: %s", e.what());
    return ms_scatter::kBadArguments;
  }
}
}  // namespace

#define MSS_RUN_ARGS                                                                                           \
  const char *reduction, const char *dtype, const char *index_dtype, void *x, void *indices, void *updates,     \
      void *y, int64_t *status, int x_ndim, int64_t *x_shape, int idx_ndim, int64_t *idx_shape, int upd_ndim,  \
      int64_t *upd_shape, int64_t cores, int64_t ub_bytes, int64_t force_mode, int64_t order_seed,             \
      int64_t *tiling_out, int64_t *stats_out, char *problem, int problem_len
#define MSS_RUN_PASS                                                                                          \
  reduction, dtype, index_dtype, x, indices, updates, y, status, x_ndim, x_shape, idx_ndim, idx_shape, upd_ndim, \
      upd_shape, cores, ub_bytes, force_mode, order_seed, tiling_out, stats_out, problem, problem_len

// One call of the Ascend op on host buffers: x, indices (..., d), updates -> y, status, with
// the core (scatter_core.h) on HostMem. Returns 0, plan.h's 1 (bad shapes or dtypes, or no
// tiling for this UB size: message in mss_last_error), 5 (a device rule broken: `problem`).
MSS_EXPORT int mss_ascend_run(MSS_RUN_ARGS) { return run_exported(false, MSS_RUN_PASS); }

// The same call through the Ascend C kernel layer on the stand-in API (ub_bytes: the whole
// UB; the tiling gets ub_bytes less op_host's reserve).
MSS_EXPORT int mss_ascend_kernel_run(MSS_RUN_ARGS) { return run_exported(true, MSS_RUN_PASS); }

MSS_EXPORT int mss_last_error(char *buf, int len) { return ms_scatter::copy_last_error(buf, len, nullptr); }

MSS_EXPORT int64_t mss_tiling_words() { return ms_scatter::ascend::kTilingWords; }

// The aot entry points MindSpore calls on CPU for the emulated Ascend op (same inputs and
// outputs as the CANN op: x, indices, updates -> y, status).
#define MSS_AOT_ENTRY(R, OP)                                                                           \
  MSS_EXPORT int MsScatterNd##R(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, \
                                void *, void *) {                                                      \
    try {                                                                                              \
      return aot_entry(#R, nparam, params, ndims, shapes, dtypes);                                     \
    } catch (const std::exception &) {                                                                 \
      return ms_scatter::kBadArguments;                                                                \
    }                                                                                                  \
  }
MS_SCATTER_REDUCTIONS(MSS_AOT_ENTRY)
#undef MSS_AOT_ENTRY
