#include <cmath>

#include <fmt/format.h>

#include "ringcast/broker/metrics.hpp"

namespace ringcast::broker {

void PrometheusWriter::header(std::string_view name, std::string_view help, MetricType type) {
  out_ +=
      fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type == MetricType::kCounter ? "counter" : "gauge");
}

void PrometheusWriter::sample(std::string_view name, const MetricLabels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out_ += ',';
      out_ += fmt::format("{}=\"{}\"", labels[i].first, escape(labels[i].second));
    }
    out_ += '}';
  }
  // Integers print exactly (counters up to 2^53); no exponent for typical values.
  if (value == std::floor(value) && std::fabs(value) < 9.0e15) {
    out_ += fmt::format(" {}\n", static_cast<long long>(value));
  } else {
    out_ += fmt::format(" {}\n", value);
  }
}

void PrometheusWriter::metric(std::string_view name, std::string_view help, MetricType type, double value) {
  header(name, help, type);
  sample(name, {}, value);
}

std::string PrometheusWriter::escape(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace ringcast::broker
