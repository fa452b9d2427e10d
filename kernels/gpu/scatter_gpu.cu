// ms-scatter CUDA kernels: the GPU twin of kernels/cpu/scatter_cpu.cc.
//
// Same engine, same entry points, same policies. Every operator is ScatterNd<Op> with an
// index depth (make_plan, plan.h); the reduction is a compile-time tag (reducer.h); value
// and index dtypes and the exported entry points come from the lists in dtypes.h. There
// is ONE scatter kernel template, apply_kernel<T, Op>, for all 21 operators.
//
// A call, all on the caller's stream (MindSpore's, or whatever the ctypes caller passes):
//   1. index_kernel<I, K>: one thread per index vector checks every component against
//      input_x's shape (a bad one: atomicMin of its flat position in `indices` into a
//      status word) and turns the vector into its destination slice number (the key);
//      nonzero_kernel<T> (integer Div only) records the first zero in `updates` likewise.
//   2. cub::DeviceRadixSort::SortPairs on (key, position) over only the key's bits.
//      Radix sort is stable, so each destination's updates become contiguous AND stay in
//      index order. cub::DeviceRunLengthEncode::Encode then gives one segment per touched
//      destination (its key and how many updates it takes).
//   3. The status (first bad index, first zero, number of segments) is copied back and
//      the stream synchronised: the only host round trip. An error returns code 2 / 3
//      with the CPU library's message, before anything has been written.
//   4. cub::DeviceScan::ExclusiveSum turns the counts into segment starts, and
//      apply_kernel<T, Op> runs one thread per (segment, slice element): it loads the
//      destination element into the accumulator type (float for half), folds that
//      destination's updates in index order, and stores once. No atomics anywhere, so
//      every result is bit-identical run to run and equal to the serial CPU result.
//
// What determinism costs, against a plain atomic scatter (which only exists for Add and
// a few dtypes, and whose float results change run to run): with n index vectors,
// K-byte keys (4; 8 when input_x has more than 2^32 destination slices) and b = bits of
// the largest destination number,
//   * index kernel: reads the indices, writes n x (K + 4) bytes;
//   * radix sort: ceil(b / 8) passes (onesweep), each reading and writing n x (K + 4)
//     bytes, plus a histogram pass over the keys;
//   * run-length encoding and scan: ~4 x n x 4 bytes more;
//   * temporary memory: 3 x n x K + 4 x n x 4 bytes plus CUB's scratch;
//   * one stream synchronisation per call (validation before any write needs it anyway),
//     and about 8 launches: a fixed cost per call (expected tens of us; check_gpu.py
//     measures it as the one-index call).
// For ScatterAdd float32 into 1e6 x 64 with 1e6 indices (b = 20) that is ~90 MB of extra
// traffic against ~580 MB for the scatter itself (updates read, touched rows read and
// written once each). Many updates to ONE destination are folded serially by one thread
// per slice element: the price of index-order rounding (float sums are not associative),
// as in the CPU engine; a tree reduction would be faster there and round differently.
//
// Temporary device memory: one block per call, cudaMallocFromPoolAsync/cudaFreeAsync on
// the stream from the library's own stream-ordered pool (which keeps up to 256 MiB
// between calls, so steady state does not hit the driver); cudaMalloc/cudaFree where the
// device has no memory pools. No managed memory.
//
// Concurrency: in-place calls on the same input_x serialise, as on the CPU: a striped
// host lock keyed by input_x's address orders their launches, and a per-stripe event
// makes a call's scatter wait for the previous one on another stream.
//
// Requires CUDA 11.2+ (stream-ordered memory pools) and the CUB that ships with it, C++17;
// compiles without a warning with nvcc 13.0 and nvcc 11.8 (CUB 1.x).
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include <climits>
#include <exception>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/plan.h"
#include "ms_scatter/reducer.h"

