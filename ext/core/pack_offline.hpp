#pragma once
// Packs a whole list of lengths at once with the packer's own selection step
// (benchmarks and tests: same bins the threaded packer forms from this queue).
#include <cstdint>
#include <vector>

namespace ribbon {

// Returns, for each sequence (in input order), the index of its bin.
// window == 0: everything is pending at once. window > 0: streaming, as the
// packer runs: sequences arrive in order until the pending weight reaches
// `window`, then one bin is formed, and so on.
// Throws invalid_argument for a length of 0 or one that overweighs the budget.
std::vector<int64_t> pack_offline(const std::vector<uint32_t>& lengths, uint32_t budget,
                                  uint32_t reserve_per_seq, uint32_t max_seqs,
                                  uint64_t window = 0);

}  // namespace ribbon
