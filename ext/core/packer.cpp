#include "packer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace ribbon {
namespace {

uint32_t round_up(uint32_t n, uint32_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

WindowConfig window_config(const PackerConfig& c) {
  WindowConfig w;
  w.budget = c.budget;
  w.efficient_tokens = c.efficient_tokens;
  w.max_seqs = c.max_seqs;
  w.max_wait_s = c.max_wait_s;
  w.latency_target_s = c.latency_target_s;
  return w;
}

void check_config(const PackerConfig& c, const std::vector<SlotBuffers>& slots) {
  if (c.alignment == 0) throw std::invalid_argument("alignment must be >= 1, got 0");
  if (c.max_seqs == 0) throw std::invalid_argument("max_seqs must be >= 1, got 0");
  if (slots.empty()) throw std::invalid_argument("the ring needs at least one slot, got 0");
  const uint32_t need = round_up(c.budget, c.alignment);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const SlotBuffers& s = slots[i];
    if (s.tokens == nullptr || s.cu_seqlens == nullptr || s.seq_ids == nullptr)
      throw std::invalid_argument("slot " + std::to_string(i) + " has a null buffer");
    if (s.token_capacity < need || s.seq_capacity < c.max_seqs)
      throw std::invalid_argument(
          "slot " + std::to_string(i) + " holds " + std::to_string(s.token_capacity) +
          " tokens and " + std::to_string(s.seq_capacity) + " sequences; it needs " +
          std::to_string(need) + " tokens (budget rounded up to alignment) and " +
          std::to_string(c.max_seqs) + " sequences");
  }
}

}  // namespace

double steady_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

Packer::Packer(const PackerConfig& config, std::vector<SlotBuffers> slots, Clock clock)
    : config_(config),
      slots_(std::move(slots)),
      clock_(clock ? std::move(clock) : Clock(steady_seconds)),
      pending_(config.budget, config.reserve_per_seq, config.order),
      policy_(window_config(config)),
      slot_state_(slots_.size(), SlotState::kFree) {
  check_config(config_, slots_);
  thread_ = std::thread([this] { run(); });
}

Packer::~Packer() {
  close();
  if (thread_.joinable()) thread_.join();
}

namespace {

void check_submission(int64_t seq_id, std::size_t length, uint32_t budget, uint32_t reserve) {
  if (length > budget)
    throw std::invalid_argument("sequence " + std::to_string(seq_id) + " has " +
                                std::to_string(length) + " tokens, more than the bin budget " +
                                std::to_string(budget) + " (split it; the packer never truncates)");
  if (length == 0) throw std::invalid_argument("sequence " + std::to_string(seq_id) + " is empty");
  if (length + reserve > budget)
    throw std::invalid_argument("sequence " + std::to_string(seq_id) + " has " +
                                std::to_string(length) + " tokens; with reserve_per_seq " +
                                std::to_string(reserve) + " it weighs " +
                                std::to_string(length + reserve) + ", more than the bin budget " +
                                std::to_string(budget) + " (split it; the packer never truncates)");
}

}  // namespace

void Packer::submit(int64_t seq_id, int64_t key, std::vector<int32_t> tokens) {
  std::vector<Submission> one;
  one.push_back(Submission{seq_id, key, std::move(tokens)});
  submit_many(std::move(one));
}

void Packer::submit_many(std::vector<Submission> batch) {
  for (const auto& s : batch)
    check_submission(s.seq_id, s.tokens.size(), config_.budget, config_.reserve_per_seq);
  std::lock_guard<std::mutex> lk(mu_);
  if (closed_) throw std::runtime_error("submit after close");
  const double now = clock_();
  for (auto& s : batch) {
    const auto length = static_cast<uint32_t>(s.tokens.size());
    pending_.add(s.seq_id, s.key, length, std::move(s.tokens), now);
    policy_.on_arrival(now, int64_t{length} + config_.reserve_per_seq);
    stats_.submitted_seqs++;
    stats_.submitted_tokens += length;
  }
  if (consumers_waiting_ > 0 && !batch.empty()) work_cv_.notify_one();
}

bool Packer::can_form() const {
  return consumers_waiting_ > static_cast<int>(ready_.size()) + forming_ && pending_.size() > 0;
}