namespace ms_scatter {
namespace {

// A CUDA runtime failure (no device, out of memory, a launch error). plan.h's codes are
// 0-3; the Python side maps any other code to ScatterKernelError.
constexpr int kDeviceError = 4;
constexpr unsigned long long kNone = ~0ull;

// What the device tells the host before anything is written.
struct Status {
  unsigned long long bad_index;  // first flat position in `indices` of an out-of-range value, or kNone
  unsigned long long zero;       // first flat position in `updates` of a 0 (integer Div), or kNone
  int num_segments;              // distinct destinations (DeviceRunLengthEncode's run count)
  int skipped;                   // 1 when a row shard skipped an index vector (-1: none)
};

struct IndexShape {  // passed by value to index_kernel
  int64_t depth;
  int64_t dims[kMaxRank];    // bound of each index component: x.shape[:depth] (a row shard: global rows first)
  int64_t weight[kMaxRank];  // destination slice number = sum(index[d] * weight[d]), index[0] local to the shard
  int64_t row_begin;   // a row shard's first row (0 otherwise)
  int64_t rows;        // the rows input_x holds: a vector outside [row_begin, row_begin + rows) is skipped
  int64_t skip_key;    // the key a skipped vector gets: past every destination, so its segment sorts last
  int drop_negative;   // segment ids (Plan::drop_negative): a negative id is skipped, not an error
};

// ----------------------------------------------------------------------- the kernels

template <typename I, typename K>
__global__ void index_kernel(const I *__restrict__ idx, int64_t n, IndexShape s, K *__restrict__ keys,
                             int *__restrict__ pos, Status *status) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    int64_t key = 0;
    bool skip = false;
    for (int64_t d = 0; d < s.depth; ++d) {
      int64_t v = static_cast<int64_t>(idx[k * s.depth + d]);
      if (d == 0 && v < 0 && s.drop_negative) {
        skip = true;
        break;
      }
      if (v < 0 || v >= s.dims[d]) {
        atomicMin(&status->bad_index, static_cast<unsigned long long>(k * s.depth + d));
        key = 0;
        skip = false;
        break;
      }
      if (d == 0) {
        v -= s.row_begin;
        skip = static_cast<uint64_t>(v) >= static_cast<uint64_t>(s.rows);  // never for a whole input_x
      }
      key += v * s.weight[d];
    }
    if (skip) {
      key = s.skip_key;
      status->skipped = 1;  // every writer stores the same value
    }
    keys[k] = static_cast<K>(key);
    pos[k] = static_cast<int>(k);
  }
}

template <typename T>
__global__ void nonzero_kernel(const T *__restrict__ upd, int64_t total, Status *status) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride)
    if (upd[i] == T(0)) atomicMin(&status->zero, static_cast<unsigned long long>(i));
}

// Segment keys are 32- or 64-bit (a uniform branch, so that apply_kernel is not
// instantiated twice per dtype and reduction).
struct Keys {
  const void *p;
  bool wide;
  __device__ __forceinline__ int64_t operator[](int64_t s) const {
    return wide ? static_cast<int64_t>(static_cast<const uint64_t *>(p)[s])
                : static_cast<int64_t>(static_cast<const uint32_t *>(p)[s]);
  }
};

// The one scatter kernel. threadIdx.y/blockIdx.x pick a segment (a destination slice
// and its updates pos[start .. start + count), in index order), threadIdx.x/blockIdx.y
// an element of the slice. Each destination element is read once and written once.
template <typename T, typename Op>
__global__ void apply_kernel(T *__restrict__ dst, const T *__restrict__ upd, Keys seg_key,
                             const int *__restrict__ seg_start, const int *__restrict__ seg_count,
                             const int *__restrict__ pos, int64_t num_segments, int64_t slice) {
  using R = Reducer<T, Op>;
  const int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (s >= num_segments) return;
  const int begin = seg_start[s];
  const int end = begin + seg_count[s];
  T *d = dst + seg_key[s] * slice;
  const int64_t step = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < slice; j += step) {
    typename R::acc_t acc = R::load(d[j]);
#pragma unroll 4
    for (int q = begin; q < end; ++q) acc = R::update(acc, R::load(upd[static_cast<int64_t>(pos[q]) * slice + j]));
    d[j] = R::store(acc);
  }
}

