// ms-scatter: the error channel of a kernel library. An aot kernel can only return an
// integer code to MindSpore; the message is kept here (ms_scatter_last_error) for the
// Python side to raise, and printed to stderr for GRAPH mode, where MindSpore raises
// its own generic RuntimeError.
#ifndef MS_SCATTER_ERROR_H_
#define MS_SCATTER_ERROR_H_

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ms_scatter {

struct ErrorState {
  std::mutex mu;
  int code = 0;
  unsigned long long count = 0;  // errors raised so far: lets a caller tell a new error from an old one
  char message[1024] = {0};
};

inline ErrorState &error_state() {
  static ErrorState state;
  return state;
}

// While a caller that raises the message itself runs a kernel on this thread (a Python
// direct call), the message is kept but not printed: it would otherwise show twice.
inline bool &caller_raises() {
  static thread_local bool raises = false;
  return raises;
}
struct CallerRaises {
  explicit CallerRaises(bool raises) : previous(caller_raises()) { caller_raises() = raises; }
  ~CallerRaises() { caller_raises() = previous; }
  bool previous;
};

inline void set_error(int code, const char *fmt, ...) {
  ErrorState &s = error_state();
  std::lock_guard<std::mutex> lock(s.mu);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(s.message, sizeof s.message, fmt, ap);
  va_end(ap);
  s.code = code;
  ++s.count;
  const char *quiet = std::getenv("MS_SCATTER_QUIET");
  if (!(quiet && quiet[0] == '1') && !caller_raises()) {
    std::fprintf(stderr, "[ms_scatter] error %d: %s\n", code, s.message);
  }
}

// C API shared by every backend library: copy the last message, return its code.
inline int copy_last_error(char *buf, int len, unsigned long long *count) {
  ErrorState &s = error_state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (buf && len > 0) {
    std::strncpy(buf, s.message, static_cast<size_t>(len) - 1);
    buf[len - 1] = '\0';
  }
  if (count) *count = s.count;
  return s.code;
}

}  // namespace ms_scatter

#endif  // MS_SCATTER_ERROR_H_