void Packer::run() {
  std::vector<PendingItem> items;
  std::unique_lock<std::mutex> lk(mu_);
  bool slot_wait_counted = false;
  while (!closed_) {
    if (!can_form()) {
      work_cv_.wait(lk);
      continue;
    }
    uint32_t slot = 0;
    while (slot < slot_state_.size() && slot_state_[slot] != SlotState::kFree) ++slot;
    if (slot == slot_state_.size()) {  // every slot busy: wait, never allocate
      if (!slot_wait_counted) stats_.slot_waits++;
      slot_wait_counted = true;
      work_cv_.wait(lk);
      continue;
    }
    slot_wait_counted = false;
    const double now = clock_();
    const double oldest = pending_.oldest_arrival_s();
    const PendingView view{pending_.weight(), static_cast<int64_t>(pending_.size()), oldest};
    const Decision d = policy_.decide(now, view);
    if (!d.release()) {
      if (!held_back_) {
        held_back_ = true;
        hold_start_s_ = now;
        stats_.waits++;
      }
      work_cv_.wait_for(lk, std::chrono::duration<double>(std::min(d.wait_s, 3600.0)));
      continue;
    }
    if (held_back_) stats_.wait_s_total += now - hold_start_s_;
    held_back_ = false;
    items.clear();
    pending_.select_bin(config_.max_seqs, items);
    slot_state_[slot] = SlotState::kWriting;
    forming_++;
    lk.unlock();
    BinInfo info = write_bin(slot, items);  // the one write into the slot
    lk.lock();
    forming_--;
    info.reason = d.action;
    info.oldest_wait_s = now - oldest;
    slot_state_[slot] = SlotState::kReady;
    ready_.push_back(info);
    policy_.on_release(now, info.weight);
    stats_.bins_emitted++;
    stats_.seqs_emitted += info.num_seqs;
    stats_.tokens_emitted += info.num_tokens;
    stats_.weight_emitted += info.weight;
    switch (d.action) {
      case Release::kEfficient: stats_.released_efficient++; break;
      case Release::kNoGain: stats_.released_no_gain++; break;
      case Release::kDeadline: stats_.released_deadline++; break;
      case Release::kRateLow: stats_.released_rate_low++; break;
      case Release::kDrain: stats_.released_drain++; break;
      case Release::kWait: break;
    }
    ready_cv_.notify_all();
  }
}

BinInfo Packer::write_bin(uint32_t slot, const std::vector<PendingItem>& items) const {
  const SlotBuffers& s = slots_[slot];
  BinInfo info;
  info.slot = slot;
  info.num_seqs = static_cast<uint32_t>(items.size());
  uint32_t offset = 0;
  s.cu_seqlens[0] = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const PendingItem& it = items[i];
    std::memcpy(s.tokens + offset, it.tokens.data(), std::size_t{it.length} * sizeof(int32_t));
    offset += it.length;
    s.cu_seqlens[i + 1] = static_cast<int32_t>(offset);
    s.seq_ids[i] = it.seq_id;
    info.max_seqlen = std::max(info.max_seqlen, it.length);
    info.weight += it.weight;
  }
  info.num_tokens = offset;
  info.padded_tokens = round_up(offset, config_.alignment);
  for (uint32_t i = offset; i < info.padded_tokens; ++i) s.tokens[i] = config_.pad_token;
  return info;
}

std::optional<BinInfo> Packer::next_bin(double timeout_s) {
  std::unique_lock<std::mutex> lk(mu_);
  if (closed_) return std::nullopt;
  policy_.on_ready(clock_());
  consumers_waiting_++;
  work_cv_.notify_one();
  auto done = [this] { return closed_ || !ready_.empty(); };
  if (std::isinf(timeout_s) && timeout_s > 0) {
    ready_cv_.wait(lk, done);
  } else {
    const double t = std::isnan(timeout_s) ? 0.0 : std::clamp(timeout_s, 0.0, 1e6);
    ready_cv_.wait_for(lk, std::chrono::duration<double>(t), done);
  }
  consumers_waiting_--;
  if (closed_ || ready_.empty()) return std::nullopt;
  BinInfo info = ready_.front();
  ready_.pop_front();
  slot_state_[info.slot] = SlotState::kHanded;
  return info;
}

void Packer::release(uint32_t slot) {
  std::lock_guard<std::mutex> lk(mu_);
  if (slot >= slot_state_.size() || slot_state_[slot] != SlotState::kHanded)
    throw std::invalid_argument("slot " + std::to_string(slot) +
                                " is not handed out (release it once, after next_bin)");
  slot_state_[slot] = SlotState::kFree;
  work_cv_.notify_one();
}

std::vector<int64_t> Packer::cancel(int64_t key) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<int64_t> ids = pending_.cancel(key);
  stats_.cancelled_seqs += static_cast<int64_t>(ids.size());
  return ids;
}

void Packer::drain(bool on) {
  std::lock_guard<std::mutex> lk(mu_);
  policy_.set_draining(on);
  work_cv_.notify_one();
}

void Packer::close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    closed_ = true;
  }
  work_cv_.notify_all();
  ready_cv_.notify_all();
}

bool Packer::closed() const {
  std::lock_guard<std::mutex> lk(mu_);
  return closed_;
}

PackerStats Packer::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  PackerStats s = stats_;
  s.pending_seqs = static_cast<int64_t>(pending_.size());
  s.pending_tokens = pending_.tokens();
  s.pending_weight = pending_.weight();
  s.arrival_rate_tokens_per_s = policy_.arrival_rate(clock_());
  s.service_estimate_s = policy_.service_estimate_s();
  s.free_slots = 0;
  for (const SlotState st : slot_state_) s.free_slots += st == SlotState::kFree ? 1 : 0;
  return s;
}

int64_t Packer::pending_tokens(int64_t key) const {
  std::lock_guard<std::mutex> lk(mu_);
  return pending_.tokens_of(key);
}

}  // namespace ribbon