// ----------------------------------------------------------------------- host helpers

// MSS_CUDA(what, call): on failure, set the error (code 4) naming the step and return.
#define MSS_CUDA(what, ...)                                                                      \
  do {                                                                                           \
    const cudaError_t mss_err_ = (__VA_ARGS__);                                                  \
    if (mss_err_ != cudaSuccess) return cuda_failure(p.op, what, mss_err_);                      \
  } while (0)

int cuda_failure(const char *op, const char *what, cudaError_t err) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  set_error(kDeviceError, "For '%s', CUDA error while %s: %s (%s).", op, what, cudaGetErrorString(err),
            cudaGetErrorName(err));
  return kDeviceError;
}

inline unsigned grid_for(int64_t work, int threads) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65536 * 8 ? (blocks > 0 ? blocks : 1) : 65536 * 8);  // grid-stride loops
}

inline size_t align_up(size_t v) { return (v + 255) & ~size_t(255); }

// Our own stream-ordered pool per device (not the device's default pool, whose settings
// belong to the process): it keeps up to kPoolKeepBytes across the synchronisation that
// every call makes, so that steady-state calls do not go to the driver for memory (a
// pool with the default release threshold of 0 hands everything back at each sync).
constexpr uint64_t kPoolKeepBytes = uint64_t(256) << 20;

cudaError_t pool_for(int dev, cudaMemPool_t *out) {
  static std::mutex mu;
  static cudaMemPool_t pools[64] = {};
  if (dev < 0 || dev >= 64) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> lock(mu);
  if (!pools[dev]) {
    cudaMemPoolProps props;
    std::memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool = nullptr;
    cudaError_t err = cudaMemPoolCreate(&pool, &props);
    if (err != cudaSuccess) return err;
    uint64_t keep = kPoolKeepBytes;
    err = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    if (err != cudaSuccess) {
      cudaMemPoolDestroy(pool);
      return err;
    }
    pools[dev] = pool;
  }
  *out = pools[dev];
  return cudaSuccess;
}

// One temporary block per call, stream-ordered (plain cudaMalloc/cudaFree where the
// device has no memory pools).
class Workspace {
 public:
  explicit Workspace(cudaStream_t stream) : stream_(stream) {}
  ~Workspace() { release(); }
  cudaError_t allocate(size_t bytes) {
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return err;
    int pools = 0;
    if (cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, dev) != cudaSuccess) pools = 0;
    async_ = pools != 0;
    if (async_) {
      cudaMemPool_t pool = nullptr;
      err = pool_for(dev, &pool);
      if (err == cudaSuccess) err = cudaMallocFromPoolAsync(&ptr_, bytes, pool, stream_);
    } else {
      err = cudaMalloc(&ptr_, bytes);
    }
    if (err != cudaSuccess) ptr_ = nullptr;
    return err;
  }
  char *get() const { return static_cast<char *>(ptr_); }
  void release() {
    if (!ptr_) return;
    if (async_) {
      cudaFreeAsync(ptr_, stream_);
    } else {
      cudaStreamSynchronize(stream_);
      cudaFree(ptr_);
    }
    ptr_ = nullptr;
  }

 private:
  cudaStream_t stream_;
  void *ptr_ = nullptr;
  bool async_ = true;
};

// In-place calls on one input_x serialise: host lock for the launch order, event for the
// device order across streams (a Parameter lives on one device; events per device).
constexpr int kStripes = 64;
constexpr int kMaxDevices = 64;
struct Stripe {
  std::mutex mu;
  cudaEvent_t done[kMaxDevices] = {};
};
Stripe &stripe_for(const void *p) {
  static Stripe stripes[kStripes];
  return stripes[(reinterpret_cast<uintptr_t>(p) >> 6) % kStripes];
}

