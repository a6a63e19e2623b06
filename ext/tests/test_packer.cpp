// Tests of the threaded packer with real threads (no timing assertions).
#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "check.hpp"
#include "packer.hpp"

using ribbon::Packer;
using ribbon::PackerConfig;
using ribbon::SlotBuffers;

namespace {

struct Ring {
  std::vector<std::vector<int32_t>> tokens, cu;
  std::vector<std::vector<int64_t>> ids;
  std::vector<SlotBuffers> slots(std::size_t n, std::size_t token_cap, std::size_t seq_cap) {
    std::vector<SlotBuffers> out;
    for (std::size_t i = 0; i < n; ++i) {
      tokens.emplace_back(token_cap, -1);
      cu.emplace_back(seq_cap + 1, -1);
      ids.emplace_back(seq_cap, -1);
    }
    for (std::size_t i = 0; i < n; ++i)
      out.push_back({tokens[i].data(), token_cap, cu[i].data(), ids[i].data(), seq_cap});
    return out;
  }
};

PackerConfig small_config() {
  PackerConfig c;
  c.budget = 100;
  c.reserve_per_seq = 4;
  c.max_seqs = 8;
  c.alignment = 16;
  c.pad_token = -7;
  c.efficient_tokens = 1;  // release as soon as anything is pending
  return c;
}

}  // namespace

TEST(packer_checks_slot_sizes) {
  Ring ring;
  CHECK_THROWS(Packer(small_config(), ring.slots(2, 100, 8)), std::invalid_argument);  // < 112
  CHECK_THROWS(Packer(small_config(), ring.slots(2, 112, 7)), std::invalid_argument);
  CHECK_THROWS(Packer(small_config(), {}), std::invalid_argument);
}

TEST(packer_writes_ribbon_cu_seqlens_and_pads_the_end) {
  Ring ring;
  Packer p(small_config(), ring.slots(2, 112, 8));
  p.submit(11, 0, {1, 2, 3});
  p.submit(12, 0, {4, 5});
  // Both are pending before the consumer asks, so one bin holds both.
  const auto bin = p.next_bin(5.0);
  CHECK(bin.has_value());
  if (!bin) return;
  CHECK(bin->num_seqs == 2 && bin->num_tokens == 5 && bin->padded_tokens == 16);
  CHECK(bin->max_seqlen == 3 && bin->weight == 13);
  const auto& t = ring.tokens[bin->slot];
  const auto& cu = ring.cu[bin->slot];
  const auto& ids = ring.ids[bin->slot];
  CHECK(ids[0] == 11 && ids[1] == 12);  // oldest first
  CHECK(cu[0] == 0 && cu[1] == 3 && cu[2] == 5);
  CHECK(t[0] == 1 && t[2] == 3 && t[3] == 4 && t[4] == 5);
  for (int i = 5; i < 16; ++i) CHECK(t[static_cast<std::size_t>(i)] == -7);
  CHECK(t[16] == -1);  // nothing written past the padded ribbon
  p.release(bin->slot);
  CHECK_THROWS(p.release(bin->slot), std::invalid_argument);
}

TEST(packer_refuses_overweight_and_never_truncates) {
  Ring ring;
  Packer p(small_config(), ring.slots(2, 112, 8));
  CHECK_THROWS(p.submit(1, 0, std::vector<int32_t>(97, 1)), std::invalid_argument);
  CHECK_THROWS(p.submit(1, 0, std::vector<int32_t>(101, 1)), std::invalid_argument);
  CHECK(p.stats().pending_seqs == 0);
}

TEST(packer_waits_for_a_free_slot_instead_of_allocating) {
  Ring ring;
  Packer p(small_config(), ring.slots(2, 112, 8));
  for (int i = 0; i < 3; ++i) p.submit(i, 0, std::vector<int32_t>(90, i));
  const auto a = p.next_bin(5.0);
  const auto b = p.next_bin(5.0);
  CHECK(a && b);
  CHECK(!p.next_bin(0.05).has_value());  // both slots handed out
  CHECK(p.stats().pending_seqs == 1);
  p.release(a->slot);
  const auto c = p.next_bin(5.0);
  CHECK(c && c->slot == a->slot);
}

TEST(packer_close_wakes_a_blocked_consumer) {
  Ring ring;
  Packer p(small_config(), ring.slots(2, 112, 8));
  std::atomic<bool> returned{false};
  std::thread consumer([&] {
    const auto bin = p.next_bin(1e9);
    CHECK(!bin.has_value());
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  p.close();
  consumer.join();
  CHECK(returned.load());
  CHECK_THROWS(p.submit(1, 0, {1}), std::runtime_error);
  CHECK(!p.next_bin(0.0).has_value());
}

TEST(packer_cancel_drops_pending_of_a_key) {
  Ring ring;
  Packer p(small_config(), ring.slots(2, 112, 8));
  p.submit(1, 5, {1, 2});
  p.submit(2, 6, {3});
  p.submit(3, 5, {4});
  CHECK(p.pending_tokens(5) == 3);
  CHECK((p.cancel(5) == std::vector<int64_t>{1, 3}));
  CHECK(p.pending_tokens(5) == 0);
  const auto bin = p.next_bin(5.0);
  CHECK(bin && bin->num_seqs == 1 && ring.ids[bin->slot][0] == 2);
}

TEST(packer_many_threads_every_sequence_once) {
  Ring ring;
  PackerConfig c = small_config();
  c.efficient_tokens = 60;
  c.max_wait_s = 0.001;
  Packer p(c, ring.slots(3, 112, 8));
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t)
    producers.emplace_back([&p, t] {
      for (int i = 0; i < kEach; ++i) {
        const int id = t * kEach + i;
        p.submit(id, t, std::vector<int32_t>(static_cast<std::size_t>(1 + id % 50), id));
      }
    });
  std::vector<int> seen(kThreads * kEach, 0);
  int got = 0;
  while (got < kThreads * kEach) {
    const auto bin = p.next_bin(5.0);
    CHECK(bin.has_value());
    if (!bin) break;
    CHECK(bin->weight <= 100);
    const auto& cu = ring.cu[bin->slot];
    for (uint32_t i = 0; i < bin->num_seqs; ++i) {
      const auto id = ring.ids[bin->slot][i];
      seen[static_cast<std::size_t>(id)]++;
      CHECK(cu[i + 1] - cu[i] == 1 + id % 50);
      CHECK(ring.tokens[bin->slot][static_cast<std::size_t>(cu[i])] == id);
      ++got;
    }
    p.release(bin->slot);
  }
  for (auto& t : producers) t.join();
  for (const int n : seen) CHECK(n == 1);
  CHECK(p.stats().bins_emitted > 0 && p.stats().pending_seqs == 0);
}
