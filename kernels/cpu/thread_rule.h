// ms-scatter CPU: the automatic thread count, learnt from the calls themselves.
//
// A fixed rule tuned on one machine loses on another (on a 2-core VM two threads ran
// 1.0-1.4x slower than one on random row updates and 1.2-2x faster on sorted ones), so for
// each kind of work (path, element size, size class of the work and of the span it
// touches, cores available) the first calls of that kind try 1, 2, 4, ..., all cores in
// turn and time themselves: one untimed warm-up call per count, then kRounds timed calls
// per count. From then on the smallest count within kMargin of the fastest (time per unit
// of work, best of its samples) is used. Results never depend on the count: every
// destination row has one owner that takes its updates in index order; only speed does.
// MS_SCATTER_THREAD_RULE=fixed keeps the fixed rule (the default before the calls decide).
#ifndef MS_SCATTER_CPU_THREAD_RULE_H_
#define MS_SCATTER_CPU_THREAD_RULE_H_

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace ms_scatter {

enum class WorkKind : int { kDirect = 0, kDirectSorted = 1, kGrouped = 2, kGroupedSorted = 3, kCopy = 4 };

inline int log2_floor(uint64_t v) {
  int r = 0;
  while (v >>= 1) ++r;
  return r;
}

class ThreadRule {
 public:
  static constexpr int kMaxCandidates = 12;  // 1, 2, 4, ..., 1024, and the core count
  static constexpr int kRounds = 3;          // timed calls per candidate
  static constexpr double kMargin = 1.03;    // a larger count must win by more than this
  static constexpr size_t kMaxEntries = 4096;
  static constexpr int kRowInts = 8;  // one row of snapshot()

  // What a call runs with: `threads`, and the candidate slot to report its time under
  // (-1: not timed).
  struct Pick {
    int threads = 1;
    int slot = -1;
    uint64_t key = 0;
  };

  static ThreadRule &instance() {
    static ThreadRule rule;
    return rule;
  }
  bool learns() const { return learn_; }

  static uint64_t make_key(WorkKind kind, size_t elem_size, uint64_t units, uint64_t span_bytes, int avail) {
    return static_cast<uint64_t>(kind) | static_cast<uint64_t>(log2_floor(elem_size) & 7) << 3 |
           static_cast<uint64_t>(log2_floor(units) & 63) << 6 | static_cast<uint64_t>(log2_floor(span_bytes) & 63) << 12 |
           static_cast<uint64_t>(avail & 0xffff) << 18;
  }

  // The count for a call of `key` on at most `avail` threads; `fixed` where the rule does not learn.
  Pick pick(uint64_t key, int avail, int fixed) {
    Pick pk;
    pk.key = key;
    pk.threads = fixed;
    if (!learn_ || avail <= 1) return pk;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(key);
    if (it == table_.end()) {
      if (table_.size() >= kMaxEntries) return pk;
      it = table_.emplace(key, Entry(avail)).first;
    }
    Entry &e = it->second;
    if (e.chosen) {
      pk.threads = e.chosen;
      return pk;
    }
    for (int i = 0; i < e.ncand; ++i)
      if (!e.warmed[i]) {
        e.warmed[i] = true;
        pk.threads = e.cand[i];
        return pk;
      }
    int slot = 0;
    for (int i = 1; i < e.ncand; ++i)
      if (e.samples[i] < e.samples[slot]) slot = i;
    pk.threads = e.cand[slot];
    pk.slot = slot;
    return pk;
  }

  // A timed call of `pk` ran on pk.threads threads and took `seconds` for `units` of work.
  void report(const Pick &pk, double seconds, uint64_t units) {
    if (pk.slot < 0 || units == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = table_.find(pk.key);
    if (it == table_.end() || it->second.chosen) return;
    Entry &e = it->second;
    const double t = seconds / static_cast<double>(units);
    if (e.samples[pk.slot] == 0 || t < e.best[pk.slot]) e.best[pk.slot] = t;
    ++e.samples[pk.slot];
    for (int i = 0; i < e.ncand; ++i)
      if (e.samples[i] < kRounds) return;
    double best = e.best[0];
    for (int i = 1; i < e.ncand; ++i)
      if (e.best[i] < best) best = e.best[i];
    for (int i = 0; i < e.ncand; ++i)
      if (e.best[i] <= best * kMargin) {
        e.chosen = e.cand[i];
        break;
      }
  }

  // Rows of kRowInts: kind, element size, log2 units, log2 span bytes, cores available,
  // chosen count (0: still trying), timed samples, ns per 1024 units of the chosen count.
  int snapshot(int64_t *out, int cap) {
    std::lock_guard<std::mutex> lock(mu_);
    int rows = 0;
    for (const auto &kv : table_) {
      if (rows < cap && out) {
        const uint64_t k = kv.first;
        const Entry &e = kv.second;
        int64_t *r = out + static_cast<size_t>(rows) * kRowInts;
        int total = 0, at = 0;
        for (int i = 0; i < e.ncand; ++i) {
          total += e.samples[i];
          if (e.cand[i] == e.chosen) at = i;
        }
        r[0] = static_cast<int64_t>(k & 7);
        r[1] = int64_t(1) << ((k >> 3) & 7);
        r[2] = static_cast<int64_t>((k >> 6) & 63);
        r[3] = static_cast<int64_t>((k >> 12) & 63);
        r[4] = static_cast<int64_t>((k >> 18) & 0xffff);
        r[5] = e.chosen;
        r[6] = total;
        r[7] = e.chosen ? static_cast<int64_t>(e.best[at] * 1024e9) : 0;
      }
      ++rows;
    }
    return rows;
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    table_.clear();
  }

 private:
  struct Entry {
    explicit Entry(int avail) {
      for (int c = 1; c < avail && ncand < kMaxCandidates - 1; c *= 2) cand[ncand++] = c;
      cand[ncand++] = avail;
    }
    int cand[kMaxCandidates] = {};
    bool warmed[kMaxCandidates] = {};
    int samples[kMaxCandidates] = {};
    double best[kMaxCandidates] = {};
    int ncand = 0;
    int chosen = 0;
  };

  ThreadRule() {
    const char *s = std::getenv("MS_SCATTER_THREAD_RULE");
    learn_ = !(s && std::strcmp(s, "fixed") == 0);
  }

  bool learn_ = true;
  std::mutex mu_;
  std::unordered_map<uint64_t, Entry> table_;
};

// Times one call for the rule: `ran(true)` once the work ran on the picked count.
class RuleTimer {
 public:
  explicit RuleTimer(const ThreadRule::Pick &pk, uint64_t units) : pk_(pk), units_(units) {
    if (pk_.slot >= 0) t0_ = std::chrono::steady_clock::now();
  }
  void ran() {
    if (pk_.slot < 0) return;
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0_;
    ThreadRule::instance().report(pk_, dt.count(), units_);
  }

 private:
  ThreadRule::Pick pk_;
  uint64_t units_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace ms_scatter

#endif  // MS_SCATTER_CPU_THREAD_RULE_H_
