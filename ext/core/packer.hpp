#pragma once
// The threaded packer: a thread-safe pending queue, a background thread that
// forms bins when the consumer is ready and the window policy says so, and a
// ring of caller-provided slots the bins are written into (one write each).
//
// Threads: any number call submit/cancel/stats; one or more consumers call
// next_bin/release; the packer's own thread selects and writes bins. One
// mutex guards the state; ribbons are written outside it.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "pending_set.hpp"
#include "window_policy.hpp"

namespace ribbon {

struct PackerConfig {
  uint32_t budget = 16384;       // max weight of a bin: sum(len + reserve)
  uint32_t reserve_per_seq = 0;  // KV room for the generated tokens
  uint32_t max_seqs = 256;
  uint32_t alignment = 16;       // ribbon length padded to a multiple of this
  int32_t pad_token = 0;         // written after the last document only
  int64_t efficient_tokens = 8192;
  double max_wait_s = 0.05;
  double latency_target_s = 2.0;
  Order order = Order::kDecreasing;  // which sequences a bin takes first (pending_set.hpp)
};

// Caller-provided memory of one ring slot; the caller keeps it alive.
struct SlotBuffers {
  int32_t* tokens = nullptr;      // >= padded budget entries
  std::size_t token_capacity = 0;
  int32_t* cu_seqlens = nullptr;  // >= max_seqs + 1 entries
  int64_t* seq_ids = nullptr;     // >= max_seqs entries
  std::size_t seq_capacity = 0;   // entries of seq_ids (cu_seqlens holds one more)
};

struct BinInfo {
  uint32_t slot = 0;
  uint32_t num_seqs = 0;
  uint32_t num_tokens = 0;     // real tokens
  uint32_t padded_tokens = 0;  // ribbon length, a multiple of alignment
  uint32_t max_seqlen = 0;
  int64_t weight = 0;
  double oldest_wait_s = 0.0;  // age of its oldest sequence at release
  Release reason = Release::kEfficient;
};

struct PackerStats {
  int64_t pending_seqs = 0, pending_tokens = 0, pending_weight = 0;
  int64_t submitted_seqs = 0, submitted_tokens = 0;
  int64_t bins_emitted = 0, seqs_emitted = 0, tokens_emitted = 0, weight_emitted = 0;
  int64_t cancelled_seqs = 0;
  int64_t waits = 0;       // bins the policy held back at least once
  int64_t slot_waits = 0;  // times the packer found every slot busy
  double wait_s_total = 0.0;
  double arrival_rate_tokens_per_s = 0.0;  // weight per second, estimated
  double service_estimate_s = 0.0;
  int64_t released_efficient = 0, released_no_gain = 0, released_deadline = 0,
          released_rate_low = 0, released_drain = 0;
  int64_t free_slots = 0;
};

using Clock = std::function<double()>;
double steady_seconds();  // the default clock

class Packer {
 public:
  Packer(const PackerConfig& config, std::vector<SlotBuffers> slots, Clock clock = {});
  ~Packer();  // closes and joins the thread
  Packer(const Packer&) = delete;
  Packer& operator=(const Packer&) = delete;

  // Thread-safe; never waits for the consumer. Throws invalid_argument for an
  // empty or overweight sequence, runtime_error after close.
  void submit(int64_t seq_id, int64_t key, std::vector<int32_t> tokens);
  // Several at once, atomically: all are checked first (nothing is added if one is
  // refused), then added under one lock, so the window sees the whole batch arrive
  // together (a poll's batch must not leave as a bin of its first two documents).
  struct Submission {
    int64_t seq_id = 0;
    int64_t key = 0;
    std::vector<int32_t> tokens;
  };
  void submit_many(std::vector<Submission> batch);
  // Blocks up to timeout_s for a bin; nullopt on timeout or after close.
  std::optional<BinInfo> next_bin(double timeout_s);
  void release(uint32_t slot);  // throws invalid_argument if not handed out
  std::vector<int64_t> cancel(int64_t key);
  void drain(bool on);  // release pending bins without waiting to fill
  void close();         // wakes every waiter; idempotent
  bool closed() const;
  PackerStats stats() const;
  int64_t pending_tokens(int64_t key) const;
  std::size_t num_slots() const noexcept { return slots_.size(); }
  const PackerConfig& config() const noexcept { return config_; }

 private:
  enum class SlotState : uint8_t { kFree, kWriting, kReady, kHanded };
  void run();
  bool can_form() const;  // a consumer waits for a bin nobody is forming
  BinInfo write_bin(uint32_t slot, const std::vector<PendingItem>& items) const;

  PackerConfig config_;
  std::vector<SlotBuffers> slots_;
  Clock clock_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;   // the packer thread waits here
  std::condition_variable ready_cv_;  // consumers wait here
  PendingSet pending_;
  WindowPolicy policy_;
  std::vector<SlotState> slot_state_;
  std::deque<BinInfo> ready_;
  int consumers_waiting_ = 0;
  int forming_ = 0;
  bool closed_ = false;
  bool held_back_ = false;  // the policy waited for the bin being formed
  double hold_start_s_ = 0.0;
  PackerStats stats_;
  std::thread thread_;
};

}  // namespace ribbon
