/* c_api_test: every function of the C ABI (include/ringcast/ringcast.h),
 * compiled as C11, with its errors. Deterministic and single-threaded, except
 * one forked child that dies holding a consumer entry (reaping).
 * Prints each failed check and exits 1 if any failed. */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ringcast/ringcast.h"

static int failures = 0;

#define CHECK(cond)                                                     \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "%s:%d: CHECK(%s)\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                       \
    }                                                                   \
  } while (0)
#define CHECK_STATUS(expr, want)                                                                               \
  do {                                                                                                         \
    const ringcast_status got_ = (expr);                                                                       \
    if (got_ != (want)) {                                                                                      \
      fprintf(stderr, "%s:%d: %s is %s, expected %s\n", __FILE__, __LINE__, #expr, ringcast_status_name(got_), \
              ringcast_status_name(want));                                                                     \
      ++failures;                                                                                              \
    }                                                                                                          \
  } while (0)

static char dir[64];

static const char* path_of(const char* name) {
  static char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return path;
}

/* A blocking ring file with room for messages of up to 200 bytes, and a
 * second handle on it (as another process would have). */
static ringcast_ring* make_ring(const char* name, uint64_t capacity, ringcast_ring** other) {
  ringcast_create_options o = {0};
  o.max_message = 200;
  ringcast_ring* ring = NULL;
  CHECK_STATUS(ringcast_create(path_of(name), capacity, &o, &ring), RINGCAST_OK);
  CHECK_STATUS(ringcast_open(path_of(name), NULL, other), RINGCAST_OK);
  return ring;
}

static ringcast_recv_result recv(ringcast_ring* ring, uint32_t id, char* buffer, size_t capacity) {
  return ringcast_try_recv(ring, id, buffer, capacity);
}

static void test_names_and_messages(void) {
  CHECK(strcmp(ringcast_status_name(RINGCAST_OK), "ok") == 0);
  CHECK(strcmp(ringcast_status_name(RINGCAST_FULL), "full") == 0);
  CHECK(strcmp(ringcast_status_name(RINGCAST_BUFFER_TOO_SMALL), "buffer_too_small") == 0);
  CHECK(strcmp(ringcast_status_name(RINGCAST_INVALID_ARGUMENT), "invalid_argument") == 0);
  CHECK(strcmp(ringcast_status_name(RINGCAST_OUT_OF_MEMORY), "out_of_memory") == 0);
  CHECK(strcmp(ringcast_status_name(RINGCAST_CANCELLED), "cancelled") == 0);
  CHECK(strcmp(ringcast_status_name((ringcast_status)40), "unknown") == 0);
  CHECK(strcmp(ringcast_status_name((ringcast_status)-1), "unknown") == 0);
  CHECK(strcmp(ringcast_status_name((ringcast_status)1000), "unknown") == 0);
  CHECK(strcmp(ringcast_last_error_message(), "") == 0);
}

