// Prometheus text exposition (format 0.0.4) for the broker and whatever embeds
// it: one writer that every series goes through, and the hook through which an
// embedder (the relay) appends its own series to Broker::metrics_text().
//
// Thread safety: PrometheusWriter is a value type; one thread per instance.
// Not on any hot path: one /metrics scrape allocates its text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringcast::broker {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType : std::uint8_t { kCounter, kGauge };

// Writes one metric family at a time: header(), then its samples. Names must
// match [a-zA-Z_:][a-zA-Z0-9_:]*; label values are escaped here.
class PrometheusWriter {
 public:
  // "# HELP name help" and "# TYPE name counter|gauge". Call once per family,
  // before its samples.
  void header(std::string_view name, std::string_view help, MetricType type);
  // "name{k="v",...} value". Integral values up to 9e15 print exactly.
  void sample(std::string_view name, const MetricLabels& labels, double value);
  // header() and one unlabelled sample: a family with a single series.
  void metric(std::string_view name, std::string_view help, MetricType type, double value);

  // The text written so far; the writer is empty afterwards.
  [[nodiscard]] std::string take() { return std::exchange(out_, {}); }

  // Escapes '\\', '"' and newline as the format requires for label values.
  [[nodiscard]] static std::string escape(std::string_view value);

 private:
  std::string out_;
};

// Appends an embedder's series to Broker::metrics_text(), after the broker's
// own. Runs on whichever thread asks for the text (a broker I/O thread serving
// GET /metrics, or the embedder's), outside the broker's locks; it must not
// call Broker::publish. Family names must not repeat the broker's
// (ringcast_broker_*).
using MetricsProvider = std::function<void(PrometheusWriter&)>;

}  // namespace ringcast::broker
