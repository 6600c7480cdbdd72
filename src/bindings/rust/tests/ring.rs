//! The safe API over a real ring: each call and its errors.
use ringcast::{CreateOptions, Idle, OpenOptions, Ring, StartAt, Status};
use std::time::Duration;

/// A blocking ring file of 16 slots (messages up to 200 bytes) and a second
/// handle on it, as another process would have. The file is removed when the
/// returned guard drops.
struct Pair {
    producer: Ring,
    consumer: Ring,
    path: String,
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn pair(name: &str) -> Pair {
    let path = format!("{}/ringcast-rust-{}-{}", std::env::temp_dir().display(), name, std::process::id());
    let options = CreateOptions { max_message: 200, replace: true, ..Default::default() };
    let producer = Ring::create(&path, 16, &options).expect("create");
    let consumer = Ring::open(&path, &OpenOptions::default()).expect("open");
    Pair { producer, consumer, path }
}

const SECOND: Duration = Duration::from_secs(1);
const MILLI: Duration = Duration::from_millis(1);

#[test]
fn setup_errors_carry_status_and_message() {
    let e = Ring::open("/nonexistent-dir/ring", &OpenOptions::default()).err().unwrap();
    assert_eq!(e.status, Status::IO_ERROR);
    assert!(e.message.contains("No such file"), "{}", e);
    let p = pair("setup");
    let e = Ring::create(&p.path, 16, &CreateOptions::default()).err().unwrap();
    assert_eq!(e.status, Status::ALREADY_EXISTS);
    let e = Ring::open(&p.path, &OpenOptions { expected_capacity: 8, ..Default::default() }).err().unwrap();
    assert_eq!(e.status, Status::LAYOUT_MISMATCH);
    assert!(e.message.contains("layout_mismatch"), "{}", e);
    let e = Ring::open("nul\0byte", &OpenOptions::default()).err().unwrap();
    assert_eq!(e.status, Status::INVALID_ARGUMENT);
    assert_eq!(Status::FULL.name(), "full");
    assert_eq!(format!("{}", Status(40)), "unknown");
}

#[test]
fn push_and_receive_every_way() {
    let mut p = pair("push");
    let id = p.consumer.register(StartAt::Latest).unwrap();
    let mut buf = [0u8; 256];
    assert_eq!(p.consumer.try_recv(id, &mut buf).status, Status::EMPTY);
    assert_eq!(p.producer.try_push(b"hello"), Status::OK);
    assert_eq!((p.consumer.lag(id), p.producer.producer_position()), (1, 1));
    assert!(!p.producer.is_fully_drained());
    let r = p.consumer.try_recv(id, &mut buf);
    assert_eq!((r.status, &buf[..r.length]), (Status::OK, &b"hello"[..]));
    let long = [b'x'; 150];
    assert_eq!(p.producer.try_push(&long), Status::OK);
    let r = p.consumer.try_recv(id, &mut buf[..52]);
    assert_eq!((r.status, r.length), (Status::BUFFER_TOO_SMALL, 150));
    let r = p.consumer.recv_wait(id, &mut buf, SECOND, Idle::Block);
    assert_eq!((r.status, &buf[..r.length]), (Status::OK, &long[..]));
    assert_eq!(p.consumer.recv_wait(id, &mut buf, MILLI, Idle::Spin).status, Status::TIMED_OUT);
    assert_eq!(p.producer.try_push(&[0; 201]), Status::PAYLOAD_TOO_LARGE);

    // A batch, and one whose lengths overrun its bytes.
    let b = p.producer.try_push_batch(b"abcdef", &[1, 2, 3]);
    assert_eq!((b.status, b.count), (Status::OK, 3));
    for want in [&b"a"[..], b"bc", b"def"] {
        let r = p.consumer.try_recv(id, &mut buf);
        assert_eq!(&buf[..r.length], want);
    }
    assert_eq!(p.producer.try_push_batch(b"abc", &[2, 2]).status, Status::INVALID_ARGUMENT);
    assert_eq!(p.producer.try_push_batch(b"abc", &[u32::MAX, u32::MAX]).status, Status::INVALID_ARGUMENT);
    assert_eq!(p.consumer.try_recv(id, &mut buf).status, Status::EMPTY);

    // A claim committed short, one aborted, one dropped.
    let mut claim = p.producer.try_claim(100).unwrap();
    claim.data()[..7].copy_from_slice(b"claimed");
    claim.commit(7);
    let r = p.consumer.try_recv(id, &mut buf);
    assert_eq!(&buf[..r.length], b"claimed");
    p.producer.try_claim(3).unwrap().abort();
    drop(p.producer.try_claim(3).unwrap());
    assert_eq!(p.consumer.try_recv(id, &mut buf).status, Status::EMPTY);

    // Full, then a view and the rest drained.
    for i in 0..16u8 {
        assert_eq!(p.producer.try_push(&[i]), Status::OK);
    }
    assert_eq!(p.producer.try_push(&[1]), Status::FULL);
    assert_eq!(p.producer.push_wait(&[1], MILLI, Idle::SpinThenBlock), Status::TIMED_OUT);
    assert_eq!(p.producer.try_claim(1).err(), Some(Status::FULL));
    assert_eq!(p.producer.claim_wait(1, MILLI, Idle::SpinThenYield).err(), Some(Status::TIMED_OUT));
    let view = p.consumer.try_view(id).unwrap();
    assert_eq!(view.data, &[0]);
    assert_eq!(p.consumer.release_view(id), Status::OK);
    assert_eq!(p.consumer.release_view(id), Status::INVALID_CONSUMER);
    let mut got = Vec::new();
    let b = p.consumer.drain(id, 10, |m| got.push(m[0]));
    assert_eq!((b.status, b.count), (Status::OK, 10));
    assert_eq!(got, (1..11).collect::<Vec<u8>>());
    let mut lengths = [0u32; 32];
    let mut room = [0u8; 4096];
    let b = p.consumer.recv_batch(id, &mut room, &mut lengths);
    assert_eq!((b.status, b.count), (Status::OK, 5));
    assert_eq!(&room[..5], &[11, 12, 13, 14, 15]);
    assert_eq!(p.consumer.drain(id, 10, |_| ()).status, Status::EMPTY);

    assert_eq!(p.producer.push_wait(b"a", SECOND, Idle::default()), Status::OK);
    let mut claim = p.producer.claim_wait(1, SECOND, Idle::default()).unwrap();
    claim.data()[0] = b'b';
    claim.commit(1);
    let s = p.consumer.status().unwrap();
    let c = s.consumers[id as usize];
    assert_eq!((s.capacity, s.max_message, s.producer_pid), (16, 200, std::process::id()));
    assert!(s.producer_alive && c.active && c.owner_alive);
    assert_eq!(c.lag, 2);
    assert_eq!((p.consumer.capacity(), p.consumer.max_message()), (16, 200));
    assert!(!p.consumer.is_lossy());
    assert_eq!(p.consumer.active_consumer_count(), 1);
    assert_eq!(p.consumer.unregister(id), Status::OK);
    assert_eq!(p.consumer.unregister(id), Status::INVALID_CONSUMER);
}

#[test]
fn a_panic_in_drain_delivers_the_batch_again() {
    let mut p = pair("panic");
    let id = p.consumer.register(StartAt::Latest).unwrap();
    assert_eq!(p.producer.try_push(b"1"), Status::OK);
    assert_eq!(p.producer.try_push(b"2"), Status::OK);
    let consumer = &mut p.consumer;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        consumer.drain(id, 10, |m| assert_ne!(m, b"2"));
    }));
    assert!(caught.is_err());
    let mut got = Vec::new();
    assert_eq!(p.consumer.drain(id, 10, |m| got.extend_from_slice(m)).count, 2);
    assert_eq!(got, b"12");
}

