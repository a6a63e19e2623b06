#include "pending_set.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace ribbon {
namespace {

int top_bit(uint64_t x) noexcept { return 63 - __builtin_clzll(x); }

uint64_t mask_upto(uint32_t bit) noexcept {  // bits 0..bit set
  return bit >= 63 ? ~uint64_t{0} : ((uint64_t{1} << (bit + 1)) - 1);
}

}  // namespace

Order parse_order(const std::string& name) {
  if (name == "decreasing") return Order::kDecreasing;
  if (name == "arrival") return Order::kArrival;
  throw std::invalid_argument("order must be 'arrival' or 'decreasing', got '" + name + "'");
}

PendingSet::PendingSet(uint32_t budget, uint32_t reserve_per_seq, Order order)
    : budget_(budget), reserve_(reserve_per_seq), order_(order) {
  if (budget == 0) throw std::invalid_argument("budget must be > 0, got 0");
  if (reserve_per_seq >= budget)
    throw std::invalid_argument("reserve_per_seq (" + std::to_string(reserve_per_seq) +
                                ") must be smaller than the budget (" +
                                std::to_string(budget) + ")");
  buckets_.assign(std::size_t{budget} + 1, List{kNone, kNone});
  bits_.assign((std::size_t{budget} + 1 + 63) / 64, 0);
  summary_.assign((bits_.size() + 63) / 64, 0);
}

void PendingSet::add(int64_t seq_id, int64_t key, uint32_t length, std::vector<int32_t> tokens,
                     double arrival_s) {
  if (length == 0)
    throw std::invalid_argument("sequence " + std::to_string(seq_id) + " is empty");
  if (uint64_t{length} + reserve_ > budget_)
    throw std::invalid_argument("sequence " + std::to_string(seq_id) + " has " +
                                std::to_string(length) + " tokens; with reserve_per_seq " +
                                std::to_string(reserve_) + " it weighs " +
                                std::to_string(uint64_t{length} + reserve_) +
                                ", more than the bin budget " + std::to_string(budget_) +
                                " (split it; the packer never truncates)");
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(items_.size());
    items_.emplace_back();
  }
  PendingItem& it = items_[index];
  it.seq_id = seq_id;
  it.key = key;
  it.length = length;
  it.weight = length + reserve_;
  it.arrival_s = arrival_s;
  it.tokens = std::move(tokens);
  // Append to the tail of its weight's list and of the arrival list.
  List& b = buckets_[it.weight];
  it.w_prev = b.tail;
  it.w_next = kNone;
  if (b.tail == kNone) {
    b.head = index;
    set_bit(it.weight, true);
  } else {
    items_[b.tail].w_next = index;
  }
  b.tail = index;
  it.a_prev = by_age_.tail;
  it.a_next = kNone;
  if (by_age_.tail == kNone) by_age_.head = index;
  else items_[by_age_.tail].a_next = index;
  by_age_.tail = index;
  live_++;
  tokens_ += length;
  weight_ += it.weight;
  key_tokens(key) += length;
}

int64_t& PendingSet::key_tokens(int64_t key) {
  if (last_key_tokens_ == nullptr || last_key_ != key) {
    last_key_tokens_ = &key_tokens_[key];  // element references survive rehashing
    last_key_ = key;
  }
  return *last_key_tokens_;
}

void PendingSet::set_bit(uint32_t w, bool on) {
  const std::size_t word = w >> 6;
  const uint64_t bit = uint64_t{1} << (w & 63);
  if (on) {
    bits_[word] |= bit;
    summary_[word >> 6] |= uint64_t{1} << (word & 63);
  } else {
    bits_[word] &= ~bit;
    if (bits_[word] == 0) summary_[word >> 6] &= ~(uint64_t{1} << (word & 63));
  }
}

uint32_t PendingSet::find_le(uint32_t room) const {
  if (room > budget_) room = budget_;
  std::size_t word = room >> 6;
  const uint64_t m = bits_[word] & mask_upto(room & 63);
  if (m != 0) return static_cast<uint32_t>(word * 64 + static_cast<std::size_t>(top_bit(m)));
  if (word == 0) return kNone;
  word--;
  std::size_t sw = word >> 6;
  uint64_t s = summary_[sw] & mask_upto(static_cast<uint32_t>(word & 63));
  for (;;) {
    if (s != 0) {
      const std::size_t wi = sw * 64 + static_cast<std::size_t>(top_bit(s));
      return static_cast<uint32_t>(wi * 64 + static_cast<std::size_t>(top_bit(bits_[wi])));
    }
    if (sw == 0) return kNone;
    s = summary_[--sw];
  }
}