// Temporaries of the grouping step, carved out of one Workspace block.
struct Groups {
  Status *status = nullptr;
  void *keys_in = nullptr, *keys_out = nullptr, *seg_keys = nullptr;
  int *pos_in = nullptr, *pos_out = nullptr, *seg_count = nullptr, *seg_start = nullptr;
  void *cub_temp = nullptr;
  size_t cub_bytes = 0;
};

template <typename K>
cudaError_t cub_temp_bytes(int n, int end_bit, size_t *bytes) {
  size_t sort = 0, rle = 0, scan = 0;
  cudaError_t err = cub::DeviceRadixSort::SortPairs(nullptr, sort, static_cast<const K *>(nullptr),
                                                    static_cast<K *>(nullptr), static_cast<const int *>(nullptr),
                                                    static_cast<int *>(nullptr), n, 0, end_bit);
  if (err != cudaSuccess) return err;
  err = cub::DeviceRunLengthEncode::Encode(nullptr, rle, static_cast<const K *>(nullptr), static_cast<K *>(nullptr),
                                           static_cast<int *>(nullptr), static_cast<int *>(nullptr), n);
  if (err != cudaSuccess) return err;
  err = cub::DeviceScan::ExclusiveSum(nullptr, scan, static_cast<const int *>(nullptr), static_cast<int *>(nullptr), n);
  if (err != cudaSuccess) return err;
  *bytes = sort > rle ? (sort > scan ? sort : scan) : (rle > scan ? rle : scan);
  return cudaSuccess;
}

// Steps 1-2 (minus the zero check): keys, positions, sort, run-length encoding.
template <typename I, typename K>
cudaError_t group(const I *idx, int n, const IndexShape &shape, int end_bit, Groups &g, cudaStream_t stream) {
  K *keys_in = static_cast<K *>(g.keys_in);
  K *keys_out = static_cast<K *>(g.keys_out);
  index_kernel<I, K><<<grid_for(n, 256), 256, 0, stream>>>(idx, n, shape, keys_in, g.pos_in, g.status);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  size_t bytes = g.cub_bytes;
  err = cub::DeviceRadixSort::SortPairs(g.cub_temp, bytes, keys_in, keys_out, g.pos_in, g.pos_out, n, 0, end_bit,
                                        stream);
  if (err != cudaSuccess) return err;
  bytes = g.cub_bytes;
  return cub::DeviceRunLengthEncode::Encode(g.cub_temp, bytes, keys_out, static_cast<K *>(g.seg_keys), g.seg_count,
                                            &g.status->num_segments, n, stream);
}

