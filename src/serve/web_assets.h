// The web page `orion serve` shows at / (serve/web/index.html, built into the binary by CMake:
// nothing is fetched from elsewhere at run time).
#pragma once
#include <string_view>

namespace orion::serve {

std::string_view web_index_html();

}  // namespace orion::serve
