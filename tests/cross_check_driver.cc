// A self-contained check of a CPU kernel library built for another architecture (run under
// an emulator, tests/test_cross_arch.py): each engine path of the token entries against a
// naive loop over reducer.h's own scalar rules (float16/bfloat16 accumulated in float and
// rounded once per slice), bit for bit (NaN against NaN).
//
//   cross_check_driver LIBRARY        prints "ok <cases>" or the first difference, exit 0/1
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/reducer.h"

using namespace ms_scatter;
typedef int (*Entry)(int, void **, int *, int64_t **, const char **, void *, void *);

namespace {

template <typename T> struct Name;
template <> struct Name<half_t> { static constexpr const char *s = "float16"; };
template <> struct Name<bf16_t> { static constexpr const char *s = "bfloat16"; };
template <> struct Name<float> { static constexpr const char *s = "float32"; };

template <typename T> T from_double(double v) { return from_acc<T>(static_cast<typename AccOf<T>::type>(v)); }
template <typename T> bool is_nan_value(T v) { auto a = to_acc<T>(v); return a != a; }
template <typename T> bool same(T a, T b) {
  if (is_nan_value(a) || is_nan_value(b)) return is_nan_value(a) && is_nan_value(b);
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Values with NaN, +-0, +-inf and subnormals among normal ones.
template <typename T> T value(std::mt19937_64 &rng, bool finite) {
  std::normal_distribution<double> normal(0.0, 4.0);
  const int pick = static_cast<int>(rng() % 40);
  double v = normal(rng);
  if (!finite) {
    if (pick == 0) v = NAN;
    if (pick == 3) v = INFINITY;
    if (pick == 4) v = -INFINITY;
  }
  if (pick == 1) v = 0.0;
  if (pick == 2) v = -0.0;
  if (pick == 5) v = sizeof(T) == 2 ? 3e-6 : 5e-39;
  return from_double<T>(v);
}

template <typename T, typename Op>
bool check(void *lib, const char *op, int64_t rows, int64_t slice, int64_t n, int pattern, uint64_t seed) {
  using A = typename AccOf<T>::type;
  std::mt19937_64 rng(seed);
  const bool finite = std::strcmp(op, "Mul") == 0;
  std::vector<T> x(static_cast<size_t>(rows * slice)), upd(static_cast<size_t>(n * slice));
  for (auto &v : x) v = value<T>(rng, false);
  for (auto &v : upd) v = value<T>(rng, finite);
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::vector<int32_t> few = {1, static_cast<int32_t>(rows / 2), static_cast<int32_t>(rows - 1)};
  for (auto &i : idx) i = pattern == 2 ? few[rng() % 3] : static_cast<int32_t>(rng() % rows);
  if (pattern == 1) std::sort(idx.begin(), idx.end());
  // the naive loop: each touched slice widened, its updates in index order, rounded once
  std::vector<A> work(x.size());
  std::vector<char> touched(static_cast<size_t>(rows), 0);
  for (size_t e = 0; e < x.size(); ++e) work[e] = to_acc<T>(x[e]);
  for (int64_t k = 0; k < n; ++k) {
    touched[idx[k]] = 1;
    for (int64_t j = 0; j < slice; ++j) {
      A &a = work[idx[k] * slice + j];
      a = Reducer<T, Op>::update(a, to_acc<T>(upd[k * slice + j]));
    }
  }
  std::vector<T> want(x);
  for (int64_t r = 0; r < rows; ++r)
    if (touched[r])
      for (int64_t j = 0; j < slice; ++j) want[r * slice + j] = from_acc<T>(work[r * slice + j]);
  const std::string entry = std::string("Scatter") + op + "_token";
  Entry fn = reinterpret_cast<Entry>(dlsym(lib, entry.c_str()));
  if (!fn) { std::printf("no entry %s\n", entry.c_str()); return false; }
  int32_t token = 0;
  int64_t sx[2] = {rows, slice}, si[1] = {n}, su[2] = {n, slice}, st[1] = {1};
  void *params[4] = {x.data(), idx.data(), upd.data(), &token};
  int ndims[4] = {2, 1, 2, 1};
  int64_t *shapes[4] = {sx, si, su, st};
  const char *dtypes[4] = {Name<T>::s, "int32", Name<T>::s, "int32"};
  const int rc = fn(4, params, ndims, shapes, dtypes, nullptr, nullptr);
  if (rc != 0) { std::printf("%s %s: code %d\n", entry.c_str(), Name<T>::s, rc); return false; }
  for (size_t e = 0; e < x.size(); ++e) {
    if (!same(x[e], want[e])) {
      std::printf("%s %s %lldx%lld n=%lld pattern %d: element %zu differs\n", entry.c_str(), Name<T>::s,
                  static_cast<long long>(rows), static_cast<long long>(slice), static_cast<long long>(n), pattern, e);
      return false;
    }
  }
  return true;
}

template <typename T>
bool check_dtype(void *lib, int *cases) {
  const int64_t slices[] = {1, 7, 16, 33, 64};
  uint64_t seed = 1;
  for (int pattern = 0; pattern < 3; ++pattern) {
    for (int64_t s : slices) {
      ++seed;
      bool ok = check<T, OpAdd>(lib, "Add", 300, s, 500, pattern, seed) &&
                check<T, OpMax>(lib, "Max", 300, s, 500, pattern, seed) &&
                check<T, OpMin>(lib, "Min", 300, s, 500, pattern, seed) &&
                check<T, OpMul>(lib, "Mul", 300, s, 500, pattern, seed) &&
                check<T, OpUpdate>(lib, "Update", 300, s, 500, pattern, seed);
      if (!ok) return false;
      *cases += 5;
    }
  }
  // beyond the small-span path: a dense span over 16 MiB of floats (the blocked path)
  if (!check<T, OpAdd>(lib, "Add", 66000, 64, 17000, 0, 99)) return false;
  ++*cases;
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) { std::printf("usage: cross_check_driver LIBRARY\n"); return 2; }
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) { std::printf("%s\n", dlerror()); return 2; }
  int cases = 0;
  if (!check_dtype<half_t>(lib, &cases) || !check_dtype<bf16_t>(lib, &cases) || !check_dtype<float>(lib, &cases))
    return 1;
  std::printf("ok %d\n", cases);
  return 0;
}
