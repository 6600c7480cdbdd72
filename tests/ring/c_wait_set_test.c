/* c_wait_set_test: the C ABI's wait sets (include/ringcast/ringcast.h),
 * compiled as C11: membership and its errors, a wait that times out, one that
 * reports every ready member, and the notify fd turning readable and being
 * re-armed. Prints each failed check and exits 1 if any failed. */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <stdio.h>

#include "ringcast/ringcast.h"

static int failures = 0;

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                       \
    }                                                                   \
  } while (0)

static bool readable(int fd, int timeout_ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

int main(void) {
  ringcast_ring* rings[3] = {NULL, NULL, NULL};
  uint32_t ids[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    CHECK(ringcast_create_anonymous(64, NULL, &rings[i]) == RINGCAST_OK);
    CHECK(ringcast_register(rings[i], RINGCAST_START_LATEST, &ids[i]) == RINGCAST_OK);
  }
  ringcast_wait_set* set = NULL;
  CHECK(ringcast_wait_set_create(&set) == RINGCAST_OK);
  size_t member = 99;
  CHECK(ringcast_wait_set_add(set, rings[0], 7, &member) == RINGCAST_INVALID_CONSUMER);
  CHECK(ringcast_wait_set_add(set, NULL, 0, &member) == RINGCAST_INVALID_ARGUMENT);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(ringcast_wait_set_add(set, rings[i], ids[i], &member) == RINGCAST_OK);
    CHECK(member == i);
  }
  CHECK(ringcast_wait_set_remove(set, 5) == RINGCAST_INVALID_CONSUMER);

  size_t ready[3] = {0, 0, 0};
  size_t count = 9;
  CHECK(ringcast_wait_set_wait(set, ready, 3, &count, 1000000) == RINGCAST_TIMED_OUT);
  CHECK(count == 0);
  CHECK(ringcast_wait_set_wait(set, NULL, 3, &count, 0) == RINGCAST_INVALID_ARGUMENT);
  CHECK(ringcast_try_push(rings[1], "a", 1) == RINGCAST_OK);
  CHECK(ringcast_try_push(rings[2], "b", 1) == RINGCAST_OK);
  CHECK(ringcast_wait_set_ready(set, 1) && !ringcast_wait_set_ready(set, 0));
  CHECK(ringcast_wait_set_wait(set, ready, 3, &count, 60000000000ULL) == RINGCAST_OK);
  CHECK(count == 2 && ready[0] == 1 && ready[1] == 2);

  int fd = -1;
  CHECK(ringcast_wait_set_notify_fd(set, &fd) == RINGCAST_OK);
  CHECK(fd >= 0 && readable(fd, 60000));
  char buffer[64];
  CHECK(ringcast_try_recv(rings[1], ids[1], buffer, sizeof buffer).status == RINGCAST_OK);
  CHECK(ringcast_try_recv(rings[2], ids[2], buffer, sizeof buffer).status == RINGCAST_OK);
  ringcast_wait_set_arm(set);
  CHECK(!readable(fd, 20));
  CHECK(ringcast_try_push(rings[0], "c", 1) == RINGCAST_OK);
  CHECK(readable(fd, 60000));

  ringcast_wait_set_close(set);
  ringcast_wait_set_close(NULL);
  for (int i = 0; i < 3; ++i) ringcast_close(rings[i]);
  if (failures != 0) {
    fprintf(stderr, "c_wait_set_test: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_wait_set_test: all checks passed\n");
  return 0;
}
