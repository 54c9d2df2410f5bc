#include "model/tokenizer/tokenizer.h"

namespace orion {

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string s;
  int prev = -1;
  for (int id : ids) {
    s += decode_token(prev, id);
    prev = id;
  }
  return s;
}

}  // namespace orion