static void test_setup_errors(void) {
  ringcast_ring* ring = NULL;
  CHECK_STATUS(ringcast_create(NULL, 8, NULL, &ring), RINGCAST_INVALID_ARGUMENT);
  CHECK(strstr(ringcast_last_error_message(), "NULL") != NULL);
  CHECK_STATUS(ringcast_create(path_of("x"), 8, NULL, NULL), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(ringcast_create_anonymous(8, NULL, NULL), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(ringcast_open(NULL, NULL, &ring), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(ringcast_create("/nonexistent-dir/ring", 8, NULL, &ring), RINGCAST_IO_ERROR);
  CHECK(strstr(ringcast_last_error_message(), "io_error") != NULL);
  CHECK(strstr(ringcast_last_error_message(), "No such file") != NULL);
  CHECK_STATUS(ringcast_open(path_of("missing"), NULL, &ring), RINGCAST_IO_ERROR);
  CHECK(ring == NULL);

  ringcast_create_options big = {0};
  big.max_message = 4096;
  CHECK_STATUS(ringcast_create(path_of("small"), 8, &big, &ring), RINGCAST_PAYLOAD_TOO_LARGE);

  CHECK_STATUS(ringcast_create(path_of("exists"), 8, NULL, &ring), RINGCAST_OK);
  ringcast_ring* again = NULL;
  CHECK_STATUS(ringcast_create(path_of("exists"), 8, NULL, &again), RINGCAST_ALREADY_EXISTS);
  ringcast_create_options replace = {0};
  replace.replace = true;
  replace.no_producer = true;
  CHECK_STATUS(ringcast_create(path_of("exists"), 16, &replace, &again), RINGCAST_OK);
  CHECK(!ringcast_is_producer(again));
  ringcast_open_options want = {0};
  want.expected_capacity = 8;
  ringcast_ring* opened = NULL;
  CHECK_STATUS(ringcast_open(path_of("exists"), &want, &opened), RINGCAST_LAYOUT_MISMATCH);
  CHECK(strstr(ringcast_last_error_message(), "found 16, expected 8") != NULL);
  want.expected_capacity = 16;
  want.read_only = true;
  CHECK_STATUS(ringcast_open(path_of("exists"), &want, &opened), RINGCAST_OK);
  CHECK(ringcast_capacity(opened) == 16);
  ringcast_close(opened);
  /* A reader with read-only slots opens, and cannot produce. */
  ringcast_open_options reader = {0};
  reader.read_only_slots = true;
  CHECK_STATUS(ringcast_open(path_of("exists"), &reader, &opened), RINGCAST_OK);
  CHECK_STATUS(ringcast_claim_producer(opened), RINGCAST_NOT_PRODUCER);
  CHECK(strstr(ringcast_last_error_message(), "read-only slots") != NULL);
  ringcast_close(opened);
  /* A ring with separate slots: its slots file is made beside it. */
  ringcast_create_options split = {0};
  split.separate_slots = true;
  CHECK_STATUS(ringcast_create(path_of("split"), 8, &split, &opened), RINGCAST_OK);
  char slots[512];
  snprintf(slots, sizeof slots, "%s.slots", path_of("split"));
  CHECK(access(slots, R_OK) == 0);
  ringcast_close(opened);
  ringcast_close(again);
  ringcast_close(ring);
  ringcast_close(NULL); /* a no-op */

  /* A file that is not a ring. */
  const int fd = open(path_of("garbage"), O_CREAT | O_WRONLY, 0600);
  CHECK(fd >= 0);
  char junk[8192];
  memset(junk, 'j', sizeof junk);
  CHECK(write(fd, junk, sizeof junk) == (ssize_t)sizeof junk);
  close(fd);
  CHECK_STATUS(ringcast_open(path_of("garbage"), NULL, &ring), RINGCAST_LAYOUT_MISMATCH);
}

static void test_push_and_receive(void) {
  ringcast_ring* consumer = NULL;
  ringcast_ring* producer = make_ring("push", 8, &consumer);
  CHECK(ringcast_is_producer(producer));
  CHECK(!ringcast_is_lossy(producer));
  CHECK(ringcast_capacity(consumer) == 8);
  CHECK(ringcast_max_message(consumer) == 200);
  uint32_t id = 99;
  CHECK_STATUS(ringcast_register(consumer, RINGCAST_START_LATEST, &id), RINGCAST_OK);
  CHECK(id < RINGCAST_MAX_CONSUMERS);
  CHECK(ringcast_active_consumer_count(producer) == 1);

  char buffer[256];
  ringcast_recv_result r = recv(consumer, id, buffer, sizeof buffer);
  CHECK_STATUS(r.status, RINGCAST_EMPTY);
  CHECK_STATUS(ringcast_try_push(producer, "hello", 5), RINGCAST_OK);
  CHECK(ringcast_lag(producer, id) == 1);
  CHECK(ringcast_producer_position(consumer) == 1);
  CHECK(!ringcast_is_fully_drained(producer));
  r = recv(consumer, id, buffer, sizeof buffer);
  CHECK_STATUS(r.status, RINGCAST_OK);
  CHECK(r.length == 5 && memcmp(buffer, "hello", 5) == 0);
  CHECK(ringcast_lag(producer, id) == 0);
  CHECK(ringcast_is_fully_drained(producer));

  /* The native hot path's view: the mapping and the handle's own state. */
  ringcast_native native;
  CHECK_STATUS(ringcast_native_state(producer, NULL), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(ringcast_native_state(producer, &native), RINGCAST_OK);
  CHECK(native.layout_version == RINGCAST_LAYOUT_VERSION && native.capacity == 8 && native.max_message == 200);
  CHECK(native.header != NULL && native.slots != NULL && *native.is_producer && *native.seq == 1 && !*native.fenced);
  uint64_t seq_word;
  memcpy(&seq_word, (const char*)native.header + RINGCAST_LAYOUT_PRODUCER_SEQ, sizeof seq_word);
  CHECK(seq_word == ringcast_producer_position(producer));
  ringcast_native_wake_consumers(producer); /* nobody sleeps: nothing to wake, but fenced mode begins */
  CHECK(*native.fenced);
  ringcast_native_wake_producer(consumer);

  /* A record (more than 52 bytes): too small a buffer consumes nothing. */
  char record[200];
  for (size_t i = 0; i < sizeof record; ++i) record[i] = (char)('a' + i % 26);
  CHECK_STATUS(ringcast_try_push(producer, record, 100), RINGCAST_OK);
  r = recv(consumer, id, buffer, RINGCAST_MAX_INLINE_PAYLOAD);
  CHECK_STATUS(r.status, RINGCAST_BUFFER_TOO_SMALL);
  CHECK(r.length == 100);
  r = recv(consumer, id, buffer, sizeof buffer);
  CHECK_STATUS(r.status, RINGCAST_OK);
  CHECK(r.length == 100 && memcmp(buffer, record, 100) == 0);
  CHECK_STATUS(ringcast_try_push(producer, record, 201), RINGCAST_PAYLOAD_TOO_LARGE);
  CHECK_STATUS(ringcast_try_push(producer, NULL, 0), RINGCAST_OK);
  r = recv(consumer, id, buffer, sizeof buffer);
  CHECK_STATUS(r.status, RINGCAST_OK);
  CHECK(r.length == 0);

  /* A batch of three, the middle one a record, then one stopped by a message
   * too long. */
  char batch[3 + 100];
  memcpy(batch, "ab", 2);
  memcpy(batch + 2, record, 100);
  batch[102] = 'c';
  const uint32_t lengths[] = {2, 100, 1, 201};
  ringcast_batch_result pushed = ringcast_try_push_batch(producer, batch, lengths, 3);
  CHECK(pushed.status == RINGCAST_OK && pushed.count == 3);
  r = recv(consumer, id, buffer, sizeof buffer);
  CHECK(r.status == RINGCAST_OK && r.length == 2 && memcmp(buffer, "ab", 2) == 0);
  r = recv(consumer, id, buffer, sizeof buffer);
  CHECK(r.status == RINGCAST_OK && r.length == 100 && memcmp(buffer, record, 100) == 0);
  r = recv(consumer, id, buffer, sizeof buffer);
  CHECK(r.status == RINGCAST_OK && r.length == 1 && buffer[0] == 'c');
  pushed = ringcast_try_push_batch(producer, record, lengths + 2, 2);
  CHECK_STATUS(pushed.status, RINGCAST_PAYLOAD_TOO_LARGE);
  CHECK(pushed.count == 1);
  CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_OK);
  CHECK_STATUS(ringcast_try_push_batch(producer, NULL, NULL, 2).status, RINGCAST_INVALID_ARGUMENT);
  pushed = ringcast_try_push_batch(producer, NULL, NULL, 0);
  CHECK(pushed.status == RINGCAST_OK && pushed.count == 0);

  /* Full: eight one-slot messages fill eight slots, and a batch stops there. */
  const uint32_t ones[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  pushed = ringcast_try_push_batch(producer, "mmmmmmmmmm", ones, 10);
  CHECK_STATUS(pushed.status, RINGCAST_FULL);
  CHECK(pushed.count == 8);
  CHECK_STATUS(ringcast_try_push(producer, "m", 1), RINGCAST_FULL);
  CHECK_STATUS(ringcast_push_wait(producer, "m", 1, 1000000, RINGCAST_IDLE_SPIN_THEN_BLOCK), RINGCAST_TIMED_OUT);
  CHECK_STATUS(ringcast_push_wait(producer, "m", 1, 1000000, RINGCAST_IDLE_BLOCK), RINGCAST_TIMED_OUT);
  r = recv(consumer, id, buffer, sizeof buffer);
  CHECK_STATUS(r.status, RINGCAST_OK);
  CHECK_STATUS(ringcast_push_wait(producer, "n", 1, 1000000, (ringcast_idle)99), RINGCAST_OK); /* the default */
  for (int i = 0; i < 8; ++i) CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_OK);
  CHECK(buffer[0] == 'n');

  /* recv_wait: a timeout, then a message. */
  r = ringcast_recv_wait(consumer, id, buffer, sizeof buffer, 1000000, RINGCAST_IDLE_SPIN_THEN_YIELD);
  CHECK_STATUS(r.status, RINGCAST_TIMED_OUT);
  CHECK_STATUS(ringcast_try_push(producer, "w", 1), RINGCAST_OK);
  r = ringcast_recv_wait(consumer, id, buffer, sizeof buffer, 1000000000, RINGCAST_IDLE_BLOCK);
  CHECK_STATUS(r.status, RINGCAST_OK);
  CHECK(r.length == 1 && buffer[0] == 'w');

  ringcast_ring_status status;
  CHECK_STATUS(ringcast_get_status(consumer, &status), RINGCAST_OK);
  CHECK(status.capacity == 8 && status.max_message == 200 && status.flags == 0);
  CHECK(status.producer_alive && status.producer_pid == (uint32_t)getpid());
  CHECK(status.producer_seq == ringcast_producer_position(producer));
  CHECK(status.consumers[id].active && status.consumers[id].owner_alive);
  CHECK(status.consumers[id].owner_pid == (uint32_t)getpid());
  CHECK(status.consumers[id].cursor == status.producer_seq && status.consumers[id].lag == 0);
  CHECK(status.messages == 17 && status.payload_bytes == 5 + 100 + 0 + 103 + 1 + 9 + 1);
  CHECK_STATUS(ringcast_get_status(consumer, NULL), RINGCAST_INVALID_ARGUMENT);

  CHECK_STATUS(ringcast_unregister(consumer, id), RINGCAST_OK);
  CHECK_STATUS(ringcast_unregister(consumer, id), RINGCAST_INVALID_CONSUMER);
  CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_INVALID_CONSUMER);
  CHECK(ringcast_lag(producer, id) == 0);
  CHECK(ringcast_active_consumer_count(producer) == 0);
  ringcast_close(consumer);
  ringcast_close(producer);
}

static void test_register(void) {
  ringcast_ring* consumer = NULL;
  ringcast_ring* producer = make_ring("register", 8, &consumer);
  for (char c = '0'; c < '3'; ++c) CHECK_STATUS(ringcast_try_push(producer, &c, 1), RINGCAST_OK);
  uint32_t oldest = 0;
  uint32_t latest = 0;
  CHECK_STATUS(ringcast_register(consumer, RINGCAST_START_OLDEST, &oldest), RINGCAST_OK);
  CHECK_STATUS(ringcast_register(consumer, RINGCAST_START_LATEST, &latest), RINGCAST_OK);
  char buffer[64];
  for (char c = '0'; c < '3'; ++c) {
    const ringcast_recv_result r = recv(consumer, oldest, buffer, sizeof buffer);
    CHECK_STATUS(r.status, RINGCAST_OK);
    CHECK(r.length == 1 && buffer[0] == c);
  }
  CHECK_STATUS(recv(consumer, latest, buffer, sizeof buffer).status, RINGCAST_EMPTY);
  CHECK_STATUS(ringcast_register(consumer, (ringcast_start_at)7, &latest), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(ringcast_register(consumer, (ringcast_start_at)-5, &latest), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(ringcast_register(consumer, RINGCAST_START_LATEST, NULL), RINGCAST_INVALID_ARGUMENT);
  /* An id registered through another handle is not this one's. */
  CHECK_STATUS(recv(producer, oldest, buffer, sizeof buffer).status, RINGCAST_INVALID_CONSUMER);
  CHECK_STATUS(ringcast_unregister(producer, oldest), RINGCAST_INVALID_CONSUMER);

  uint32_t id = 0;
  for (int i = 2; i < RINGCAST_MAX_CONSUMERS; ++i) CHECK_STATUS(ringcast_register(producer, 0, &id), RINGCAST_OK);
  CHECK_STATUS(ringcast_register(producer, RINGCAST_START_LATEST, &id), RINGCAST_NO_CONSUMER_SLOT);
  CHECK(strstr(ringcast_last_error_message(), "no_consumer_slot") != NULL);
  ringcast_close(consumer);
  ringcast_close(producer);
}

static void test_producer_role(void) {
  ringcast_ring* other = NULL;
  ringcast_ring* producer = make_ring("role", 8, &other);
  CHECK(!ringcast_is_producer(other));
  CHECK_STATUS(ringcast_claim_producer(other), RINGCAST_PRODUCER_BUSY);
  CHECK(strstr(ringcast_last_error_message(), "producer_busy") != NULL);
  CHECK_STATUS(ringcast_try_push(other, "x", 1), RINGCAST_PRODUCER_BUSY);
  ringcast_release_producer(producer);
  CHECK(!ringcast_is_producer(producer));
  CHECK_STATUS(ringcast_claim_producer(other), RINGCAST_OK);
  CHECK(ringcast_is_producer(other));
  CHECK_STATUS(ringcast_try_push(producer, "x", 1), RINGCAST_PRODUCER_BUSY);
  ringcast_close(other);
  ringcast_close(producer);
}

static void test_claims(void) {
  ringcast_ring* consumer = NULL;
  ringcast_ring* producer = make_ring("claim", 8, &consumer);
  uint32_t id = 0;
  CHECK_STATUS(ringcast_register(consumer, RINGCAST_START_LATEST, &id), RINGCAST_OK);
  char buffer[256];
  void* room = NULL;
  CHECK_STATUS(ringcast_commit(producer, 1), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(ringcast_abort(producer), RINGCAST_INVALID_ARGUMENT);

  CHECK_STATUS(ringcast_try_claim(producer, 120, &room), RINGCAST_OK);
  CHECK(room != NULL);
  void* second = NULL;
  CHECK_STATUS(ringcast_try_claim(producer, 10, &second), RINGCAST_INVALID_ARGUMENT);
  CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_EMPTY);
  memset(room, 'c', 120);
  CHECK_STATUS(ringcast_commit(producer, 70), RINGCAST_OK);
  ringcast_recv_result r = recv(consumer, id, buffer, sizeof buffer);
  CHECK_STATUS(r.status, RINGCAST_OK);
  CHECK(r.length == 70 && buffer[0] == 'c' && buffer[69] == 'c');
  CHECK_STATUS(ringcast_commit(producer, 1), RINGCAST_INVALID_ARGUMENT);

  CHECK_STATUS(ringcast_try_claim(producer, 3, &room), RINGCAST_OK);
  memcpy(room, "abc", 3);
  CHECK_STATUS(ringcast_abort(producer), RINGCAST_OK);
  CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_EMPTY);
  CHECK_STATUS(ringcast_try_claim(producer, 201, &room), RINGCAST_PAYLOAD_TOO_LARGE);

  for (int i = 0; i < 8; ++i) CHECK_STATUS(ringcast_try_push(producer, "f", 1), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_claim(producer, 1, &room), RINGCAST_FULL);
  CHECK_STATUS(ringcast_claim_wait(producer, 1, &room, 1000000, RINGCAST_IDLE_SPIN_THEN_BLOCK), RINGCAST_TIMED_OUT);
  CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_OK);
  CHECK_STATUS(ringcast_claim_wait(producer, 1, &room, 1000000, RINGCAST_IDLE_SPIN_THEN_BLOCK), RINGCAST_OK);
  CHECK_STATUS(ringcast_claim_wait(producer, 1, &second, 1000000, RINGCAST_IDLE_SPIN), RINGCAST_INVALID_ARGUMENT);
  *(char*)room = 'z';
  CHECK_STATUS(ringcast_commit(producer, 1), RINGCAST_OK);
  for (int i = 0; i < 8; ++i) CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_OK);
  CHECK(buffer[0] == 'z');

  /* Closing a handle with an open claim aborts it. */
  CHECK_STATUS(ringcast_try_claim(producer, 1, &room), RINGCAST_OK);
  ringcast_close(producer);
  CHECK_STATUS(recv(consumer, id, buffer, sizeof buffer).status, RINGCAST_EMPTY);
  ringcast_close(consumer);
}

static void test_views(void) {
  ringcast_ring* consumer = NULL;
  ringcast_ring* producer = make_ring("view", 8, &consumer);
  uint32_t id = 0;
  CHECK_STATUS(ringcast_register(consumer, RINGCAST_START_LATEST, &id), RINGCAST_OK);
  ringcast_view view;
  CHECK_STATUS(ringcast_try_view(consumer, id, &view), RINGCAST_EMPTY);
  CHECK_STATUS(ringcast_release_view(consumer, id), RINGCAST_INVALID_CONSUMER);
  char record[100];
  memset(record, 'v', sizeof record);
  CHECK_STATUS(ringcast_try_push(producer, record, sizeof record), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_push(producer, "next", 4), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_view(consumer, id, &view), RINGCAST_OK);
  CHECK(view.length == 100 && memcmp(view.data, record, 100) == 0);
  CHECK(view.in_place); /* a record on a blocking ring, read by a consumer the producer waits for */
  const void* first = view.data;
  CHECK_STATUS(ringcast_try_view(consumer, id, &view), RINGCAST_OK);
  CHECK(view.data == first && view.length == 100);
  CHECK_STATUS(ringcast_release_view(consumer, id), RINGCAST_OK);
  CHECK_STATUS(ringcast_release_view(consumer, id), RINGCAST_INVALID_CONSUMER);
  CHECK_STATUS(ringcast_try_view(consumer, id, &view), RINGCAST_OK);
  CHECK(view.length == 4 && memcmp(view.data, "next", 4) == 0);
  CHECK_STATUS(ringcast_release_view(consumer, id), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_view(consumer, id + 1, &view), RINGCAST_INVALID_CONSUMER);
  ringcast_close(consumer);
  ringcast_close(producer);
}

/* ringcast_drain's callback: appends each message's first byte. */
struct collected {
  char first[64];
  size_t count;
};

static int collect(void* context, const void* data, size_t length) {
  struct collected* c = context;
  c->first[c->count++] = length == 0 ? '-' : *(const char*)data;
  return 0;
}

/* Stops the batch at a message starting with 's'. */
static int stop_at_s(void* context, const void* data, size_t length) {
  collect(context, data, length);
  return length > 0 && *(const char*)data == 's';
}

static void test_batches(void) {
  ringcast_ring* consumer = NULL;
  ringcast_ring* producer = make_ring("batch", 64, &consumer);
  uint32_t id = 0;
  CHECK_STATUS(ringcast_register(consumer, RINGCAST_START_LATEST, &id), RINGCAST_OK);
  struct collected c = {{0}, 0};
  ringcast_batch_result b = ringcast_drain(consumer, id, collect, &c, 16);
  CHECK_STATUS(b.status, RINGCAST_EMPTY);
  CHECK(b.count == 0);
  char record[150];
  memset(record, 'R', sizeof record);
  CHECK_STATUS(ringcast_try_push(producer, "a", 1), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_push(producer, record, sizeof record), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_push(producer, "b", 1), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_push(producer, "c", 1), RINGCAST_OK);
  b = ringcast_drain(consumer, id, collect, &c, 3);
  CHECK_STATUS(b.status, RINGCAST_OK);
  CHECK(b.count == 3 && c.count == 3 && memcmp(c.first, "aRb", 3) == 0);
  b = ringcast_drain(consumer, id, collect, &c, 16);
  CHECK(b.count == 1 && c.count == 4 && c.first[3] == 'c');
  b = ringcast_drain(consumer, id, NULL, &c, 16);
  CHECK_STATUS(b.status, RINGCAST_INVALID_ARGUMENT);
  /* A stop consumes none of the batch: the next call delivers it again. */
  CHECK_STATUS(ringcast_try_push(producer, "d", 1), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_push(producer, "s", 1), RINGCAST_OK);
  b = ringcast_drain(consumer, id, stop_at_s, &c, 16);
  CHECK_STATUS(b.status, RINGCAST_CANCELLED);
  CHECK(b.count == 0 && c.count == 6 && memcmp(c.first + 4, "ds", 2) == 0);
  b = ringcast_drain(consumer, id, collect, &c, 16);
  CHECK(b.status == RINGCAST_OK && b.count == 2 && c.count == 8 && memcmp(c.first + 6, "ds", 2) == 0);

  /* recv_batch: takes capacity / max_message (200) messages per round, and
   * more rounds while room is left. */
  for (int i = 0; i < 6; ++i) {
    const char m[2] = {(char)('0' + i), 'x'};
    CHECK_STATUS(ringcast_try_push(producer, m, 2), RINGCAST_OK);
  }
  CHECK_STATUS(ringcast_try_push(producer, record, sizeof record), RINGCAST_OK);
  char buffer[450];
  uint32_t lengths[16];
  b = ringcast_recv_batch(consumer, id, buffer, sizeof buffer, lengths, 16);
  CHECK_STATUS(b.status, RINGCAST_OK);
  CHECK(b.count == 7);
  for (int i = 0; i < 6; ++i) CHECK(lengths[i] == 2 && buffer[2 * i] == '0' + i && buffer[2 * i + 1] == 'x');
  CHECK(lengths[6] == 150 && memcmp(buffer + 12, record, 150) == 0);
  b = ringcast_recv_batch(consumer, id, buffer, sizeof buffer, lengths, 16);
  CHECK_STATUS(b.status, RINGCAST_EMPTY);
  CHECK(b.count == 0);
  /* Three of the largest messages: two fit in 450 bytes, and the bytes past
   * the room given stay untouched. */
  char roomy[600];
  memset(roomy, '#', sizeof roomy);
  for (int i = 0; i < 3; ++i) CHECK_STATUS(ringcast_try_push(producer, record, 150), RINGCAST_OK);
  CHECK_STATUS(ringcast_try_push(producer, record, 50), RINGCAST_OK);
  b = ringcast_recv_batch(consumer, id, roomy, 450, lengths, 16);
  CHECK(b.status == RINGCAST_OK && b.count == 2 && lengths[0] == 150 && lengths[1] == 150);
  CHECK(roomy[449] == '#' && roomy[599] == '#');
  b = ringcast_recv_batch(consumer, id, roomy, 450, lengths, 16);
  CHECK(b.status == RINGCAST_OK && b.count == 2 && lengths[0] == 150 && lengths[1] == 50);
  /* `max` bounds it. */
  for (int i = 0; i < 3; ++i) CHECK_STATUS(ringcast_try_push(producer, "m", 1), RINGCAST_OK);
  b = ringcast_recv_batch(consumer, id, buffer, sizeof buffer, lengths, 2);
  CHECK(b.status == RINGCAST_OK && b.count == 2);
  /* Less room than max_message: one message, as try_recv. */
  b = ringcast_recv_batch(consumer, id, buffer, 199, lengths, 16);
  CHECK(b.status == RINGCAST_OK && b.count == 1 && lengths[0] == 1);
  CHECK_STATUS(ringcast_try_push(producer, record, 30), RINGCAST_OK);
  b = ringcast_recv_batch(consumer, id, buffer, 10, lengths, 16);
  CHECK_STATUS(b.status, RINGCAST_BUFFER_TOO_SMALL);
  CHECK(b.count == 0 && lengths[0] == 30);
  b = ringcast_recv_batch(consumer, id, buffer, sizeof buffer, NULL, 16);
  CHECK_STATUS(b.status, RINGCAST_INVALID_ARGUMENT);
  b = ringcast_recv_batch(consumer, id, buffer, sizeof buffer, lengths, 0);
  CHECK_STATUS(b.status, RINGCAST_INVALID_ARGUMENT);
  b = ringcast_recv_batch(consumer, id + 1, buffer, sizeof buffer, lengths, 16);
  CHECK_STATUS(b.status, RINGCAST_INVALID_CONSUMER);
  ringcast_close(consumer);
  ringcast_close(producer);
}

static void test_lossy_lap(void) {
  ringcast_create_options o = {0};
  o.lossy = true;
  o.max_message = RINGCAST_MAX_INLINE_PAYLOAD; /* one slot per message: positions count messages */
  ringcast_ring* ring = NULL;
  CHECK_STATUS(ringcast_create_anonymous(4, &o, &ring), RINGCAST_OK);
  CHECK(ringcast_is_lossy(ring));
  uint32_t id = 0;
  CHECK_STATUS(ringcast_register(ring, RINGCAST_START_LATEST, &id), RINGCAST_OK);
  for (char c = 'a'; c < 'k'; ++c) CHECK_STATUS(ringcast_try_push(ring, &c, 1), RINGCAST_OK);
  char buffer[64];
  ringcast_recv_result r = recv(ring, id, buffer, sizeof buffer);
  CHECK_STATUS(r.status, RINGCAST_LAPPED);
  CHECK(r.missed == 7); /* it resumes at the oldest message safe to read (as in C++) */
  for (char c = 'h'; c < 'k'; ++c) {
    r = recv(ring, id, buffer, sizeof buffer);
    CHECK(r.status == RINGCAST_OK && buffer[0] == c);
  }
  /* recv_batch reports a lap too. */
  char room[4096];
  uint32_t lengths[16];
  for (char c = 'a'; c < 'k'; ++c) CHECK_STATUS(ringcast_try_push(ring, &c, 1), RINGCAST_OK);
  ringcast_batch_result b = ringcast_recv_batch(ring, id, room, sizeof room, lengths, 16);
  CHECK_STATUS(b.status, RINGCAST_LAPPED);
  CHECK(b.count == 0 && b.missed == 7);
  b = ringcast_recv_batch(ring, id, room, sizeof room, lengths, 16);
  CHECK(b.status == RINGCAST_OK && b.count == 3 && memcmp(room, "hij", 3) == 0);
  ringcast_close(ring);
}

static void test_reap(void) {
  ringcast_ring* ring = NULL;
  ringcast_create_options o = {0};
  CHECK_STATUS(ringcast_create(path_of("reap"), 8, &o, &ring), RINGCAST_OK);
  size_t freed = 99;
  CHECK_STATUS(ringcast_reap_dead_consumers(ring, &freed), RINGCAST_OK);
  CHECK(freed == 0);
  const pid_t child = fork();
  if (child == 0) {
    ringcast_ring* mine = NULL;
    uint32_t id = 0;
    if (ringcast_open(path_of("reap"), NULL, &mine) != RINGCAST_OK) _exit(2);
    if (ringcast_register(mine, RINGCAST_START_LATEST, &id) != RINGCAST_OK) _exit(3);
    _exit(0); /* dies holding its entry */
  }
  int wstatus = 0;
  CHECK(waitpid(child, &wstatus, 0) == child && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  CHECK(ringcast_active_consumer_count(ring) == 1);
  ringcast_ring_status status;
  CHECK_STATUS(ringcast_get_status(ring, &status), RINGCAST_OK);
  CHECK(status.consumers[0].active && !status.consumers[0].owner_alive);
  CHECK_STATUS(ringcast_reap_dead_consumers(ring, &freed), RINGCAST_OK);
  CHECK(freed == 1);
  CHECK(ringcast_active_consumer_count(ring) == 0);
  CHECK_STATUS(ringcast_reap_dead_consumers(ring, NULL), RINGCAST_OK);
  ringcast_close(ring);
}

int main(void) {
  strcpy(dir, "/tmp/ringcast-c-api-XXXXXX");
  if (mkdtemp(dir) == NULL) {
    perror("mkdtemp");
    return 2;
  }
  test_names_and_messages();
  test_setup_errors();
  test_push_and_receive();
  test_register();
  test_producer_role();
  test_claims();
  test_views();
  test_batches();
  test_lossy_lap();
  test_reap();
  const char* names[] = {"x",     "small", "exists", "garbage", "push",  "register",   "role",
                         "claim", "view",  "batch",  "reap",    "split", "split.slots"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) unlink(path_of(names[i]));
  rmdir(dir);
  if (failures != 0) {
    fprintf(stderr, "c_api_test: %d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
