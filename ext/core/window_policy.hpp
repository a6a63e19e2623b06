#pragma once
// The adaptive accumulation window: when the bin consumer (the GPU thread) is
// ready, release a bin now or wait a little for more tokens?
//
// A pure object: every call takes the current time `now_s` (seconds on any
// monotonic clock), so tests and the simulator drive it with a virtual clock.
// It learns the pass time of the consumer, t = a + b * weight, from the time
// between a release and the next "ready" (weighted least squares, recent
// passes count most), and releases at once when waiting would not pay:
//   efficient  the pending weight already makes an efficient (or full) bin;
//   no_gain    more weight is pending than arrives during its own pass
//              (W >= w* = rate * a / (1 - rate * b)), or less than one
//              sequence (of the mean arrival weight) arrives during a pass:
//              the wait would delay the pending without filling the bin;
//   deadline   the oldest sequence has waited its limit:
//              min(max_wait, latency_target - estimated service time);
//   rate_low   at the estimated arrival rate, the bin would not reach the
//              efficient size before that limit;
// otherwise it waits just long enough for the projected fill (the smaller of
// the efficient size and rate * a / (1 - rate * b)), and is asked again on
// every arrival.
#include <cstdint>

namespace ribbon {

struct WindowConfig {
  int64_t budget = 16384;            // weight of a full bin (tokens + reserves)
  int64_t efficient_tokens = 8192;   // weight worth sending at once
  int64_t max_seqs = 256;            // a bin holding this many is full
  double max_wait_s = 0.05;          // longest the oldest sequence waits to fill
  double latency_target_s = 2.0;     // per-message latency target
  double rate_time_constant_s = 0.25;  // memory of the arrival-rate estimate
  double service_memory = 0.9;  // weight of the older passes in the a, b fit
};

enum class Release : uint8_t { kWait = 0, kEfficient, kNoGain, kDeadline, kRateLow, kDrain };
const char* release_name(Release r) noexcept;

struct PendingView {
  int64_t weight = 0;       // sum of length + reserve of the pending sequences
  int64_t seqs = 0;         // pending sequences
  double oldest_arrival_s = 0.0;  // arrival time of the oldest (if seqs > 0)
};

struct Decision {
  Release action = Release::kWait;
  double wait_s = 0.0;  // when kWait: ask again after this long (inf: on arrival)
  bool release() const noexcept { return action != Release::kWait; }
};

class WindowPolicy {
 public:
  explicit WindowPolicy(const WindowConfig& config);  // throws invalid_argument

  const WindowConfig& config() const noexcept { return config_; }
  void on_arrival(double now_s, int64_t weight) noexcept;
  void on_ready(double now_s) noexcept;  // the consumer asks for a bin
  void on_release(double now_s, int64_t weight) noexcept;
  void set_draining(bool draining) noexcept { draining_ = draining; }

  Decision decide(double now_s, const PendingView& pending) const noexcept;
  double arrival_rate(double now_s) const noexcept;  // weight per second
  double service_estimate_s() const noexcept { return service_s_; }
  double wait_limit_s() const noexcept;  // how long the oldest may wait
  bool has_service_model() const noexcept { return have_fit_; }
  double service_overhead_s() const noexcept { return fit_a_; }       // a
  double service_s_per_weight() const noexcept { return fit_b_; }     // b
  // The weight worth waiting for at rate: min(efficient, budget, w*); 0 when
  // w* is less than one mean arrival (waiting would not pay).
  double fill_target(double rate) const noexcept;

 private:
  WindowConfig config_;
  double rate_ = 0.0;  // weight/s at rate_time_
  double rate_time_ = 0.0;
  double mean_arrival_ = 0.0;  // EWMA of the weight of one arrival
  bool have_rate_ = false;
  double service_s_ = 0.0;  // EWMA of release -> next ready
  double released_at_ = 0.0;
  double released_weight_ = 0.0;
  // Exponentially weighted sums over passes (w = weight, t = seconds).
  double s1_ = 0.0, sw_ = 0.0, sww_ = 0.0, st_ = 0.0, swt_ = 0.0;
  bool have_fit_ = false;
  double fit_a_ = 0.0, fit_b_ = 0.0;
  void add_pass(double weight, double seconds) noexcept;
  bool in_service_ = false;
  bool draining_ = false;
};

}  // namespace ribbon
