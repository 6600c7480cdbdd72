/* Prints the C compiler's view of ringcast.h as Rust constants: each
 * struct's size and field offsets, and each constant's value. tests/abi.rs
 * compares them with the hand-written declarations of src/sys.rs. */
#include <stddef.h>
#include <stdio.h>

#include "ringcast/ringcast.h"

#define SIZE(t) printf("pub const SIZE_%s: usize = %zu;\n", #t, sizeof(t))
#define OFFSET(t, f) printf("pub const OFFSET_%s_%s: usize = %zu;\n", #t, #f, offsetof(t, f))
#define VALUE(c) printf("pub const %s: i64 = %lld;\n", #c, (long long)(c))

int main(void) {
  SIZE(ringcast_status);
  SIZE(bool);
  SIZE(ringcast_create_options);
  OFFSET(ringcast_create_options, mode);
  OFFSET(ringcast_create_options, replace);
  OFFSET(ringcast_create_options, lossy);
  OFFSET(ringcast_create_options, wakeups);
  OFFSET(ringcast_create_options, no_producer);
  OFFSET(ringcast_create_options, reap_on_full);
  OFFSET(ringcast_create_options, separate_slots);
  OFFSET(ringcast_create_options, max_message);
  SIZE(ringcast_open_options);
  OFFSET(ringcast_open_options, expected_capacity);
  OFFSET(ringcast_open_options, read_only);
  OFFSET(ringcast_open_options, reap_on_full);
  OFFSET(ringcast_open_options, read_only_slots);
  SIZE(ringcast_recv_result);
  OFFSET(ringcast_recv_result, status);
  OFFSET(ringcast_recv_result, length);
  OFFSET(ringcast_recv_result, missed);
  SIZE(ringcast_batch_result);
  OFFSET(ringcast_batch_result, status);
  OFFSET(ringcast_batch_result, count);
  OFFSET(ringcast_batch_result, missed);
  SIZE(ringcast_view);
  OFFSET(ringcast_view, data);
  OFFSET(ringcast_view, length);
  OFFSET(ringcast_view, missed);
  OFFSET(ringcast_view, in_place);
  SIZE(ringcast_consumer_status);
  OFFSET(ringcast_consumer_status, active);
  OFFSET(ringcast_consumer_status, owner_alive);
  OFFSET(ringcast_consumer_status, owner_pid);
  OFFSET(ringcast_consumer_status, cursor);
  OFFSET(ringcast_consumer_status, lag);
  SIZE(ringcast_ring_status);
  OFFSET(ringcast_ring_status, capacity);
  OFFSET(ringcast_ring_status, flags);
  OFFSET(ringcast_ring_status, producer_pid);
  OFFSET(ringcast_ring_status, producer_seq);
  OFFSET(ringcast_ring_status, producer_alive);
  OFFSET(ringcast_ring_status, half_written_slot);
  OFFSET(ringcast_ring_status, producer_sleeping);
  OFFSET(ringcast_ring_status, sleeping_consumers);
  OFFSET(ringcast_ring_status, upstream_lost);
  OFFSET(ringcast_ring_status, upstream_gaps);
  OFFSET(ringcast_ring_status, max_message);
  OFFSET(ringcast_ring_status, messages);
  OFFSET(ringcast_ring_status, payload_bytes);
  OFFSET(ringcast_ring_status, consumers);
  SIZE(ringcast_native);
  OFFSET(ringcast_native, layout_version);
  OFFSET(ringcast_native, capacity);
  OFFSET(ringcast_native, header);
  OFFSET(ringcast_native, is_producer);
  OFFSET(ringcast_native, fenced);
  OFFSET(ringcast_native, owned);
  OFFSET(ringcast_native, stable_from_stride);
  VALUE(RINGCAST_MAX_CONSUMERS);
  VALUE(RINGCAST_MAX_INLINE_PAYLOAD);
  VALUE(RINGCAST_OK);
  VALUE(RINGCAST_FULL);
  VALUE(RINGCAST_EMPTY);
  VALUE(RINGCAST_NO_CONSUMER_SLOT);
  VALUE(RINGCAST_INVALID_CONSUMER);
  VALUE(RINGCAST_PAYLOAD_TOO_LARGE);
  VALUE(RINGCAST_LAYOUT_MISMATCH);
  VALUE(RINGCAST_IO_ERROR);
  VALUE(RINGCAST_NOT_READY);
  VALUE(RINGCAST_PRODUCER_BUSY);
  VALUE(RINGCAST_NOT_PRODUCER);
  VALUE(RINGCAST_LAPPED);
  VALUE(RINGCAST_STALLED);
  VALUE(RINGCAST_PRODUCER_DEAD);
  VALUE(RINGCAST_TIMED_OUT);
  VALUE(RINGCAST_ALREADY_EXISTS);
  VALUE(RINGCAST_BUFFER_TOO_SMALL);
  VALUE(RINGCAST_INVALID_ARGUMENT);
  VALUE(RINGCAST_OUT_OF_MEMORY);
  VALUE(RINGCAST_CANCELLED);
  VALUE(RINGCAST_START_LATEST);
  VALUE(RINGCAST_START_OLDEST);
  VALUE(RINGCAST_IDLE_SPIN_THEN_BLOCK);
  VALUE(RINGCAST_IDLE_SPIN);
  VALUE(RINGCAST_IDLE_SPIN_THEN_YIELD);
  VALUE(RINGCAST_IDLE_BLOCK);
  return 0;
}