template <typename I>
cudaError_t read_index(const I *idx, unsigned long long at, cudaStream_t stream, long long *value) {
  I v{};
  cudaError_t err = cudaMemcpyAsync(&v, idx + at, sizeof(I), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  *value = static_cast<long long>(v);
  return err;
}

template <typename T, typename I, typename Op>
int run(const Plan &p, OutputMode om, void **params, cudaStream_t stream) {
  T *x = static_cast<T *>(params[0]);
  const I *idx = static_cast<const I *>(params[1]);
  const T *upd = static_cast<const T *>(params[2]);
  const size_t x_bytes = static_cast<size_t>(p.x_numel) * sizeof(T);
  if (p.n > INT_MAX) {
    set_error(kBadArguments, "For '%s', the GPU kernel takes at most %d index vectors, but got %lld.", p.op, INT_MAX,
              static_cast<long long>(p.n));
    return kBadArguments;
  }
  const int n = static_cast<int>(p.n);

  Workspace ws(stream);
  Groups g;
  int64_t num_segments = 0;
  bool wide = false;
  if (n > 0) {
    // Destination slice numbers: 0 .. prod(x.shape[:depth]) - 1.
    IndexShape shape{};
    shape.depth = p.depth;
    uint64_t destinations = 1;
    for (int64_t d = p.depth - 1; d >= 0; --d) {
      shape.dims[d] = p.x_shape[d];
      shape.weight[d] = static_cast<int64_t>(destinations);
      destinations *= static_cast<uint64_t>(p.x_shape[d] > 0 ? p.x_shape[d] : 1);
    }
    shape.row_begin = p.sharded ? p.row_begin : 0;
    shape.rows = p.depth > 0 ? p.x_shape[0] : 0;
    if (p.sharded) shape.dims[0] = p.global_rows;
    shape.skip_key = static_cast<int64_t>(destinations);
    shape.drop_negative = p.drop_negative ? 1 : 0;
    // keys up to destinations - 1, or the skip key for a row shard or dropped segment ids
    const uint64_t max_key = (p.sharded || p.drop_negative) ? destinations : destinations - 1;
    int end_bit = 1;
    while (end_bit < 64 && (max_key >> end_bit) != 0) ++end_bit;
    wide = end_bit > 32;
    const size_t key_bytes = wide ? 8 : 4;
    MSS_CUDA("sizing the sort", wide ? cub_temp_bytes<uint64_t>(n, end_bit, &g.cub_bytes) : cub_temp_bytes<uint32_t>(n, end_bit, &g.cub_bytes));
    const size_t nk = align_up(static_cast<size_t>(n) * key_bytes), ni = align_up(static_cast<size_t>(n) * sizeof(int));
    // updates that share input_x's memory are read as they were when the call started
    const size_t upd_bytes = static_cast<size_t>(p.n * p.slice) * sizeof(T);
    const bool alias = om != OutputMode::kTensor && overlaps(x, x_bytes, upd, upd_bytes);
    const size_t total = align_up(sizeof(Status)) + 3 * nk + 4 * ni + align_up(g.cub_bytes) +
                         (alias ? align_up(upd_bytes) : 0);
    MSS_CUDA("allocating temporary memory", ws.allocate(total));
    char *base = ws.get();
    if (alias) {
      T *copy = reinterpret_cast<T *>(base + total - align_up(upd_bytes));
      MSS_CUDA("copying aliased updates", cudaMemcpyAsync(copy, upd, upd_bytes, cudaMemcpyDeviceToDevice, stream));
      upd = copy;
    }
    g.status = reinterpret_cast<Status *>(base);
    base += align_up(sizeof(Status));
    g.keys_in = base;
    g.keys_out = base + nk;
    g.seg_keys = base + 2 * nk;
    base += 3 * nk;
    g.pos_in = reinterpret_cast<int *>(base);
    g.pos_out = reinterpret_cast<int *>(base + ni);
    g.seg_count = reinterpret_cast<int *>(base + 2 * ni);
    g.seg_start = reinterpret_cast<int *>(base + 3 * ni);
    g.cub_temp = base + 4 * ni;

    MSS_CUDA("clearing the status", cudaMemsetAsync(g.status, 0xff, sizeof(Status), stream));
    if constexpr (RejectsZero<Op>::value && std::is_integral<T>::value) {
      const int64_t total_upd = p.n * p.slice;
      if (total_upd > 0) {
        nonzero_kernel<T><<<grid_for(total_upd, 256), 256, 0, stream>>>(upd, total_upd, g.status);
        MSS_CUDA("checking updates for zeros", cudaGetLastError());
      }
    }
    MSS_CUDA("validating and sorting the indices", (wide ? group<I, uint64_t>(idx, n, shape, end_bit, g, stream)
                   : group<I, uint32_t>(idx, n, shape, end_bit, g, stream)));
    Status st;
    MSS_CUDA("reading the status", cudaMemcpyAsync(&st, g.status, sizeof(Status), cudaMemcpyDeviceToHost, stream));
    MSS_CUDA("validating the indices", cudaStreamSynchronize(stream));
    if (st.bad_index != kNone) {
      long long v = 0;
      MSS_CUDA("reading an index", read_index<I>(idx, st.bad_index, stream, &v));
      return index_error(p, static_cast<int64_t>(st.bad_index), v);
    }
    if (st.zero != kNone) return zero_error(p, static_cast<int64_t>(st.zero));
    num_segments = st.num_segments;
    if (st.skipped == 1) --num_segments;  // the skipped vectors' segment, sorted last, is not applied
    if (num_segments > 0 && p.slice > 0) {
      size_t bytes = g.cub_bytes;
      MSS_CUDA("scanning the segments", cub::DeviceScan::ExclusiveSum(g.cub_temp, bytes, g.seg_count, g.seg_start,
                                             static_cast<int>(num_segments), stream));
    }
  }

  // Validation passed: from here on we write.
  T *dst = x;
  if (om == OutputMode::kTensor) {
    dst = static_cast<T *>(params[p.out_arg]);
    if (x_bytes) MSS_CUDA("copying input_x", cudaMemcpyAsync(dst, x, x_bytes, cudaMemcpyDeviceToDevice, stream));
  }
  {
    Stripe &stripe = stripe_for(x);
    std::unique_lock<std::mutex> lock(stripe.mu, std::defer_lock);
    cudaEvent_t *done = nullptr;
    if (om != OutputMode::kTensor) {
      lock.lock();
      int dev = 0;
      MSS_CUDA("getting the device", cudaGetDevice(&dev));
      if (dev >= 0 && dev < kMaxDevices) {
        done = &stripe.done[dev];
        if (*done) MSS_CUDA("ordering after the previous call", cudaStreamWaitEvent(stream, *done, 0));
      }
    }
    if (num_segments > 0 && p.slice > 0) {
      // Block: x over slice elements (a power of two up to 256), y over segments.
      int bx = 1;
      while (bx < 256 && bx < p.slice) bx <<= 1;
      const int by = 256 / bx;
      const int64_t gx = (num_segments + by - 1) / by;
      const int64_t gy_need = (p.slice + bx - 1) / bx;
      const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy_need < 65535 ? gy_need : 65535));
      apply_kernel<T, Op><<<grid, dim3(bx, by), 0, stream>>>(dst, upd, Keys{g.seg_keys, wide}, g.seg_start,
                                                             g.seg_count, g.pos_out, num_segments, p.slice);
      MSS_CUDA("launching the scatter", cudaGetLastError());
    }
    if (om == OutputMode::kReturn && x_bytes)
      MSS_CUDA("copying the result", cudaMemcpyAsync(params[p.out_arg], x, x_bytes, cudaMemcpyDeviceToDevice, stream));
    if (done) {
      if (!*done) MSS_CUDA("creating an event", cudaEventCreateWithFlags(done, cudaEventDisableTiming));
      MSS_CUDA("recording an event", cudaEventRecord(*done, stream));
    }
  }
  if (om == OutputMode::kToken)
    MSS_CUDA("writing the token", cudaMemsetAsync(params[p.out_arg], 0, sizeof(int32_t), stream));
  ws.release();
  return kOk;
}

