/* A minimal C application built against the installed C ABI (pkg-config ringcast-c). */
#include <ringcast/ringcast.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  ringcast_ring* ring = NULL;
  if (ringcast_create_anonymous(8, NULL, &ring) != RINGCAST_OK) return 1;
  uint32_t id = 0;
  if (ringcast_register(ring, RINGCAST_START_LATEST, &id) != RINGCAST_OK) return 2;
  if (ringcast_try_push(ring, "installed", 9) != RINGCAST_OK) return 3;
  char buffer[RINGCAST_MAX_INLINE_PAYLOAD];
  const ringcast_recv_result r = ringcast_try_recv(ring, id, buffer, sizeof buffer);
  if (r.status != RINGCAST_OK || r.length != 9 || memcmp(buffer, "installed", 9) != 0) return 4;
  ringcast_close(ring);
  puts("c consumer: received 'installed' through the installed C ABI");
  return 0;
}
