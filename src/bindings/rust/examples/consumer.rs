//! Registers on an existing ring, prints "ready", then receives `--count`
//! messages in batches (drain, zero copy; recv_wait sleeps when the ring is
//! empty or its next message is still being written) and checks each against
//! the example pattern: its sequence number and every byte. Exits 1 on the
//! first wrong, missing or lapped message.
//!
//!     consumer --ring /dev/shm/ticks.ring --count 10000
mod pattern;

use ringcast::{Idle, OpenOptions, Ring, StartAt, Status};
use std::time::Duration;

fn fail(text: String) -> ! {
    eprintln!("consumer: {}", text);
    std::process::exit(1)
}

fn main() {
    let (path, count) = pattern::flags("consumer");
    let mut ring = Ring::open(&path, &OpenOptions::default()).unwrap_or_else(|e| fail(e.to_string()));
    let id = ring.register(StartAt::Latest).unwrap_or_else(|e| fail(e.to_string()));
    println!("ready");

    let mut next = 0u64;
    let mut want = Vec::new();
    let mut check = |m: &[u8]| {
        pattern::message(next, &mut want);
        if m != want.as_slice() {
            fail(format!(
                "message {}: got {:?}, want {:?}",
                next,
                String::from_utf8_lossy(m),
                String::from_utf8_lossy(&want)
            ));
        }
        next += 1;
    };
    let mut buf = vec![0u8; ring.max_message()];
    let mut received = 0u64;
    while received < count {
        let batch = ring.drain(id, (count - received).min(256) as usize, &mut check);
        received += batch.count as u64;
        match batch.status {
            Status::OK => {}
            // Stalled: the producer is between the two stores of a message
            // (preempted mid-write, or a busy host); it wakes sleepers when
            // it commits, as for an empty ring.
            Status::EMPTY | Status::STALLED => {
                let r = ring.recv_wait(id, &mut buf, Duration::from_secs(10), Idle::SpinThenBlock);
                if r.status != Status::OK {
                    fail(format!("waiting for message {}: {}", received, r.status));
                }
                check(&buf[..r.length]);
                received += 1;
            }
            other => fail(format!("receiving message {}: {} (missed {})", received, other, batch.missed)),
        }
    }
    println!("received {}", received);
}
