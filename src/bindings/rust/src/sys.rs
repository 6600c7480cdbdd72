//! The C ABI (include/ringcast/ringcast.h), declared by hand: no bindgen.
//! tests/abi.rs checks every struct's size and field offsets and every
//! constant against what the C compiler makes of the header, and that every
//! function the header declares is declared here.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub type ringcast_status = i32;
pub const RINGCAST_OK: ringcast_status = 0;
pub const RINGCAST_FULL: ringcast_status = 1;
pub const RINGCAST_EMPTY: ringcast_status = 2;
pub const RINGCAST_NO_CONSUMER_SLOT: ringcast_status = 3;
pub const RINGCAST_INVALID_CONSUMER: ringcast_status = 4;
pub const RINGCAST_PAYLOAD_TOO_LARGE: ringcast_status = 5;
pub const RINGCAST_LAYOUT_MISMATCH: ringcast_status = 6;
pub const RINGCAST_IO_ERROR: ringcast_status = 7;
pub const RINGCAST_NOT_READY: ringcast_status = 8;
pub const RINGCAST_PRODUCER_BUSY: ringcast_status = 9;
pub const RINGCAST_NOT_PRODUCER: ringcast_status = 10;
pub const RINGCAST_LAPPED: ringcast_status = 11;
pub const RINGCAST_STALLED: ringcast_status = 12;
pub const RINGCAST_PRODUCER_DEAD: ringcast_status = 13;
pub const RINGCAST_TIMED_OUT: ringcast_status = 14;
pub const RINGCAST_ALREADY_EXISTS: ringcast_status = 15;
pub const RINGCAST_BUFFER_TOO_SMALL: ringcast_status = 16;
pub const RINGCAST_INVALID_ARGUMENT: ringcast_status = 64;
pub const RINGCAST_OUT_OF_MEMORY: ringcast_status = 65;
pub const RINGCAST_CANCELLED: ringcast_status = 66;

pub const RINGCAST_MAX_CONSUMERS: usize = 16;
pub const RINGCAST_MAX_INLINE_PAYLOAD: usize = 52;

pub type ringcast_start_at = i32;
pub const RINGCAST_START_LATEST: ringcast_start_at = 0;
pub const RINGCAST_START_OLDEST: ringcast_start_at = 1;

