// Unit tests of the pending set and its bin selection.
#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>

#include "check.hpp"
#include "pack_offline.hpp"
#include "pending_set.hpp"

using ribbon::PendingItem;
using ribbon::PendingSet;

TEST(pending_rejects_overweight_and_empty) {
  PendingSet s(100, 10);
  CHECK_THROWS(s.add(1, 0, 91, {}, 0.0), std::invalid_argument);
  CHECK_THROWS(s.add(2, 0, 0, {}, 0.0), std::invalid_argument);
  s.add(3, 0, 90, {}, 0.0);  // exactly the budget
  CHECK(s.size() == 1);
  CHECK(s.weight() == 100);
  CHECK_THROWS(PendingSet(100, 100), std::invalid_argument);
}

TEST(pending_oldest_first_then_largest_that_fits) {
  PendingSet s(100, 0);
  s.add(0, 0, 10, {}, 0.0);
  s.add(1, 0, 60, {}, 1.0);
  s.add(2, 0, 50, {}, 2.0);
  s.add(3, 0, 30, {}, 3.0);
  s.add(4, 0, 25, {}, 4.0);
  std::vector<PendingItem> bin;
  s.select_bin(256, bin);
  // oldest (10), then 60 (room 90), then 30 (room 30), then nothing fits in 0.
  CHECK(bin.size() == 3);
  CHECK(bin[0].seq_id == 0 && bin[1].seq_id == 1 && bin[2].seq_id == 3);
  bin.clear();
  s.select_bin(256, bin);
  CHECK(bin.size() == 2 && bin[0].seq_id == 2 && bin[1].seq_id == 4);
  CHECK(s.size() == 0 && s.weight() == 0 && s.tokens() == 0);
}

TEST(pending_respects_max_seqs) {
  PendingSet s(1000, 0);
  for (int i = 0; i < 10; ++i) s.add(i, 0, 5, {}, i);
  std::vector<PendingItem> bin;
  s.select_bin(4, bin);
  CHECK(bin.size() == 4);
  CHECK(s.size() == 6);
}

TEST(pending_moves_tokens_unaltered) {
  PendingSet s(64, 2);
  s.add(7, 1, 3, {5, 6, 7}, 0.0);
  s.add(8, 1, 2, {9, 10}, 0.0);
  std::vector<PendingItem> bin;
  s.select_bin(8, bin);
  CHECK(bin.size() == 2);
  CHECK((bin[0].tokens == std::vector<int32_t>{5, 6, 7}));
  CHECK((bin[1].tokens == std::vector<int32_t>{9, 10}));
  CHECK(bin[0].weight == 5 && bin[1].weight == 4);
}

TEST(pending_cancel_by_key) {
  PendingSet s(100, 0);
  s.add(1, 7, 10, {}, 0.0);
  s.add(2, 8, 20, {}, 0.0);
  s.add(3, 7, 30, {}, 0.0);
  CHECK(s.tokens_of(7) == 40);
  const auto ids = s.cancel(7);
  CHECK((ids == std::vector<int64_t>{1, 3}));
  CHECK(s.tokens_of(7) == 0 && s.tokens_of(8) == 20);
  CHECK(s.cancel(7).empty());
  std::vector<PendingItem> bin;
  s.select_bin(8, bin);
  CHECK(bin.size() == 1 && bin[0].seq_id == 2);
}

// Against a naive model: random adds, cancels and selections; every selected
// bin must equal the naive "oldest of each key (each if it fits), then largest that
// fits (oldest among equals)".
TEST(pending_matches_naive_model) {
  std::mt19937 rng_engine(1234);
  auto rng = [&] { return static_cast<uint32_t>(rng_engine()); };
  for (int round = 0; round < 30; ++round) {
    const uint32_t budget = 64 + rng() % 3000;
    const uint32_t reserve = rng() % 8;
    PendingSet s(budget, reserve);
    std::vector<PendingItem> model;  // alive, in arrival order
    int64_t next_id = 0;
    for (int op = 0; op < 400; ++op) {
      const unsigned r = rng() % 10;
      if (r < 6) {
        PendingItem it;
        it.seq_id = next_id++;
        it.key = rng() % 4;
        it.length = 1 + rng() % (budget - reserve);
        it.weight = it.length + reserve;
        s.add(it.seq_id, it.key, it.length, {}, static_cast<double>(op));
        model.push_back(it);
      } else if (r < 7) {
        const int64_t key = rng() % 4;
        std::vector<int64_t> expect;
        for (const auto& it : model) if (it.key == key) expect.push_back(it.seq_id);
        model.erase(std::remove_if(model.begin(), model.end(),
                                   [&](const PendingItem& it) { return it.key == key; }),
                    model.end());
        CHECK(s.cancel(key) == expect);
      } else {
        const uint32_t max_seqs = 1 + rng() % 6;
        std::vector<int64_t> expect;
        if (!model.empty()) {
          uint32_t room = budget;
          std::vector<int64_t> heads;  // the oldest of each key, in arrival order, each if it fits
          for (auto it = model.begin(); it != model.end() && expect.size() < max_seqs;) {
            if (std::find(heads.begin(), heads.end(), it->key) != heads.end()) { ++it; continue; }
            heads.push_back(it->key);
            if (it->weight > room) { ++it; continue; }
            room -= it->weight;
            expect.push_back(it->seq_id);
            it = model.erase(it);
          }
          while (expect.size() < max_seqs) {
            auto best = model.end();
            for (auto it = model.begin(); it != model.end(); ++it)
              if (it->weight <= room && (best == model.end() || it->weight > best->weight)) best = it;
            if (best == model.end()) break;
            room -= best->weight;
            expect.push_back(best->seq_id);
            model.erase(best);
          }
        }
        std::vector<PendingItem> bin;
        s.select_bin(max_seqs, bin);
        std::vector<int64_t> got;
        for (const auto& it : bin) got.push_back(it.seq_id);
        CHECK(got == expect);
      }
      CHECK(s.size() == model.size());
    }
  }
}

TEST(pack_offline_exactly_once_within_budget_and_age_bound) {
  std::mt19937 rng_engine(99);
  auto rng = [&] { return static_cast<uint32_t>(rng_engine()); };
  std::vector<uint32_t> lengths(5000);
  for (auto& l : lengths) l = 1 + rng() % 4000;
  const uint32_t budget = 8192, reserve = 64;
  const auto bin_of = ribbon::pack_offline(lengths, budget, reserve, 32);
  std::map<int64_t, uint64_t> weight;
  std::map<int64_t, int> count;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    CHECK(bin_of[i] >= 0);
    CHECK(bin_of[i] <= static_cast<int64_t>(i));  // sequence i is out within i + 1 bins
    weight[bin_of[i]] += lengths[i] + reserve;
    count[bin_of[i]]++;
  }
  for (const auto& [bin, w] : weight) CHECK(w <= budget);
  for (const auto& [bin, n] : count) CHECK(n <= 32);
  const uint64_t total = std::accumulate(lengths.begin(), lengths.end(), uint64_t{0}) +
                         uint64_t{reserve} * lengths.size();
  CHECK(weight.size() <= (total + budget - 1) / budget * 102 / 100 + 1);
}
