// JSON helpers the tokenizer file readers share (gpt2_bpe_files.cpp, hf_tokenizer_json.cpp).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace orion {

// Parses a JSON file; an empty or malformed file is an Input error naming it (and the byte).
nlohmann::json parse_json_file(const std::string& path);

// {"token": id, ...} → (token, id) pairs; field names the object in errors.
std::vector<std::pair<std::string, int>> read_vocab_object(const nlohmann::json& obj, const std::string& path,
                                                           const std::string& field);

}  // namespace orion
