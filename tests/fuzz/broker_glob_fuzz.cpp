// libFuzzer target for glob matching (src/broker/util/glob.hpp): byte 0 splits
// the input into a pattern and a string. Any bytes match without a crash or
// deep recursion, and where both are short enough for Redis's recursive
// matcher (tests/broker/glob_oracle.hpp), the answer is Redis's.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "broker/util/glob.hpp"
#include "glob_oracle.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::size_t cut = rest.empty() ? 0 : data[0] % (rest.size() + 1);
  const std::string_view pattern = rest.substr(0, cut);
  const std::string_view str = rest.substr(cut);
  const bool matched = ringcast::broker::glob_match(pattern, str);
  // The oracle recurses once per star: keep it shallow.
  constexpr std::size_t kOracleMax = 64;
  if (pattern.size() <= kOracleMax && str.size() <= kOracleMax &&
      matched != ringcast::broker::testing::glob_oracle(pattern, str)) {
    std::abort();
  }
  return 0;
}
