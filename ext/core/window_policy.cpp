#include "window_policy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace ribbon {

const char* release_name(Release r) noexcept {
  switch (r) {
    case Release::kWait: return "wait";
    case Release::kEfficient: return "efficient";
    case Release::kNoGain: return "no_gain";
    case Release::kDeadline: return "deadline";
    case Release::kRateLow: return "rate_low";
    case Release::kDrain: return "drain";
  }
  return "unknown";
}

WindowPolicy::WindowPolicy(const WindowConfig& config) : config_(config) {
  if (config.budget <= 0)
    throw std::invalid_argument("budget must be > 0, got " + std::to_string(config.budget));
  if (config.efficient_tokens <= 0)
    throw std::invalid_argument("efficient_tokens must be > 0, got " +
                                std::to_string(config.efficient_tokens));
  if (config.max_seqs <= 0)
    throw std::invalid_argument("max_seqs must be > 0, got " + std::to_string(config.max_seqs));
  if (!(config.max_wait_s >= 0.0))
    throw std::invalid_argument("max_wait_s must be >= 0, got " + std::to_string(config.max_wait_s));
  if (!(config.latency_target_s > 0.0))
    throw std::invalid_argument("latency_target_s must be > 0, got " +
                                std::to_string(config.latency_target_s));
  if (!(config.service_memory >= 0.0 && config.service_memory < 1.0))
    throw std::invalid_argument("service_memory must be in [0, 1), got " +
                                std::to_string(config.service_memory));
  if (!(config.rate_time_constant_s > 0.0))
    throw std::invalid_argument("rate_time_constant_s must be > 0, got " +
                                std::to_string(config.rate_time_constant_s));
}

void WindowPolicy::on_arrival(double now_s, int64_t weight) noexcept {
  // Exponentially decaying sum: rate = sum(w_i * exp(-(now - t_i)/tau)) / tau.
  rate_ = arrival_rate(now_s) + static_cast<double>(weight) / config_.rate_time_constant_s;
  rate_time_ = have_rate_ ? std::max(rate_time_, now_s) : now_s;
  const double w = static_cast<double>(weight);
  mean_arrival_ = have_rate_ ? 0.95 * mean_arrival_ + 0.05 * w : w;
  have_rate_ = true;
}

double WindowPolicy::arrival_rate(double now_s) const noexcept {
  if (!have_rate_) return 0.0;
  const double dt = std::max(0.0, now_s - rate_time_);
  return rate_ * std::exp(-dt / config_.rate_time_constant_s);
}

void WindowPolicy::on_ready(double now_s) noexcept {
  if (!in_service_) return;
  const double busy = std::max(0.0, now_s - released_at_);
  service_s_ = service_s_ == 0.0 ? busy : 0.8 * service_s_ + 0.2 * busy;
  in_service_ = false;
  add_pass(released_weight_, busy);
}

void WindowPolicy::on_release(double now_s, int64_t weight) noexcept {
  released_at_ = now_s;
  released_weight_ = static_cast<double>(weight);
  in_service_ = true;
}

void WindowPolicy::add_pass(double w, double t) noexcept {
  const double m = config_.service_memory;
  s1_ = m * s1_ + 1.0;
  sw_ = m * sw_ + w;
  sww_ = m * sww_ + w * w;
  st_ = m * st_ + t;
  swt_ = m * swt_ + w * t;
  if (s1_ < 2.5) return;  // too few passes to tell a from b
  const double mw = sw_ / s1_, mt = st_ / s1_;
  const double var = sww_ / s1_ - mw * mw;
  if (!(var > 1e-4 * mw * mw)) return;  // bins of one size: keep the last fit
  const double b = std::max(0.0, (swt_ / s1_ - mw * mt) / var);
  fit_b_ = b;
  fit_a_ = std::max(0.0, mt - b * mw);
  have_fit_ = true;
}

double WindowPolicy::fill_target(double rate) const noexcept {
  double target = static_cast<double>(std::min(config_.efficient_tokens, config_.budget));
  if (have_fit_ && rate * fit_b_ < 1.0) {
    const double w_star = rate * fit_a_ / (1.0 - rate * fit_b_);
    target = w_star < mean_arrival_ ? 0.0 : std::min(target, w_star);
  }
  return target;
}

double WindowPolicy::wait_limit_s() const noexcept {
  const double slack = config_.latency_target_s - service_s_;
  return std::clamp(slack, 0.0, config_.max_wait_s);
}

Decision WindowPolicy::decide(double now_s, const PendingView& pending) const noexcept {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (pending.seqs <= 0) return {Release::kWait, kInf};
  if (draining_) return {Release::kDrain, 0.0};
  const int64_t target = std::min(config_.efficient_tokens, config_.budget);
  if (pending.weight >= target || pending.seqs >= config_.max_seqs)
    return {Release::kEfficient, 0.0};
  const double rate = arrival_rate(now_s);
  const double goal = fill_target(rate);
  const double need = goal - static_cast<double>(pending.weight);
  if (need <= 0.0) return {Release::kNoGain, 0.0};
  const double age = std::max(0.0, now_s - pending.oldest_arrival_s);
  const double left = wait_limit_s() - age;
  if (left <= 0.0) return {Release::kDeadline, 0.0};
  if (!(rate > 0.0) || need > rate * left) return {Release::kRateLow, 0.0};
  return {Release::kWait, need / rate};
}

}  // namespace ribbon
