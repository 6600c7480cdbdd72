//! The hand-written declarations of src/sys.rs against the C header: every
//! struct's size and field offsets and every constant as the C compiler sees
//! them (build.rs runs abi/c_layout.c), and every function the header
//! declares declared once in sys.rs.
use ringcast::sys::*;
use std::mem::{size_of, MaybeUninit};

#[allow(dead_code, non_upper_case_globals)]
mod c {
    include!(concat!(env!("OUT_DIR"), "/c_layout.rs"));
}

macro_rules! offset_of {
    ($t:ty, $f:ident) => {{
        let value = MaybeUninit::<$t>::uninit();
        let base = value.as_ptr();
        (unsafe { std::ptr::addr_of!((*base).$f) } as usize) - (base as usize)
    }};
}

macro_rules! same_layout {
    ($t:ident, $size:ident, [$(($f:ident, $off:ident)),*]) => {
        assert_eq!(size_of::<$t>(), c::$size, "sizeof {}", stringify!($t));
        $(assert_eq!(offset_of!($t, $f), c::$off, "offsetof {}.{}", stringify!($t), stringify!($f));)*
    };
}

#[test]
fn structs_have_the_c_layout() {
    assert_eq!(size_of::<ringcast_status>(), c::SIZE_ringcast_status);
    assert_eq!(size_of::<bool>(), c::SIZE_bool);
    same_layout!(
        ringcast_create_options,
        SIZE_ringcast_create_options,
        [
            (mode, OFFSET_ringcast_create_options_mode),
            (replace, OFFSET_ringcast_create_options_replace),
            (lossy, OFFSET_ringcast_create_options_lossy),
            (wakeups, OFFSET_ringcast_create_options_wakeups),
            (no_producer, OFFSET_ringcast_create_options_no_producer),
            (reap_on_full, OFFSET_ringcast_create_options_reap_on_full),
            (separate_slots, OFFSET_ringcast_create_options_separate_slots),
            (max_message, OFFSET_ringcast_create_options_max_message)
        ]
    );
    same_layout!(
        ringcast_open_options,
        SIZE_ringcast_open_options,
        [
            (expected_capacity, OFFSET_ringcast_open_options_expected_capacity),
            (read_only, OFFSET_ringcast_open_options_read_only),
            (reap_on_full, OFFSET_ringcast_open_options_reap_on_full),
            (read_only_slots, OFFSET_ringcast_open_options_read_only_slots)
        ]
    );
    same_layout!(
        ringcast_recv_result,
        SIZE_ringcast_recv_result,
        [
            (status, OFFSET_ringcast_recv_result_status),
            (length, OFFSET_ringcast_recv_result_length),
            (missed, OFFSET_ringcast_recv_result_missed)
        ]
    );
    same_layout!(
        ringcast_batch_result,
        SIZE_ringcast_batch_result,
        [
            (status, OFFSET_ringcast_batch_result_status),
            (count, OFFSET_ringcast_batch_result_count),
            (missed, OFFSET_ringcast_batch_result_missed)
        ]
    );
    same_layout!(
        ringcast_view,
        SIZE_ringcast_view,
        [
            (data, OFFSET_ringcast_view_data),
            (length, OFFSET_ringcast_view_length),
            (missed, OFFSET_ringcast_view_missed),
            (in_place, OFFSET_ringcast_view_in_place)
        ]
    );
    same_layout!(
        ringcast_native,
        SIZE_ringcast_native,
        [
            (layout_version, OFFSET_ringcast_native_layout_version),
            (capacity, OFFSET_ringcast_native_capacity),
            (header, OFFSET_ringcast_native_header),
            (is_producer, OFFSET_ringcast_native_is_producer),
            (fenced, OFFSET_ringcast_native_fenced),
            (owned, OFFSET_ringcast_native_owned),
            (stable_from_stride, OFFSET_ringcast_native_stable_from_stride)
        ]
    );
    same_layout!(
        ringcast_consumer_status,
        SIZE_ringcast_consumer_status,
        [
            (active, OFFSET_ringcast_consumer_status_active),
            (owner_alive, OFFSET_ringcast_consumer_status_owner_alive),
            (owner_pid, OFFSET_ringcast_consumer_status_owner_pid),
            (cursor, OFFSET_ringcast_consumer_status_cursor),
            (lag, OFFSET_ringcast_consumer_status_lag)
        ]
    );
    same_layout!(
        ringcast_ring_status,
        SIZE_ringcast_ring_status,
        [
            (capacity, OFFSET_ringcast_ring_status_capacity),
            (flags, OFFSET_ringcast_ring_status_flags),
            (producer_pid, OFFSET_ringcast_ring_status_producer_pid),
            (producer_seq, OFFSET_ringcast_ring_status_producer_seq),
            (producer_alive, OFFSET_ringcast_ring_status_producer_alive),
            (half_written_slot, OFFSET_ringcast_ring_status_half_written_slot),
            (producer_sleeping, OFFSET_ringcast_ring_status_producer_sleeping),
            (sleeping_consumers, OFFSET_ringcast_ring_status_sleeping_consumers),
            (upstream_lost, OFFSET_ringcast_ring_status_upstream_lost),
            (upstream_gaps, OFFSET_ringcast_ring_status_upstream_gaps),
            (max_message, OFFSET_ringcast_ring_status_max_message),
            (messages, OFFSET_ringcast_ring_status_messages),
            (payload_bytes, OFFSET_ringcast_ring_status_payload_bytes),
            (consumers, OFFSET_ringcast_ring_status_consumers)
        ]
    );
}

