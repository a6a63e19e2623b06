#include "pack_offline.hpp"

#include "pending_set.hpp"

namespace ribbon {

std::vector<int64_t> pack_offline(const std::vector<uint32_t>& lengths, uint32_t budget,
                                  uint32_t reserve_per_seq, uint32_t max_seqs) {
  PendingSet set(budget, reserve_per_seq);
  for (std::size_t i = 0; i < lengths.size(); ++i)
    set.add(static_cast<int64_t>(i), 0, lengths[i], {}, static_cast<double>(i));
  std::vector<int64_t> bin_of(lengths.size(), -1);
  std::vector<PendingItem> items;
  for (int64_t bin = 0; set.size() > 0; ++bin) {
    items.clear();
    set.select_bin(max_seqs, items);
    for (const PendingItem& it : items) bin_of[static_cast<std::size_t>(it.seq_id)] = bin;
  }
  return bin_of;
}

}  // namespace ribbon
