#include "relay/sinks/jetstream_sink.hpp"

#include "relay/jetstream_publisher.hpp"
#include "ringcast/relay/topic.hpp"

namespace ringcast::relay {

JetStreamSink::JetStreamSink(const RingRoute& route, JetStreamPublisher& publisher, const std::atomic<bool>& stop)
    : publisher_(publisher), stop_(stop), topic_in_payload_(route.topic_in_payload) {}

void JetStreamSink::put(const Staged& m) noexcept {
  // A topic is checked here, because the server would close the connection on
  // an invalid subject (a fixed subject was validated at start).
  const bool subject_ok = !topic_in_payload_ || is_valid_subject(m.channel);
  if (subject_ok && publisher_.publish(m.subject, m.body, source_.c_str(), m.seq, stop_, m.from)) {
    ++counters_.nats_published;
  } else {
    ++counters_.nats_failed;
  }
}

}  // namespace ringcast::relay
