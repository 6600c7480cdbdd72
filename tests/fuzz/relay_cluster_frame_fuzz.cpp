// libFuzzer target for what a cluster node takes in from NATS
// (src/relay/cluster_frame.hpp): any bytes are one frame, a bundle of
// frames, or refused, without a crash or a read past them; and every frame
// taken from them, bundled again, is taken back the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "relay/cluster_frame.hpp"

namespace {

using ringcast::relay::ClusterFrame;

bool same(const ClusterFrame& a, const ClusterFrame& b) {
  return a.shard == b.shard && a.qos == b.qos && a.origin == b.origin && a.seq == b.seq && a.channel == b.channel &&
         a.message_id == b.message_id && a.payload == b.payload && a.chunk == b.chunk && a.more == b.more;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::vector<ClusterFrame> whole;  // a bundle carries whole frames only
  (void)ringcast::relay::for_each_cluster_frame(bytes, [&whole](const ClusterFrame& f) {
    if (!f.more && f.chunk == 0) whole.push_back(f);
  });
  std::string again;
  ringcast::relay::begin_cluster_bundle(again);
  for (const ClusterFrame& f : whole) ringcast::relay::append_to_cluster_bundle(f, again);
  std::size_t i = 0;
  const bool ok = ringcast::relay::for_each_cluster_frame(again, [&](const ClusterFrame& f) {
    if (i >= whole.size() || !same(f, whole[i])) std::abort();
    ++i;
  });
  if (!ok || i != whole.size()) std::abort();
  return 0;
}
