//! The shapes of bench/ring/c_abi_bench.cpp from Rust, 52-byte messages, one
//! thread (docs/benchmarks.md, "C ABI and bindings"): prints ns per message
//! (wall and this thread's CPU time) for each.
//!
//!     cargo run --offline --release --example bench -- [messages]
use ringcast::{CreateOptions, Ring, StartAt, Status};
use std::time::Instant;

const BATCH: usize = 64;

fn ring(consumer: bool) -> (Ring, u32) {
    let options = CreateOptions { max_message: 52, ..Default::default() };
    let mut ring = Ring::create_anonymous(1024, &options).expect("create_anonymous");
    let id = if consumer { ring.register(StartAt::Latest).expect("register") } else { 0 };
    (ring, id)
}

fn seq(m: &[u8]) -> u64 {
    u64::from_le_bytes(m[..8].try_into().unwrap())
}

/// CPU time of this thread, in nanoseconds (/proc/thread-self/schedstat).
fn cpu_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    text.split_whitespace().next().and_then(|t| t.parse().ok()).unwrap_or(0)
}

fn report(name: &str, messages: u64, run: impl FnOnce()) {
    let (start, cpu) = (Instant::now(), cpu_ns());
    run();
    let wall = start.elapsed().as_nanos() as f64 / messages as f64;
    let cpu = (cpu_ns() - cpu) as f64 / messages as f64;
    println!("{:<16} {:>7.2} ns/msg wall {:>7.2} ns/msg cpu", name, wall, cpu);
}

fn main() {
    let n: u64 = std::env::args().nth(1).map_or(20_000_000, |a| a.parse().expect("messages"));
    let n = n - n % BATCH as u64;
    let mut m = [0u8; 52];

    let (mut r, _) = ring(false);
    report("PushNoConsumer", n, || {
        for _ in 0..n {
            assert_eq!(r.try_push(&m), Status::OK);
        }
    });

    let (mut r, id) = ring(true);
    let mut out = [0u8; 52];
    report("PushThenRecv", n, || {
        for i in 0..n {
            m[..8].copy_from_slice(&i.to_le_bytes());
            assert_eq!(r.try_push(&m), Status::OK);
            let got = r.try_recv(id, &mut out);
            assert!(got.status == Status::OK && seq(&out) == i, "message {}", i);
        }
    });

    // Batch64: 64 messages written back to back, one batch push, one batch
    // receive.
    let mut flat = [0u8; BATCH * 52];
    let lengths52 = [52u32; BATCH];
    let mut fill = |flat: &mut [u8], first: u64| {
        for k in 0..BATCH {
            flat[k * 52..k * 52 + 8].copy_from_slice(&(first + k as u64).to_le_bytes());
        }
    };

    let (mut r, id) = ring(true);
    report("Batch64/drain", n, || {
        let mut next = 0u64;
        for i in (0..n).step_by(BATCH) {
            fill(&mut flat, i);
            assert_eq!(r.try_push_batch(&flat, &lengths52).count, BATCH);
            let b = r.drain(id, BATCH, |msg| {
                assert_eq!(seq(msg), next);
                next += 1;
            });
            assert_eq!(b.count, BATCH);
        }
    });

    let (mut r, id) = ring(true);
    let mut buf = [0u8; BATCH * 52];
    let mut lengths = [0u32; BATCH];
    report("Batch64/recv_batch", n, || {
        for i in (0..n).step_by(BATCH) {
            fill(&mut flat, i);
            assert_eq!(r.try_push_batch(&flat, &lengths52).count, BATCH);
            let b = r.recv_batch(id, &mut buf, &mut lengths);
            assert_eq!(b.count, BATCH);
            for k in 0..BATCH {
                assert_eq!(seq(&buf[k * 52..]), i + k as u64);
            }
        }
    });
}
