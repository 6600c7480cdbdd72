// Prometheus text exposition format 0.0.4 writer: HELP/TYPE headers, samples
// with escaped label values. Not on any hot path (one /metrics scrape).
//
// Thread safety: a value type; one writer per instance.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringcast::relay {

using Labels = std::vector<std::pair<std::string, std::string>>;

class PrometheusWriter {
 public:
  void header(std::string_view name, std::string_view help, std::string_view type);
  void sample(std::string_view name, const Labels& labels, double value);
  [[nodiscard]] std::string take() { return std::move(out_); }

  // Escapes '\\', '"' and newline as the format requires for label values.
  [[nodiscard]] static std::string escape(std::string_view value);

 private:
  std::string out_;
};

}  // namespace ringcast::relay
