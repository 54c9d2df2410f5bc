// Pretokenized data on disk (DESIGN.md §5), read through a memory map and written crash-safely.
//
//   llama2.c shard  raw little-endian uint16 token ids, nothing else; documents follow each other,
//                   each starting with BOS (id 1), so BOS is the sequence separator.
//   llm.c file      a 1024-byte header of 256 int32: [0] magic 20240520, [1] version 1 (uint16
//                   tokens), [2] token count, the rest 0; then `count` uint16 tokens. Documents are
//                   separated by GPT-2's <|endoftext|> (50256), which starts each one.
//
// open_token_file() tells the two apart by the magic: a raw shard cannot start with it, since its
// first uint16 would be 55432 — above every vocabulary a llama2.c shard is made with (and GPT-2's).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/file.h"

namespace orion::data {

enum class TokenFormat { Llama2c, Llmc };
const char* token_format_name(TokenFormat f);  // "llama2c", "llmc"

constexpr int32_t kLlmcMagic = 20240520;
constexpr int32_t kLlmcVersion = 1;
constexpr size_t kLlmcHeaderBytes = 256 * sizeof(int32_t);

// A mapped token file. The tokens stay valid while the TokenFile (or a copy) lives.
struct TokenFile {
  std::string path;
  TokenFormat format = TokenFormat::Llama2c;
  std::shared_ptr<MappedFile> map;
  const uint16_t* tokens = nullptr;
  size_t count = 0;
  size_t data_offset = 0;  // byte offset of token 0 in the file (errors name file offsets)
};

// Opens and validates a token file: the header of an llm.c file (magic, version, a count that
// agrees with the size), an even number of bytes, and — when vocab_size > 0 — every id below it.
// Problems are Input errors naming the file, the byte offset and what was expected.
// `expect` (when given) also refuses the other format: an expected llm.c file whose magic is wrong
// is an error naming the magic found, instead of being read as a raw shard.
TokenFile open_token_file(const std::string& path, int vocab_size = -1, std::optional<TokenFormat> expect = {});

// Writes tokens in the given format with write_file_atomic.
void write_token_file(const std::string& path, const uint16_t* tokens, size_t count, TokenFormat format);
inline void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens, TokenFormat format) {
  write_token_file(path, tokens.data(), tokens.size(), format);
}

// The [begin, end) token ranges of the sequences of a stream whose sequences each start with
// `separator` (BOS 1 for llama2.c, <|endoftext|> for llm.c). Tokens before the first separator
// form a sequence of their own.
std::vector<std::pair<size_t, size_t>> split_sequences(const uint16_t* tokens, size_t count, int separator);

}  // namespace orion::data