#[test]
fn constants_have_the_c_values() {
    let pairs: &[(&str, i64, i64)] = &[
        ("RINGCAST_MAX_CONSUMERS", RINGCAST_MAX_CONSUMERS as i64, c::RINGCAST_MAX_CONSUMERS),
        ("RINGCAST_MAX_INLINE_PAYLOAD", RINGCAST_MAX_INLINE_PAYLOAD as i64, c::RINGCAST_MAX_INLINE_PAYLOAD),
        ("RINGCAST_OK", RINGCAST_OK.into(), c::RINGCAST_OK),
        ("RINGCAST_FULL", RINGCAST_FULL.into(), c::RINGCAST_FULL),
        ("RINGCAST_EMPTY", RINGCAST_EMPTY.into(), c::RINGCAST_EMPTY),
        ("RINGCAST_NO_CONSUMER_SLOT", RINGCAST_NO_CONSUMER_SLOT.into(), c::RINGCAST_NO_CONSUMER_SLOT),
        ("RINGCAST_INVALID_CONSUMER", RINGCAST_INVALID_CONSUMER.into(), c::RINGCAST_INVALID_CONSUMER),
        ("RINGCAST_PAYLOAD_TOO_LARGE", RINGCAST_PAYLOAD_TOO_LARGE.into(), c::RINGCAST_PAYLOAD_TOO_LARGE),
        ("RINGCAST_LAYOUT_MISMATCH", RINGCAST_LAYOUT_MISMATCH.into(), c::RINGCAST_LAYOUT_MISMATCH),
        ("RINGCAST_IO_ERROR", RINGCAST_IO_ERROR.into(), c::RINGCAST_IO_ERROR),
        ("RINGCAST_NOT_READY", RINGCAST_NOT_READY.into(), c::RINGCAST_NOT_READY),
        ("RINGCAST_PRODUCER_BUSY", RINGCAST_PRODUCER_BUSY.into(), c::RINGCAST_PRODUCER_BUSY),
        ("RINGCAST_NOT_PRODUCER", RINGCAST_NOT_PRODUCER.into(), c::RINGCAST_NOT_PRODUCER),
        ("RINGCAST_LAPPED", RINGCAST_LAPPED.into(), c::RINGCAST_LAPPED),
        ("RINGCAST_STALLED", RINGCAST_STALLED.into(), c::RINGCAST_STALLED),
        ("RINGCAST_PRODUCER_DEAD", RINGCAST_PRODUCER_DEAD.into(), c::RINGCAST_PRODUCER_DEAD),
        ("RINGCAST_TIMED_OUT", RINGCAST_TIMED_OUT.into(), c::RINGCAST_TIMED_OUT),
        ("RINGCAST_ALREADY_EXISTS", RINGCAST_ALREADY_EXISTS.into(), c::RINGCAST_ALREADY_EXISTS),
        ("RINGCAST_BUFFER_TOO_SMALL", RINGCAST_BUFFER_TOO_SMALL.into(), c::RINGCAST_BUFFER_TOO_SMALL),
        ("RINGCAST_INVALID_ARGUMENT", RINGCAST_INVALID_ARGUMENT.into(), c::RINGCAST_INVALID_ARGUMENT),
        ("RINGCAST_OUT_OF_MEMORY", RINGCAST_OUT_OF_MEMORY.into(), c::RINGCAST_OUT_OF_MEMORY),
        ("RINGCAST_CANCELLED", RINGCAST_CANCELLED.into(), c::RINGCAST_CANCELLED),
        ("RINGCAST_START_LATEST", RINGCAST_START_LATEST.into(), c::RINGCAST_START_LATEST),
        ("RINGCAST_START_OLDEST", RINGCAST_START_OLDEST.into(), c::RINGCAST_START_OLDEST),
        ("RINGCAST_IDLE_SPIN_THEN_BLOCK", RINGCAST_IDLE_SPIN_THEN_BLOCK.into(), c::RINGCAST_IDLE_SPIN_THEN_BLOCK),
        ("RINGCAST_IDLE_SPIN", RINGCAST_IDLE_SPIN.into(), c::RINGCAST_IDLE_SPIN),
        ("RINGCAST_IDLE_SPIN_THEN_YIELD", RINGCAST_IDLE_SPIN_THEN_YIELD.into(), c::RINGCAST_IDLE_SPIN_THEN_YIELD),
        ("RINGCAST_IDLE_BLOCK", RINGCAST_IDLE_BLOCK.into(), c::RINGCAST_IDLE_BLOCK),
    ];
    for (name, rust, c) in pairs {
        assert_eq!(rust, c, "{}", name);
    }
}

/// The names of the functions a C text declares or a Rust text binds:
/// identifiers `ringcast_...` directly followed by `(` (C comments removed).
fn function_names(text: &str, prefix: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        rest = rest[start..].find("*/").map_or("", |end| &rest[start + end + 2..]);
    }
    code.push_str(rest);
    let mut names: Vec<String> = code
        .match_indices(prefix)
        .filter_map(|(at, _)| {
            let name: String =
                code[at + prefix.len()..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            let after = &code[at + prefix.len() + name.len()..];
            after.starts_with('(').then_some(name)
        })
        .collect();
    names.sort();
    names
}

#[test]
fn every_header_function_is_declared_once() {
    let header = std::fs::read_to_string(env!("RINGCAST_HEADER")).unwrap();
    let declared = function_names(&header, " ringcast_");
    let bound = function_names(include_str!("../src/sys.rs"), "pub fn ringcast_");
    assert!(declared.len() >= 30, "parsed only {:?}", declared);
    assert_eq!(declared, bound);
}