#[test]
fn producer_role_and_consumer_slots() {
    let mut p = pair("role");
    let e = p.consumer.claim_producer().err().unwrap();
    assert_eq!(e.status, Status::PRODUCER_BUSY);
    assert_eq!(p.consumer.try_push(b""), Status::PRODUCER_BUSY);
    p.producer.release_producer();
    p.consumer.claim_producer().unwrap();
    assert!(p.consumer.is_producer() && !p.producer.is_producer());
    for _ in 0..ringcast::sys::RINGCAST_MAX_CONSUMERS {
        p.producer.register(StartAt::Oldest).unwrap();
    }
    assert_eq!(p.producer.register(StartAt::Latest).err().unwrap().status, Status::NO_CONSUMER_SLOT);
    assert_eq!(p.producer.reap_dead_consumers().unwrap(), 0);
}

#[test]
fn lossy_ring_reports_lap() {
    let options = CreateOptions { lossy: true, max_message: 52, ..Default::default() };
    let mut ring = Ring::create_anonymous(4, &options).unwrap();
    let id = ring.register(StartAt::Latest).unwrap();
    for i in 0..10u8 {
        assert_eq!(ring.try_push(&[i]), Status::OK);
    }
    let mut buf = [0u8; 64];
    let r = ring.try_recv(id, &mut buf);
    assert_eq!((r.status, r.missed), (Status::LAPPED, 7));
    let r = ring.try_recv(id, &mut buf);
    assert_eq!((r.status, buf[0]), (Status::OK, 7));
}