void PendingSet::unlink(uint32_t index) {
  PendingItem& it = items_[index];
  List& b = buckets_[it.weight];
  if (it.w_prev == kNone) b.head = it.w_next;
  else items_[it.w_prev].w_next = it.w_next;
  if (it.w_next == kNone) b.tail = it.w_prev;
  else items_[it.w_next].w_prev = it.w_prev;
  if (b.head == kNone) set_bit(it.weight, false);
  if (it.a_prev == kNone) by_age_.head = it.a_next;
  else items_[it.a_prev].a_next = it.a_next;
  if (it.a_next == kNone) by_age_.tail = it.a_prev;
  else items_[it.a_next].a_prev = it.a_prev;
  live_--;
  tokens_ -= it.length;
  weight_ -= it.weight;
  int64_t& left = key_tokens(it.key);
  left -= it.length;
  // Keys are few (partitions): an emptied entry stays unless the map grows large.
  if (left == 0 && key_tokens_.size() > 4096) {
    key_tokens_.erase(it.key);
    last_key_tokens_ = nullptr;
  }
}

void PendingSet::release(uint32_t index, std::vector<PendingItem>* out) {
  PendingItem& it = items_[index];
  if (out != nullptr) out->push_back(std::move(it));
  it.tokens = std::vector<int32_t>();
  free_.push_back(index);
}

uint32_t PendingSet::take_largest_fitting(uint32_t room) {
  const uint32_t w = find_le(room);
  if (w == kNone) return kNone;
  const uint32_t index = buckets_[w].head;  // the oldest of that weight
  unlink(index);
  return index;
}

void PendingSet::select_bin(uint32_t max_seqs, std::vector<PendingItem>& out) {
  if (live_ == 0 || max_seqs == 0) return;
  uint32_t room = budget_;
  uint32_t n = order_ == Order::kArrival ? take_arrival_prefix(max_seqs, room, out)
                                         : take_key_heads(max_seqs, room, out);
  // 2. Then, repeatedly, the largest pending sequence that still fits.
  for (; n < max_seqs; ++n) {
    const uint32_t index = take_largest_fitting(room);
    if (index == kNone) break;
    room -= items_[index].weight;
    release(index, &out);
  }
}

uint32_t PendingSet::take_arrival_prefix(uint32_t max_seqs, uint32_t& room,
                                         std::vector<PendingItem>& out) {
  // 1'. A prefix of the arrival order: each partition's oldest documents go first, so
  //     its committed prefix (and the summaries behind it) advances with every bin.
  uint32_t n = 0;
  while (by_age_.head != kNone && n < max_seqs && items_[by_age_.head].weight <= room) {
    const uint32_t index = by_age_.head;
    room -= items_[index].weight;
    unlink(index);
    release(index, &out);
    ++n;
  }
  return n;
}

uint32_t PendingSet::take_key_heads(uint32_t max_seqs, uint32_t& room,
                                    std::vector<PendingItem>& out) {
  // 1. The oldest pending sequence of every key, oldest first, each if it fits. The
  //    globally oldest comes first and always fits (the age bound). With several keys
  //    (partitions) every bin moves each key's head, so offsets commit in order without
  //    waiting for the small documents that decreasing sizes would leave for last.
  uint32_t n = 0;
  std::size_t keys = 0;
  for (const auto& kv : key_tokens_) keys += kv.second > 0 ? 1 : 0;
  heads_.clear();
  for (uint32_t index = by_age_.head; index != kNone && n < max_seqs && heads_.size() < keys;) {
    const uint32_t next = items_[index].a_next;
    const PendingItem& it = items_[index];
    if (std::find(heads_.begin(), heads_.end(), it.key) == heads_.end()) {
      heads_.push_back(it.key);
      if (it.weight <= room) {
        room -= it.weight;
        unlink(index);
        release(index, &out);
        ++n;
      }
    }
    index = next;
  }
  return n;
}

std::vector<int64_t> PendingSet::cancel(int64_t key) {
  std::vector<int64_t> ids;
  if (tokens_of(key) == 0) return ids;
  for (uint32_t index = by_age_.head; index != kNone;) {  // arrival order
    const uint32_t next = items_[index].a_next;
    if (items_[index].key == key) {
      ids.push_back(items_[index].seq_id);
      unlink(index);
      release(index, nullptr);
    }
    index = next;
  }
  return ids;
}

int64_t PendingSet::tokens_of(int64_t key) const {
  const auto k = key_tokens_.find(key);
  return k == key_tokens_.end() ? 0 : k->second;
}

double PendingSet::oldest_arrival_s() const { return items_[by_age_.head].arrival_s; }

}  // namespace ribbon
