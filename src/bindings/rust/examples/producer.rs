//! Publishes `--count` messages of the example pattern to an existing ring,
//! half of them with push_wait (a copy) and half through a claim written in
//! place, then exits.
//!
//!     producer --ring /dev/shm/ticks.ring --count 10000
mod pattern;

use ringcast::{Idle, OpenOptions, Ring, Status};
use std::time::Duration;

fn main() {
    let (path, count) = pattern::flags("producer");
    let mut ring = Ring::open(&path, &OpenOptions::default()).unwrap_or_else(|e| {
        eprintln!("producer: {}", e);
        std::process::exit(1)
    });
    if let Err(e) = ring.claim_producer() {
        eprintln!("producer: {}", e);
        std::process::exit(1);
    }
    let timeout = Duration::from_secs(10);
    let mut m = Vec::new();
    for i in 0..count {
        pattern::message(i, &mut m);
        let status = if i % 2 == 0 {
            ring.push_wait(&m, timeout, Idle::SpinThenBlock)
        } else {
            match ring.claim_wait(m.len(), timeout, Idle::SpinThenBlock) {
                Ok(mut claim) => {
                    claim.data().copy_from_slice(&m);
                    claim.commit(m.len());
                    Status::OK
                }
                Err(status) => status,
            }
        };
        if status != Status::OK {
            eprintln!("producer: message {}: {}", i, status);
            std::process::exit(1);
        }
    }
    println!("published {}", count);
}
