// ms-scatter CPU: a persistent worker pool. Workers spin briefly after a job (waking a
// sleeping thread costs ~0.2 ms here) and then sleep on a condition variable. A call
// that finds the pool busy (another kernel running concurrently) runs on its own thread.
#ifndef MS_SCATTER_CPU_THREAD_POOL_H_
#define MS_SCATTER_CPU_THREAD_POOL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ms_scatter {

class ThreadPool {
 public:
  static ThreadPool &instance() {
    static ThreadPool pool;
    return pool;
  }

  // The setting: 0 = automatic (the engine decides per call), n >= 1 = at most n threads.
  int setting() const { return threads_.load(std::memory_order_relaxed); }
  void set_num_threads(int n) { threads_.store(n < 0 ? 0 : n, std::memory_order_relaxed); }
  static int cores() {
    static const int n = default_threads();  // hardware_concurrency() reads /sys: ~6 us
    return n;
  }

  // Threads the automatic setting gives a call that wants every core: one fewer while
  // the caller says a thread of its own spins waiting for the kernel (MindSpore's
  // PYNATIVE Python thread does: measured on 2 cores, a 2-thread kernel then ran up to
  // 1.3x slower than a 1-thread one, while in GRAPH mode it ran 1.15-1.35x faster).
  static int all_cores() {
    const int n = cores() - (caller_waits().load(std::memory_order_relaxed) ? 1 : 0);
    return n > 1 ? n : 1;
  }
  static std::atomic<int> &caller_waits() {
    static std::atomic<int> flag{0};
    return flag;
  }

  // Run f(t) for t in [0, n) on n threads (the caller is thread 0). Returns false (and
  // runs nothing) if the pool is busy; the caller then runs serially.
  bool run(int n, const std::function<void(int)> &f) {
    if (n <= 1) {
      f(0);
      return true;
    }
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    ensure_workers(n - 1);
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &f;
      active_ = n - 1;
      remaining_.store(n - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    f(0);
    while (remaining_.load(std::memory_order_acquire) != 0) {
      std::this_thread::yield();
    }
    return true;
  }

 private:
  ThreadPool() { set_num_threads(env_threads()); }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    for (auto &w : workers_) w.detach();  // process exit: do not join inside static destruction
  }

  static int default_threads() {
    const unsigned hc = std::thread::hardware_concurrency();
    return hc ? static_cast<int>(hc) : 1;
  }
  static int env_threads() {
    const char *s = std::getenv("MS_SCATTER_NUM_THREADS");
    return s ? std::atoi(s) : 0;
  }

  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      const int id = static_cast<int>(workers_.size()) + 1;
      const uint64_t seen = generation_.load(std::memory_order_acquire);  // before the job is posted
      workers_.emplace_back([this, id, seen] { loop(id, seen); });
    }
  }

  void loop(int id, uint64_t seen) {
    for (;;) {
      // Spin for a while before sleeping: back-to-back kernels find the worker awake.
      const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (generation_.load(std::memory_order_acquire) == seen &&
             std::chrono::steady_clock::now() < spin_until) {
        std::this_thread::yield();
      }
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      seen = generation_.load(std::memory_order_acquire);
      if (stop_) return;
      const std::function<void(int)> *job = job_;
      const bool mine = id <= active_;
      lock.unlock();
      if (mine) {
        (*job)(id);
        remaining_.fetch_sub(1, std::memory_order_acq_rel);
      }
    }
  }

  std::atomic<int> threads_{0};
  std::mutex busy_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> workers_;
  const std::function<void(int)> *job_ = nullptr;
  int active_ = 0;
  bool stop_ = false;
  std::atomic<int> remaining_{0};
  std::atomic<uint64_t> generation_{0};
};

}  // namespace ms_scatter

#endif  // MS_SCATTER_CPU_THREAD_POOL_H_
