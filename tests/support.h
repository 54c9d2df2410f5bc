// Helpers shared by the tests: paths to test data and to ../shared, temporary folders, running the
// orion binary.
#pragma once
#include <string>

namespace orion::test {

std::string data_path(const std::string& rel);  // tests/data/<rel>
// ../shared/<rel>, or "" when ../shared is absent (callers GTEST_SKIP with the reason).
std::string shared_path(const std::string& rel);
// A fresh empty folder under the system temp dir, removed at process exit.
std::string temp_dir();
// Runs the orion binary with args (a shell-quoted string); returns the exit code and fills out/err.
int run_orion(const std::string& args, std::string* out = nullptr, std::string* err = nullptr);

}  // namespace orion::test
