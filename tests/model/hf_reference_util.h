// The tiny random Hugging Face checkpoints of tests/model/hf_reference/make_tiny_hf_models.py
// (llama3, smollm2, qwen2, qwen3, mistral, …), made once per test program with Debian's python3.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

#include "support.h"

namespace orion::test {

inline constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with python3-numpy

// The folder holding one sub-folder per case; "" with the reason in *why_not when it cannot be made.
inline const std::string& hf_reference_dir(std::string* why_not) {
  static std::string dir, reason;
  static bool made = false;
  if (!made) {
    made = true;
    if (!std::filesystem::exists(kPython)) {
      reason = "no /usr/bin/python3 (install python3 and python3-numpy)";
    } else if (std::system((std::string(kPython) + " -c 'import numpy' 2>/dev/null").c_str()) != 0) {
      reason = "/usr/bin/python3 cannot import numpy (install python3-numpy)";
    } else {
      const std::string out = temp_dir() + "/hf_reference";
      const std::string script = data_path("../model/hf_reference/make_tiny_hf_models.py");
      if (std::system((std::string(kPython) + " " + script + " " + out).c_str()) == 0) dir = out;
      else reason = "make_tiny_hf_models.py failed";
    }
  }
  *why_not = reason;
  return dir;
}

}  // namespace orion::test
