// ms-scatter: a native caller of a CPU kernel library's aot entry points, for a library that
// this machine's Python cannot load (the aarch64 build, run under qemu-aarch64 by
// tests/test_aarch64.py). It dlopens the library, runs every call of a case file exactly as
// MindSpore calls an entry (nparam, params, ndims, shapes, dtypes), and writes each call's
// return code, its arrays after the call and the library's error message. The cases and
// their checks are tests/_sanitize_driver.py's, made and compared in Python.
//
//   kernel_driver LIBRARY CASES RESULTS
//
// CASES:   "MSSCASE1", u32 count, then per call: str entry, i32 threads (<0: leave as is),
//          u32 nparam, per array: str dtype, i32 ndim, i64 shape[ndim], u64 nbytes, bytes
// RESULTS: "MSSRES1\0", u32 count, then per call: i32 rc, str message, u8 1 when the arrays
//          between the first and the last (indices, updates) are unchanged, u64 nbytes and the
//          bytes of the first array (input_x after the call) and of the last (the output);
//          at the end i32 OS threads of the process (/proc/self/task)
// (str: u32 length, bytes; little-endian, as both sides of the test are.)
#include <dirent.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using Entry = int (*)(int, void **, int *, int64_t **, const char **, void *, void *);

struct Reader {
  FILE *f;
  bool ok = true;
  void raw(void *p, size_t n) {
    if (n && std::fread(p, 1, n, f) != n) ok = false;
  }
  template <typename T>
  T get() {
    T v{};
    raw(&v, sizeof v);
    return v;
  }
  std::string str() {
    const uint32_t n = get<uint32_t>();
    std::string s(ok ? n : 0, '\0');
    raw(s.data(), s.size());
    return s;
  }
};

struct Writer {
  FILE *f;
  void raw(const void *p, size_t n) {
    if (n) std::fwrite(p, 1, n, f);
  }
  template <typename T>
  void put(T v) {
    raw(&v, sizeof v);
  }
  void str(const std::string &s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
};

int os_threads() {
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

// 64-byte aligned, as MindSpore's and the benchmark's buffers may be (never less than 1 byte).
struct Buffer {
  explicit Buffer(uint64_t n) : bytes(n), p(std::aligned_alloc(64, (n + 64) & ~uint64_t(63))) {}
  Buffer(const Buffer &) = delete;
  Buffer(Buffer &&o) noexcept : bytes(o.bytes), p(o.p) { o.p = nullptr; }
  ~Buffer() { std::free(p); }
  uint64_t bytes;
  void *p;
};

}  // namespace

int main(int argc, char **argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s LIBRARY CASES RESULTS\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "kernel_driver: %s\n", dlerror());
    return 2;
  }
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(lib, "ms_scatter_set_num_threads"));
  auto last_error = reinterpret_cast<int (*)(char *, int, unsigned long long *)>(dlsym(lib, "ms_scatter_last_error"));
  FILE *in = std::fopen(argv[2], "rb");
  FILE *out = std::fopen(argv[3], "wb");
  if (!in || !out || !set_threads || !last_error) {
    std::fprintf(stderr, "kernel_driver: cannot open the files or find the library's ms_scatter_* functions\n");
    return 2;
  }
  Reader r{in};
  Writer w{out};
  char magic[8];
  r.raw(magic, sizeof magic);
  if (!r.ok || std::memcmp(magic, "MSSCASE1", 8) != 0) {
    std::fprintf(stderr, "kernel_driver: %s is not a case file\n", argv[2]);
    return 2;
  }
  const uint32_t count = r.get<uint32_t>();
  w.raw("MSSRES1", 8);
  w.put<uint32_t>(count);
  std::map<std::string, Entry> entries;
  for (uint32_t c = 0; c < count && r.ok; ++c) {
    const std::string name = r.str();
    const int32_t threads = r.get<int32_t>();
    const uint32_t nparam = r.get<uint32_t>();
    std::vector<std::string> dtypes(nparam);
    std::vector<int> ndims(nparam);
    std::vector<std::vector<int64_t>> shapes(nparam);
    std::vector<Buffer> buffers;
    buffers.reserve(nparam);
    for (uint32_t a = 0; a < nparam && r.ok; ++a) {
      dtypes[a] = r.str();
      ndims[a] = r.get<int32_t>();
      if (ndims[a] < 0 || ndims[a] > 64) r.ok = false;
      shapes[a].assign(static_cast<size_t>(ndims[a] > 0 ? ndims[a] : 1), 1);  // a 0-d array: a valid pointer
      if (ndims[a] > 0) r.raw(shapes[a].data(), shapes[a].size() * sizeof(int64_t));
      buffers.emplace_back(r.get<uint64_t>());
      r.raw(buffers.back().p, buffers.back().bytes);
    }
    if (!r.ok) break;
    auto it = entries.find(name);
    if (it == entries.end()) it = entries.emplace(name, reinterpret_cast<Entry>(dlsym(lib, name.c_str()))).first;
    std::vector<void *> params(nparam);
    std::vector<int64_t *> shape_ptrs(nparam);
    std::vector<const char *> dtype_ptrs(nparam);
    for (uint32_t a = 0; a < nparam; ++a) {
      params[a] = buffers[a].p;
      shape_ptrs[a] = shapes[a].data();
      dtype_ptrs[a] = dtypes[a].c_str();
    }
    std::vector<std::vector<char>> inputs;  // indices, updates (and a shard's info) as given
    for (uint32_t a = 1; a + 1 < nparam; ++a) {
      const char *b = static_cast<const char *>(buffers[a].p);
      inputs.emplace_back(b, b + buffers[a].bytes);
    }
    int rc = -1;
    std::string message;
    if (!it->second) {
      message = "kernel_driver: no entry " + name;
    } else {
      if (threads >= 0) set_threads(threads);
      rc = it->second(static_cast<int>(nparam), params.data(), ndims.data(), shape_ptrs.data(), dtype_ptrs.data(),
                      nullptr, nullptr);
      if (rc != 0) {
        char buf[1024] = {0};
        last_error(buf, sizeof buf, nullptr);
        message = buf;
      }
    }
    uint8_t unchanged = 1;
    for (uint32_t a = 1; a + 1 < nparam; ++a)
      if (buffers[a].bytes && std::memcmp(buffers[a].p, inputs[a - 1].data(), buffers[a].bytes) != 0) unchanged = 0;
    w.put<int32_t>(rc);
    w.str(message);
    w.put<uint8_t>(unchanged);
    for (uint32_t a : {0u, nparam - 1}) {
      w.put<uint64_t>(nparam ? buffers[a].bytes : 0);
      if (nparam) w.raw(buffers[a].p, buffers[a].bytes);
    }
  }
  w.put<int32_t>(os_threads());
  std::fclose(in);
  std::fclose(out);
  return r.ok ? 0 : 2;
}
