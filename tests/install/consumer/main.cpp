// A minimal application built against the installed ringcast package.
#include <ringcast/broadcast_ring.hpp>

#include <cstdio>
#include <cstring>

int main() {
  auto ring = ringcast::BroadcastRing::create_anonymous(8);
  if (!ring) return 1;
  auto id = ring->register_consumer();
  const char text[] = "installed";
  if (ring->try_push(std::as_bytes(std::span(text, sizeof text - 1))) != ringcast::Errc::ok) return 2;
  std::array<std::byte, ringcast::kMaxPayload> buf{};
  const ringcast::RecvResult r = ring->try_recv(*id, buf);
  if (!r || r.length != 9 || std::memcmp(buf.data(), text, 9) != 0) return 3;
  std::puts("consumer: received 'installed' through the installed package");
  return 0;
}