template <typename Op>
int dispatch(const char *op, IndexMode im, OutputMode om, bool sharded, int nparam, void **params, int *ndims,
             int64_t **shapes, const char **dtypes, void *stream_ptr) {
  Plan p;
  int rc = make_plan(op, im, sharded, nparam, ndims, shapes, &p);
  if (rc != kOk) return rc;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (sharded) {
    // (row_begin, global_rows) live in device memory: one more host round trip per call
    rc = check_shard_dtype(p, dtypes);
    if (rc != kOk) return rc;
    int64_t info[2] = {0, 0};
    MSS_CUDA("reading the shard", cudaMemcpyAsync(info, params[3], sizeof info, cudaMemcpyDeviceToHost, stream));
    MSS_CUDA("reading the shard", cudaStreamSynchronize(stream));
    rc = set_shard(&p, info);
    if (rc != kOk) return rc;
  }
  // Update also copies bool and the complex types (MS_SCATTER_COPY_DTYPES)
  constexpr bool copies = std::is_same<Op, OpUpdate>::value;
  return dispatch_dtypes<copies>(p, om, ndims, shapes, dtypes, [&](auto value, auto index) {
    return run<typename decltype(value)::type, typename decltype(index)::type, Op>(p, om, params, stream);
  });
}

#undef MSS_CUDA

}  // namespace
}  // namespace ms_scatter

#include "ms_scatter/entries.h"

