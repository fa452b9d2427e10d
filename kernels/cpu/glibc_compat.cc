// ms-scatter: the CPU library links libstdc++ statically (-static-libstdc++: MindSpore gets
// the std::vector of <entry>InferShape in libstdc++'s ABI, and no GLIBCXX version is
// required of the system), so the glibc symbols that libstdc++.a and our code use must be
// ones an older glibc has too: a wheel is manylinux_2_28 when no symbol needs a version
// above GLIBC_2.28. Built with GCC 12 against glibc 2.36, these were the ones above it
// (objdump -T, each traced to its archive member with ld -y):
//   pthread_create/join/detach/once, pthread_key_create/delete, pthread_get/setspecific,
//   pthread_mutex_trylock, __pthread_key_create  GLIBC_2.34 (libpthread merged into libc)
//   __libc_single_threaded                        GLIBC_2.32 (libstdc++'s atomics shortcut)
//   arc4random                                    GLIBC_2.36 (std::random_device, never used)
// build_cpu.py links with -Wl,--wrap=<symbol> for each (GLIBC_WRAPPED there), so that the
// references resolve to the __wrap_ definitions below, which call the same functions at
// the architecture's first glibc version (glibc keeps those as compatibility symbols), or
// stand in for them. _dl_find_object (GLIBC_2.35, called by the static unwinder of
// libgcc_eh with no fallback) is avoided by linking libgcc_s dynamically.
#if defined(MS_SCATTER_GLIBC_COMPAT)

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/random.h>

#if !defined(__GLIBC__)
#error "MS_SCATTER_GLIBC_COMPAT is for glibc targets (build_cpu.py sets it for *-linux-gnu)"
#endif

#if defined(__x86_64__)
#define MSS_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define MSS_GLIBC_BASE "GLIBC_2.17"
#else
#error "glibc_compat.cc: no base glibc version known for this architecture"
#endif

#define MSS_HIDDEN extern "C" __attribute__((visibility("hidden")))
// __wrap_NAME calls NAME@<base version> (declared as mss_base_NAME and bound by .symver).
#define MSS_AT_BASE(RET, NAME, PARAMS, ARGS)                          \
  extern "C" RET mss_base_##NAME PARAMS;                              \
  __asm__(".symver mss_base_" #NAME "," #NAME "@" MSS_GLIBC_BASE);   \
  MSS_HIDDEN RET __wrap_##NAME PARAMS { return mss_base_##NAME ARGS; }

MSS_AT_BASE(int, pthread_create, (pthread_t * t, const pthread_attr_t *a, void *(*f)(void *), void *p), (t, a, f, p))
MSS_AT_BASE(int, pthread_join, (pthread_t t, void **r), (t, r))
MSS_AT_BASE(int, pthread_detach, (pthread_t t), (t))
MSS_AT_BASE(int, pthread_once, (pthread_once_t * o, void (*f)(void)), (o, f))
MSS_AT_BASE(int, pthread_key_create, (pthread_key_t * k, void (*d)(void *)), (k, d))
MSS_AT_BASE(int, __pthread_key_create, (pthread_key_t * k, void (*d)(void *)), (k, d))
MSS_AT_BASE(int, pthread_key_delete, (pthread_key_t k), (k))
MSS_AT_BASE(void *, pthread_getspecific, (pthread_key_t k), (k))
MSS_AT_BASE(int, pthread_setspecific, (pthread_key_t k, const void *v), (k, v))
MSS_AT_BASE(int, pthread_mutex_trylock, (pthread_mutex_t * m), (m))

// 0: "other threads may exist", so libstdc++ always takes its atomic paths (always correct).
MSS_HIDDEN char __wrap___libc_single_threaded;
char __wrap___libc_single_threaded = 0;

// std::random_device's "arc4random" source (getrandom is GLIBC_2.25).
MSS_HIDDEN uint32_t __wrap_arc4random(void) {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) < 0 && errno == EINTR) {
  }
  return v;
}

#endif
