// Deterministic tests of the adaptive window: the clock is a plain number.
#include <cmath>
#include <stdexcept>

#include "check.hpp"
#include "window_policy.hpp"

using ribbon::Release;
using ribbon::WindowConfig;
using ribbon::WindowPolicy;

static WindowConfig config() {
  WindowConfig c;
  c.budget = 16000;
  c.efficient_tokens = 8000;
  c.max_seqs = 64;
  c.max_wait_s = 0.05;
  c.latency_target_s = 2.0;
  c.rate_time_constant_s = 0.25;
  return c;
}

TEST(window_rejects_bad_config) {
  WindowConfig c = config();
  c.max_wait_s = -1.0;
  CHECK_THROWS(WindowPolicy{c}, std::invalid_argument);
  c = config();
  c.efficient_tokens = 0;
  CHECK_THROWS(WindowPolicy{c}, std::invalid_argument);
}

TEST(window_waits_for_arrivals_when_nothing_pending) {
  WindowPolicy p(config());
  const auto d = p.decide(10.0, {0, 0, 0.0});
  CHECK(!d.release() && std::isinf(d.wait_s));
}

TEST(window_releases_an_efficient_bin_at_once) {
  WindowPolicy p(config());
  CHECK(p.decide(1.0, {8000, 3, 1.0}).action == Release::kEfficient);
  CHECK(p.decide(1.0, {100, 64, 1.0}).action == Release::kEfficient);  // max_seqs
}

TEST(window_releases_when_rate_is_too_low) {
  WindowPolicy p(config());
  p.on_arrival(0.0, 100);  // rate ~ 100 / 0.25 = 400 weight/s: 8000 needs 20 s
  const auto d = p.decide(0.0, {100, 1, 0.0});
  CHECK(d.action == Release::kRateLow);
}

TEST(window_waits_just_long_enough_when_the_rate_fills_in_time) {
  WindowPolicy p(config());
  // 40 arrivals of 100 within 10 ms: the decaying sum holds ~4000 / 0.25 s.
  for (int i = 0; i < 40; ++i) p.on_arrival(i * 0.00025, 100);
  const double rate = p.arrival_rate(0.01);
  CHECK(rate > 14000 && rate < 17000);
  const auto d = p.decide(0.01, {7500, 40, 0.0});
  CHECK(!d.release());
  CHECK(std::fabs(d.wait_s - 500.0 / rate) < 1e-9);  // the projected fill time
  CHECK(d.wait_s < 0.04);
  // Too far from the efficient size for the time left: waiting would not pay.
  CHECK(p.decide(0.01, {4000, 40, 0.0}).action == Release::kRateLow);
}

TEST(window_releases_the_oldest_at_its_deadline) {
  WindowPolicy p(config());
  for (int i = 0; i < 400; ++i) p.on_arrival(i * 0.0001, 100);  // a fast stream
  CHECK(!p.decide(0.04, {7000, 10, 0.0}).release());
  CHECK(p.decide(0.05, {7000, 10, 0.0}).action == Release::kDeadline);
}

TEST(window_deadline_shrinks_with_the_latency_target) {
  WindowConfig c = config();
  c.latency_target_s = 0.5;
  WindowPolicy p(c);
  p.on_release(0.0, 100);
  p.on_ready(0.48);  // a pass took 0.48 s: only 20 ms of slack remain
  CHECK(std::fabs(p.service_estimate_s() - 0.48) < 1e-12);
  CHECK(std::fabs(p.wait_limit_s() - 0.02) < 1e-9);
  for (int i = 0; i < 400; ++i) p.on_arrival(1.0 + i * 0.0001, 100);
  CHECK(p.decide(1.03, {4000, 10, 1.0}).action == Release::kDeadline);
}

TEST(window_rate_decays_without_arrivals) {
  WindowPolicy p(config());
  p.on_arrival(0.0, 1000);
  const double r0 = p.arrival_rate(0.0);
  CHECK(std::fabs(p.arrival_rate(0.25) - r0 * std::exp(-1.0)) < 1e-6);
}

TEST(window_drain_releases_anything) {
  WindowPolicy p(config());
  p.set_draining(true);
  CHECK(p.decide(0.0, {1, 1, 0.0}).action == Release::kDrain);
}

TEST(window_learns_the_pass_time_and_stops_waiting_when_it_would_not_pay) {
  WindowPolicy p(config());
  CHECK(!p.has_service_model());
  // Passes of t = 0.01 + w / 100000 at three sizes.
  double now = 0.0;
  for (int i = 0; i < 9; ++i) {
    const double w = 1000.0 * (1 + i % 3);
    p.on_release(now, static_cast<int64_t>(w));
    now += 0.01 + w / 100000.0;
    p.on_ready(now);
  }
  CHECK(p.has_service_model());
  CHECK(std::fabs(p.service_overhead_s() - 0.01) < 1e-9);
  CHECK(std::fabs(p.service_s_per_weight() - 1e-5) < 1e-12);
  // At 50000/s: r a / (1 - r b) = 500 / 0.5 = 1000 < efficient 8000.
  CHECK(std::fabs(p.fill_target(50000.0) - 1000.0) < 1e-6);
  // At or past the rate the GPU can absorb (r b >= 1) the efficient size rules.
  CHECK(p.fill_target(200000.0) == 8000.0);
  // A steady 50000/s stream: 1200 pending beats the 1000 that arrive during its pass.
  const double t0 = 10.0;
  for (int i = 0; i < 500; ++i) p.on_arrival(t0 + i * 0.002, 100);
  const double rate = p.arrival_rate(t0 + 1.0);
  CHECK(rate > 40000.0 && rate < 55000.0);
  CHECK(p.decide(t0 + 1.0, {1200, 12, t0 + 0.99}).action == Release::kNoGain);
  const auto d = p.decide(t0 + 1.0, {400, 4, t0 + 0.999});
  CHECK(!d.release());
  CHECK(std::fabs(d.wait_s - (p.fill_target(rate) - 400.0) / rate) < 1e-9);
}
