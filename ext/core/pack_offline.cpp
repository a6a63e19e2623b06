#include "pack_offline.hpp"

#include "pending_set.hpp"

namespace ribbon {

std::vector<int64_t> pack_offline(const std::vector<uint32_t>& lengths, uint32_t budget,
                                  uint32_t reserve_per_seq, uint32_t max_seqs,
                                  uint64_t window) {
  PendingSet set(budget, reserve_per_seq);
  std::size_t next = 0;
  auto arrive = [&] {
    set.add(static_cast<int64_t>(next), 0, lengths[next], {}, static_cast<double>(next));
    ++next;
  };
  if (window == 0)
    while (next < lengths.size()) arrive();
  std::vector<int64_t> bin_of(lengths.size(), -1);
  std::vector<PendingItem> items;
  for (int64_t bin = 0; set.size() > 0 || next < lengths.size(); ++bin) {
    while (next < lengths.size() && static_cast<uint64_t>(set.weight()) < window) arrive();
    items.clear();
    set.select_bin(max_seqs, items);
    for (const PendingItem& it : items) bin_of[static_cast<std::size_t>(it.seq_id)] = bin;
  }
  return bin_of;
}

}  // namespace ribbon
