#pragma once
// The pending sequences and the bin-selection step (single-threaded; the
// threaded Packer guards it with its mutex, the simulator drives it directly).
//
// Selection is First-Fit-Decreasing one bin at a time, made age-aware:
//   1. the oldest pending sequence always goes first (so a sequence with k
//      sequences submitted before it is emitted within k + 1 bins: no sequence
//      waits forever behind others), then the oldest of every other key
//      (partition) that fits, so each bin advances every partition's head;
//   2. then, repeatedly, the largest pending sequence that still fits.
// With one key, step 1 takes just the oldest (worker/packer_ref.py is that case).
//
// Order::kArrival (the worker's default, docs/pipeline.md) replaces step 1 by:
//   1'. pending sequences in arrival order, each while it fits, stopping at the
//       first that does not (so a bin holds a prefix of the arrival order, and
//       every partition's committed prefix advances with each bin);
// then step 2 fills the remaining room with the largest that fit. With budgets
// of hundreds of documents per bin the tail fill loses almost no fill.
// Scanning sizes in decreasing order and taking each that fits is the same as
// repeatedly taking the largest that fits, because the room only shrinks.
// Sizes are bucketed by weight (an intrusive FIFO list per weight) with a
// two-level bitset over the buckets, so a step costs a few word tests, not a
// scan of the queue; a second intrusive list keeps the arrival order. Every
// operation is O(1) apart from that bitset search and cancel (O(pending)).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ribbon {

// Which sequences a bin takes first (see the top of this file).
enum class Order : uint8_t { kDecreasing, kArrival };
// "decreasing" | "arrival"; throws std::invalid_argument naming any other value.
Order parse_order(const std::string& name);

struct PendingItem {
  int64_t seq_id = 0;
  int64_t key = 0;
  uint32_t length = 0;  // real tokens
  uint32_t weight = 0;  // length + reserve_per_seq
  double arrival_s = 0.0;
  std::vector<int32_t> tokens;  // empty when only lengths are packed
  // Links of the two intrusive lists (indices into the set's items; kNone ends).
  uint32_t w_prev = 0, w_next = 0;  // same weight, arrival order
  uint32_t a_prev = 0, a_next = 0;  // all pending, arrival order
};

class PendingSet {
 public:
  // budget: the largest weight of a bin; reserve: added to every length.
  PendingSet(uint32_t budget, uint32_t reserve_per_seq, Order order = Order::kDecreasing);

  uint32_t budget() const noexcept { return budget_; }
  uint32_t reserve() const noexcept { return reserve_; }

  // Adds a sequence; throws std::invalid_argument (naming the lengths) when
  // length + reserve exceeds the budget or the length is zero.
  void add(int64_t seq_id, int64_t key, uint32_t length, std::vector<int32_t> tokens,
           double arrival_s);

  // Removes the sequences of the next bin (at most max_seqs) and appends them,
  // in ribbon order, to `out` (their tokens are moved, not copied).
  // Empty set -> nothing appended.
  void select_bin(uint32_t max_seqs, std::vector<PendingItem>& out);

  // Drops every pending sequence of `key`; returns their ids in arrival order.
  std::vector<int64_t> cancel(int64_t key);

  std::size_t size() const noexcept { return live_; }
  int64_t tokens() const noexcept { return tokens_; }
  int64_t weight() const noexcept { return weight_; }
  int64_t tokens_of(int64_t key) const;
  // Arrival time of the oldest pending sequence; only valid when size() > 0.
  double oldest_arrival_s() const;

 private:
  struct List {
    uint32_t head;
    uint32_t tail;
  };
  static constexpr uint32_t kNone = 0xffffffffu;

  uint32_t take_largest_fitting(uint32_t room);  // returns index or kNone
  void unlink(uint32_t index);  // leaves both lists, updates counters
  void release(uint32_t index, std::vector<PendingItem>* out);  // moves to out or drops
  void set_bit(uint32_t w, bool on);
  uint32_t find_le(uint32_t room) const;  // largest non-empty bucket <= room

  uint32_t take_arrival_prefix(uint32_t max_seqs, uint32_t& room, std::vector<PendingItem>& out);
  uint32_t take_key_heads(uint32_t max_seqs, uint32_t& room, std::vector<PendingItem>& out);

  uint32_t budget_;
  uint32_t reserve_;
  Order order_;
  std::vector<PendingItem> items_;
  std::vector<uint32_t> free_;
  List by_age_{kNone, kNone};
  std::vector<List> buckets_;  // by weight, 0..budget
  std::vector<uint64_t> bits_;  // bit w set <=> buckets_[w] is not empty
  std::vector<uint64_t> summary_;  // bit i set <=> bits_[i] != 0
  int64_t& key_tokens(int64_t key);  // creates the entry; caches the last key
  std::unordered_map<int64_t, int64_t> key_tokens_;  // entries are stable in memory
  std::vector<int64_t> heads_;  // keys whose head a bin already took (scratch of select_bin)
  int64_t last_key_ = 0;
  int64_t* last_key_tokens_ = nullptr;
  std::size_t live_ = 0;
  int64_t tokens_ = 0;
  int64_t weight_ = 0;
};

}  // namespace ribbon
