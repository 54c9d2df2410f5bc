// The merge loop every BPE tokenizer shares: start from one symbol per character (or byte), then
// repeatedly merge the adjacent pair with the lowest rank into the token the merge names, until no
// adjacent pair is a merge. GPT-2 (gpt2_bpe) and Hugging Face tokenizer.json BPE (hf_tokenizer)
// both call it.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace orion {

struct BpeMerge {
  int rank;    // the merge's position in the merges list: lower merges first
  int result;  // the id of the merged token
};
// (left id, right id) → merge; see bpe_pair_key.
using BpeMergeTable = std::unordered_map<uint64_t, BpeMerge>;

inline uint64_t bpe_pair_key(int a, int b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// The table of merges listed as token pairs in rank order; ids maps each token to its id. A merge
// whose left, right or merged token is missing from ids calls missing(rank, token), which throws
// the reader's error. A pair listed twice keeps its first (lowest) rank.
BpeMergeTable build_merge_table(const std::vector<std::array<std::string, 2>>& merges,
                                const std::unordered_map<std::string, int>& ids,
                                const std::function<void(size_t, const std::string&)>& missing);

// Merges ids in place. Ids that no merge names (for example a placeholder for an unknown
// character) simply never merge.
void bpe_merge(std::vector<int>& ids, const BpeMergeTable& merges);

}  // namespace orion