pub type ringcast_idle = i32;
pub const RINGCAST_IDLE_SPIN_THEN_BLOCK: ringcast_idle = 0;
pub const RINGCAST_IDLE_SPIN: ringcast_idle = 1;
pub const RINGCAST_IDLE_SPIN_THEN_YIELD: ringcast_idle = 2;
pub const RINGCAST_IDLE_BLOCK: ringcast_idle = 3;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ringcast_create_options {
    pub mode: u32,
    pub replace: bool,
    pub lossy: bool,
    pub wakeups: bool,
    pub no_producer: bool,
    pub reap_on_full: bool,
    pub separate_slots: bool,
    pub max_message: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ringcast_open_options {
    pub expected_capacity: u64,
    pub read_only: bool,
    pub reap_on_full: bool,
    pub read_only_slots: bool,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ringcast_recv_result {
    pub status: ringcast_status,
    pub length: u32,
    pub missed: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ringcast_batch_result {
    pub status: ringcast_status,
    pub count: usize,
    pub missed: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ringcast_view {
    pub data: *const c_void,
    pub length: usize,
    pub missed: u64,
    pub in_place: bool,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ringcast_consumer_status {
    pub active: bool,
    pub owner_alive: bool,
    pub owner_pid: u32,
    pub cursor: u64,
    pub lag: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ringcast_ring_status {
    pub capacity: u64,
    pub flags: u32,
    pub producer_pid: u32,
    pub producer_seq: u64,
    pub producer_alive: bool,
    pub half_written_slot: bool,
    pub producer_sleeping: bool,
    pub sleeping_consumers: u32,
    pub upstream_lost: u64,
    pub upstream_gaps: u64,
    pub max_message: u64,
    pub messages: u64,
    pub payload_bytes: u64,
    pub consumers: [ringcast_consumer_status; RINGCAST_MAX_CONSUMERS],
}

/// The mapping and the handle's hot-path state (ringcast_native_state). The
/// Rust crate calls the C ABI directly and does not use it; declared so that
/// the header and this file stay one to one (tests/abi.rs).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ringcast_native {
    pub layout_version: u32,
    pub flags: u32,
    pub capacity: u64,
    pub max_message: u64,
    pub block_slots: u64,
    pub header: *mut c_void,
    pub slots: *mut c_void,
    pub is_producer: *mut bool,
    pub seq: *mut u64,
    pub payload_bytes: *mut u64,
    pub cached_min: *mut u64,
    pub stamp_below: *mut u64,
    pub fenced: *mut bool,
    pub owned: *const c_void,
    pub stable_from: *const u64,
    pub stable_from_stride: usize,
}

/// The opaque handle.
#[repr(C)]
pub struct ringcast_ring {
    _private: [u8; 0],
}

/// The opaque wait set handle (one wait over many rings).
#[repr(C)]
pub struct ringcast_wait_set {
    _private: [u8; 0],
}

pub type ringcast_message_fn = unsafe extern "C" fn(context: *mut c_void, data: *const c_void, length: usize) -> i32;

extern "C" {
    pub fn ringcast_status_name(status: ringcast_status) -> *const c_char;
    pub fn ringcast_last_error_message() -> *const c_char;

    pub fn ringcast_create(
        path: *const c_char,
        capacity: u64,
        options: *const ringcast_create_options,
        ring: *mut *mut ringcast_ring,
    ) -> ringcast_status;
    pub fn ringcast_create_anonymous(
        capacity: u64,
        options: *const ringcast_create_options,
        ring: *mut *mut ringcast_ring,
    ) -> ringcast_status;
    pub fn ringcast_open(
        path: *const c_char,
        options: *const ringcast_open_options,
        ring: *mut *mut ringcast_ring,
    ) -> ringcast_status;
    pub fn ringcast_close(ring: *mut ringcast_ring);

    pub fn ringcast_claim_producer(ring: *mut ringcast_ring) -> ringcast_status;
    pub fn ringcast_release_producer(ring: *mut ringcast_ring);
    pub fn ringcast_is_producer(ring: *const ringcast_ring) -> bool;

    pub fn ringcast_register(ring: *mut ringcast_ring, start: ringcast_start_at, id: *mut u32) -> ringcast_status;
    pub fn ringcast_unregister(ring: *mut ringcast_ring, id: u32) -> ringcast_status;
    pub fn ringcast_reap_dead_consumers(ring: *mut ringcast_ring, freed: *mut usize) -> ringcast_status;

    pub fn ringcast_try_push(ring: *mut ringcast_ring, data: *const c_void, length: usize) -> ringcast_status;
    pub fn ringcast_try_push_batch(
        ring: *mut ringcast_ring,
        data: *const c_void,
        lengths: *const u32,
        count: usize,
    ) -> ringcast_batch_result;
    pub fn ringcast_push_wait(
        ring: *mut ringcast_ring,
        data: *const c_void,
        length: usize,
        timeout_ns: u64,
        idle: ringcast_idle,
    ) -> ringcast_status;
    pub fn ringcast_try_claim(ring: *mut ringcast_ring, length: usize, data: *mut *mut c_void) -> ringcast_status;
    pub fn ringcast_claim_wait(
        ring: *mut ringcast_ring,
        length: usize,
        data: *mut *mut c_void,
        timeout_ns: u64,
        idle: ringcast_idle,
    ) -> ringcast_status;
    pub fn ringcast_commit(ring: *mut ringcast_ring, length: usize) -> ringcast_status;
    pub fn ringcast_abort(ring: *mut ringcast_ring) -> ringcast_status;

    pub fn ringcast_try_recv(
        ring: *mut ringcast_ring,
        id: u32,
        buffer: *mut c_void,
        capacity: usize,
    ) -> ringcast_recv_result;
    pub fn ringcast_recv_wait(
        ring: *mut ringcast_ring,
        id: u32,
        buffer: *mut c_void,
        capacity: usize,
        timeout_ns: u64,
        idle: ringcast_idle,
    ) -> ringcast_recv_result;
    pub fn ringcast_drain(
        ring: *mut ringcast_ring,
        id: u32,
        f: ringcast_message_fn,
        context: *mut c_void,
        max: usize,
    ) -> ringcast_batch_result;
    pub fn ringcast_recv_batch(
        ring: *mut ringcast_ring,
        id: u32,
        buffer: *mut c_void,
        capacity: usize,
        lengths: *mut u32,
        max: usize,
    ) -> ringcast_batch_result;
    pub fn ringcast_try_view(ring: *mut ringcast_ring, id: u32, view: *mut ringcast_view) -> ringcast_status;
    pub fn ringcast_release_view(ring: *mut ringcast_ring, id: u32) -> ringcast_status;

    pub fn ringcast_lag(ring: *const ringcast_ring, id: u32) -> u64;
    pub fn ringcast_producer_position(ring: *const ringcast_ring) -> u64;
    pub fn ringcast_native_state(ring: *mut ringcast_ring, native: *mut ringcast_native) -> ringcast_status;
    pub fn ringcast_native_wake_consumers(ring: *mut ringcast_ring);
    pub fn ringcast_native_wake_producer(ring: *mut ringcast_ring);
    pub fn ringcast_capacity(ring: *const ringcast_ring) -> u64;
    pub fn ringcast_max_message(ring: *const ringcast_ring) -> usize;
    pub fn ringcast_is_lossy(ring: *const ringcast_ring) -> bool;
    pub fn ringcast_is_fully_drained(ring: *const ringcast_ring) -> bool;
    pub fn ringcast_active_consumer_count(ring: *const ringcast_ring) -> usize;
    pub fn ringcast_get_status(ring: *const ringcast_ring, status: *mut ringcast_ring_status) -> ringcast_status;

    pub fn ringcast_wait_set_create(set: *mut *mut ringcast_wait_set) -> ringcast_status;
    pub fn ringcast_wait_set_close(set: *mut ringcast_wait_set);
    pub fn ringcast_wait_set_add(
        set: *mut ringcast_wait_set,
        ring: *mut ringcast_ring,
        id: u32,
        member: *mut usize,
    ) -> ringcast_status;
    pub fn ringcast_wait_set_remove(set: *mut ringcast_wait_set, member: usize) -> ringcast_status;
    pub fn ringcast_wait_set_wait(
        set: *mut ringcast_wait_set,
        ready: *mut usize,
        capacity: usize,
        count: *mut usize,
        timeout_ns: u64,
    ) -> ringcast_status;
    pub fn ringcast_wait_set_ready(set: *const ringcast_wait_set, member: usize) -> bool;
    pub fn ringcast_wait_set_notify_fd(set: *mut ringcast_wait_set, fd: *mut i32) -> ringcast_status;
    pub fn ringcast_wait_set_arm(set: *mut ringcast_wait_set);
}
