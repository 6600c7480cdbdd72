//! Rust binding of ringcast's shared-memory broadcast ring: one producer
//! process, up to 16 consumer processes, each of which receives every
//! message in order. It calls the C ABI (ringcast/ringcast.h, declared in
//! [`sys`]) and links the C++ library found with pkg-config (ringcast-c).
//!
//! The semantics and costs are those of ringcast::BroadcastRing
//! (include/ringcast/broadcast_ring.hpp). A [`Ring`] may move between threads
//! but not be shared by them (it is `Send`, not `Sync`), which keeps the C++
//! rules (one producing thread, one thread per consumer id) without locks:
//! open one handle per thread. Hot-path calls return a [`Status`] and do not
//! allocate; setup calls return a [`Result`] whose [`Error`] carries the
//! library's message. docs/bindings.md has a guide.

pub mod sys;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::c_void;
use std::ptr::{self, NonNull};
use std::time::Duration;

/// A call's outcome (ringcast_status): [`Status::OK`], [`Status::FULL`], ...
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub sys::ringcast_status);

impl Status {
    pub const OK: Status = Status(sys::RINGCAST_OK);
    pub const FULL: Status = Status(sys::RINGCAST_FULL);
    pub const EMPTY: Status = Status(sys::RINGCAST_EMPTY);
    pub const NO_CONSUMER_SLOT: Status = Status(sys::RINGCAST_NO_CONSUMER_SLOT);
    pub const INVALID_CONSUMER: Status = Status(sys::RINGCAST_INVALID_CONSUMER);
    pub const PAYLOAD_TOO_LARGE: Status = Status(sys::RINGCAST_PAYLOAD_TOO_LARGE);
    pub const LAYOUT_MISMATCH: Status = Status(sys::RINGCAST_LAYOUT_MISMATCH);
    pub const IO_ERROR: Status = Status(sys::RINGCAST_IO_ERROR);
    pub const NOT_READY: Status = Status(sys::RINGCAST_NOT_READY);
    pub const PRODUCER_BUSY: Status = Status(sys::RINGCAST_PRODUCER_BUSY);
    pub const NOT_PRODUCER: Status = Status(sys::RINGCAST_NOT_PRODUCER);
    pub const LAPPED: Status = Status(sys::RINGCAST_LAPPED);
    pub const STALLED: Status = Status(sys::RINGCAST_STALLED);
    pub const PRODUCER_DEAD: Status = Status(sys::RINGCAST_PRODUCER_DEAD);
    pub const TIMED_OUT: Status = Status(sys::RINGCAST_TIMED_OUT);
    pub const ALREADY_EXISTS: Status = Status(sys::RINGCAST_ALREADY_EXISTS);
    pub const BUFFER_TOO_SMALL: Status = Status(sys::RINGCAST_BUFFER_TOO_SMALL);
    pub const INVALID_ARGUMENT: Status = Status(sys::RINGCAST_INVALID_ARGUMENT);
    pub const OUT_OF_MEMORY: Status = Status(sys::RINGCAST_OUT_OF_MEMORY);
    pub const CANCELLED: Status = Status(sys::RINGCAST_CANCELLED);

    /// The stable lower-case name ("full").
    pub fn name(self) -> &'static str {
        // A static NUL-terminated ASCII literal of the library.
        unsafe { CStr::from_ptr(sys::ringcast_status_name(self.0)) }.to_str().unwrap_or("unknown")
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failed setup call: its status and the library's text
/// ("create: open: io_error: No such file or directory").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A setup call's status as a Result, with this thread's message (the C ABI
/// keeps it per thread; the call ran on this one).
fn setup(status: sys::ringcast_status) -> Result<()> {
    if status == sys::RINGCAST_OK {
        return Ok(());
    }
    let message = unsafe { CStr::from_ptr(sys::ringcast_last_error_message()) };
    Err(Error { status: Status(status), message: message.to_string_lossy().into_owned() })
}

fn path_error(path: &str) -> Error {
    Error { status: Status::INVALID_ARGUMENT, message: format!("{:?}: a path with a NUL byte", path) }
}

/// Where a new consumer starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// Messages published from now on.
    Latest,
    /// The oldest message still in the ring.
    Oldest,
}

/// How a `_wait` call idles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Idle {
    #[default]
    SpinThenBlock,
    Spin,
    SpinThenYield,
    Block,
}

impl Idle {
    fn raw(self) -> sys::ringcast_idle {
        match self {
            Idle::SpinThenBlock => sys::RINGCAST_IDLE_SPIN_THEN_BLOCK,
            Idle::Spin => sys::RINGCAST_IDLE_SPIN,
            Idle::SpinThenYield => sys::RINGCAST_IDLE_SPIN_THEN_YIELD,
            Idle::Block => sys::RINGCAST_IDLE_BLOCK,
        }
    }
}

fn nanos(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX)
}

pub use sys::ringcast_create_options as CreateOptions;
pub use sys::ringcast_open_options as OpenOptions;
pub use sys::ringcast_ring_status as RingStatus;

/// A consumer registered through a [`Ring`].
pub type ConsumerId = u32;

/// One receive's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvResult {
    pub status: Status,
    /// Bytes written when OK; bytes needed when BUFFER_TOO_SMALL.
    pub length: usize,
    /// Positions skipped when LAPPED.
    pub missed: u64,
}

impl From<sys::ringcast_recv_result> for RecvResult {
    fn from(r: sys::ringcast_recv_result) -> Self {
        RecvResult { status: Status(r.status), length: r.length as usize, missed: r.missed }
    }
}

/// A batch's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchResult {
    /// OK when messages came, else as [`RecvResult`]'s.
    pub status: Status,
    pub count: usize,
    pub missed: u64,
}

impl From<sys::ringcast_batch_result> for BatchResult {
    fn from(b: sys::ringcast_batch_result) -> Self {
        BatchResult { status: Status(b.status), count: b.count, missed: b.missed }
    }
}

/// A handle on a ring; dropping it unregisters its consumers, aborts an open
/// claim, gives the producer role up and unmaps.
pub struct Ring {
    raw: NonNull<sys::ringcast_ring>,
}

// The handle may move to another thread; its calls are never made from two
// threads at once (not Sync: every call takes &mut self or is an observer).
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        unsafe { sys::ringcast_close(self.raw.as_ptr()) }
    }
}

impl Ring {
    fn adopt(status: sys::ringcast_status, raw: *mut sys::ringcast_ring) -> Result<Ring> {
        setup(status)?;
        Ok(Ring { raw: NonNull::new(raw).expect("the C ABI returned OK without a handle") })
    }

    /// Creates a ring file at `path` with `capacity` 64-byte slots (2..2^30).
    pub fn create(path: &str, capacity: u64, options: &CreateOptions) -> Result<Ring> {
        let path_c = CString::new(path).map_err(|_| path_error(path))?;
        let mut raw = ptr::null_mut();
        let status = unsafe { sys::ringcast_create(path_c.as_ptr(), capacity, options, &mut raw) };
        Ring::adopt(status, raw)
    }

    /// A ring in anonymous shared memory, for the threads of this process.
    pub fn create_anonymous(capacity: u64, options: &CreateOptions) -> Result<Ring> {
        let mut raw = ptr::null_mut();
        let status = unsafe { sys::ringcast_create_anonymous(capacity, options, &mut raw) };
        Ring::adopt(status, raw)
    }

    /// Opens an existing ring file.
    pub fn open(path: &str, options: &OpenOptions) -> Result<Ring> {
        let path_c = CString::new(path).map_err(|_| path_error(path))?;
        let mut raw = ptr::null_mut();
        let status = unsafe { sys::ringcast_open(path_c.as_ptr(), options, &mut raw) };
        Ring::adopt(status, raw)
    }

    fn ptr(&self) -> *mut sys::ringcast_ring {
        self.raw.as_ptr()
    }

    /// Takes the producer role now (try_push takes it lazily).
    pub fn claim_producer(&mut self) -> Result<()> {
        setup(unsafe { sys::ringcast_claim_producer(self.ptr()) })
    }

    pub fn release_producer(&mut self) {
        unsafe { sys::ringcast_release_producer(self.ptr()) }
    }

    pub fn is_producer(&self) -> bool {
        unsafe { sys::ringcast_is_producer(self.ptr()) }
    }

    /// Registers a consumer starting at `start`.
    pub fn register(&mut self, start: StartAt) -> Result<ConsumerId> {
        let raw_start = match start {
            StartAt::Latest => sys::RINGCAST_START_LATEST,
            StartAt::Oldest => sys::RINGCAST_START_OLDEST,
        };
        let mut id = 0;
        setup(unsafe { sys::ringcast_register(self.ptr(), raw_start, &mut id) })?;
        Ok(id)
    }

    /// Frees the entry: INVALID_CONSUMER if it is not this handle's.
    pub fn unregister(&mut self, id: ConsumerId) -> Status {
        Status(unsafe { sys::ringcast_unregister(self.ptr(), id) })
    }

    /// Frees the entries of consumers whose owner died; returns how many.
    pub fn reap_dead_consumers(&mut self) -> Result<usize> {
        let mut freed = 0;
        setup(unsafe { sys::ringcast_reap_dead_consumers(self.ptr(), &mut freed) })?;
        Ok(freed)
    }

    /// Copies `payload` into the ring: OK, FULL, PAYLOAD_TOO_LARGE,
    /// NOT_PRODUCER, PRODUCER_BUSY.
    #[inline]
    pub fn try_push(&mut self, payload: &[u8]) -> Status {
        Status(unsafe { sys::ringcast_try_push(self.ptr(), payload.as_ptr().cast(), payload.len()) })
    }

    /// Pushes messages in order until one does not fit: their bytes back to
    /// back in `data`, their lengths in `lengths`; the producer position is
    /// published once per up to 64. INVALID_ARGUMENT (nothing pushed) if the
    /// lengths add up to more than `data` holds.
    pub fn try_push_batch(&mut self, data: &[u8], lengths: &[u32]) -> BatchResult {
        let total = lengths.iter().try_fold(0usize, |sum, &n| sum.checked_add(n as usize));
        if total.map_or(true, |t| t > data.len()) {
            return BatchResult { status: Status::INVALID_ARGUMENT, count: 0, missed: 0 };
        }
        unsafe { sys::ringcast_try_push_batch(self.ptr(), data.as_ptr().cast(), lengths.as_ptr(), lengths.len()) }
            .into()
    }

    /// try_push waiting up to `timeout` for room: TIMED_OUT after it.
    pub fn push_wait(&mut self, payload: &[u8], timeout: Duration, idle: Idle) -> Status {
        Status(unsafe {
            sys::ringcast_push_wait(self.ptr(), payload.as_ptr().cast(), payload.len(), nanos(timeout), idle.raw())
        })
    }

    fn claimed(&mut self, status: sys::ringcast_status, room: *mut c_void, length: usize) -> Result<Claim<'_>, Status> {
        if status != sys::RINGCAST_OK {
            return Err(Status(status));
        }
        // The room is `length` bytes the handle reserved for this claim alone,
        // until commit or abort (which the claim's lifetime orders).
        let data = unsafe { std::slice::from_raw_parts_mut(room.cast::<u8>(), length) };
        Ok(Claim { ring: self, data })
    }

    /// Reserves room for a `length`-byte message at the head, to be written
    /// through the [`Claim`] and then committed (dropping it aborts).
    pub fn try_claim(&mut self, length: usize) -> Result<Claim<'_>, Status> {
        let mut room = ptr::null_mut();
        let status = unsafe { sys::ringcast_try_claim(self.ptr(), length, &mut room) };
        self.claimed(status, room, length)
    }

    /// try_claim waiting up to `timeout` for room.
    pub fn claim_wait(&mut self, length: usize, timeout: Duration, idle: Idle) -> Result<Claim<'_>, Status> {
        let mut room = ptr::null_mut();
        let status = unsafe { sys::ringcast_claim_wait(self.ptr(), length, &mut room, nanos(timeout), idle.raw()) };
        self.claimed(status, room, length)
    }

    /// Copies the next message for `id` into `buffer`. A buffer of at least
    /// 52 bytes takes the fast path for short messages.
    #[inline]
    pub fn try_recv(&mut self, id: ConsumerId, buffer: &mut [u8]) -> RecvResult {
        unsafe { sys::ringcast_try_recv(self.ptr(), id, buffer.as_mut_ptr().cast(), buffer.len()) }.into()
    }

    /// try_recv waiting up to `timeout` for a message.
    pub fn recv_wait(&mut self, id: ConsumerId, buffer: &mut [u8], timeout: Duration, idle: Idle) -> RecvResult {
        unsafe {
            sys::ringcast_recv_wait(
                self.ptr(),
                id,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                nanos(timeout),
                idle.raw(),
            )
        }
        .into()
    }

    /// Receives up to `max` messages, calling `on_message` with each (zero
    /// copy where a view would be), and publishes the cursor once. A panic in
    /// `on_message` stops the batch without consuming any of it (the next
    /// call delivers those messages again) and is resumed once back in Rust.
    pub fn drain<F: FnMut(&[u8])>(&mut self, id: ConsumerId, max: usize, mut on_message: F) -> BatchResult {
        struct Context<'a> {
            f: &'a mut dyn FnMut(&[u8]),
            panic: Option<Box<dyn std::any::Any + Send>>,
        }
        // No unwinding through C: a panic is caught here, stops the batch
        // (nonzero) and is resumed below.
        unsafe extern "C" fn deliver(context: *mut c_void, data: *const c_void, length: usize) -> i32 {
            let context = &mut *context.cast::<Context<'_>>();
            let message = if length == 0 { &[][..] } else { std::slice::from_raw_parts(data.cast::<u8>(), length) };
            let f = &mut context.f;
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(message))) {
                Ok(()) => 0,
                Err(panic) => {
                    context.panic = Some(panic);
                    1
                }
            }
        }
        let mut context = Context { f: &mut on_message, panic: None };
        let result =
            unsafe { sys::ringcast_drain(self.ptr(), id, deliver, (&mut context as *mut Context<'_>).cast(), max) };
        if let Some(panic) = context.panic {
            std::panic::resume_unwind(panic);
        }
        result.into()
    }

    /// Receives up to `lengths.len()` messages in one call: their bytes back
    /// to back in `buffer`, their lengths in `lengths[..count]`. It takes as
    /// many as surely fit (`buffer.len() / max_message()` per round); with
    /// less room than one max_message it receives one as try_recv does.
    pub fn recv_batch(&mut self, id: ConsumerId, buffer: &mut [u8], lengths: &mut [u32]) -> BatchResult {
        unsafe {
            sys::ringcast_recv_batch(
                self.ptr(),
                id,
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                lengths.as_mut_ptr(),
                lengths.len(),
            )
        }
        .into()
    }

    /// Reads the next message for `id` without consuming it; the view
    /// borrows the handle, so it ends before the next call on it.
    pub fn try_view(&mut self, id: ConsumerId) -> Result<View<'_>, (Status, u64)> {
        let mut v = sys::ringcast_view { data: ptr::null(), length: 0, missed: 0, in_place: false };
        let status = unsafe { sys::ringcast_try_view(self.ptr(), id, &mut v) };
        if status != sys::RINGCAST_OK {
            return Err((Status(status), v.missed));
        }
        let data = if v.length == 0 { &[][..] } else { unsafe { std::slice::from_raw_parts(v.data.cast(), v.length) } };
        Ok(View { data, in_place: v.in_place })
    }

    /// Consumes the message the last try_view returned.
    pub fn release_view(&mut self, id: ConsumerId) -> Status {
        Status(unsafe { sys::ringcast_release_view(self.ptr(), id) })
    }

    /// Positions published but not yet received by `id`.
    pub fn lag(&self, id: ConsumerId) -> u64 {
        unsafe { sys::ringcast_lag(self.ptr(), id) }
    }

    pub fn producer_position(&self) -> u64 {
        unsafe { sys::ringcast_producer_position(self.ptr()) }
    }

    pub fn capacity(&self) -> u64 {
        unsafe { sys::ringcast_capacity(self.ptr()) }
    }

    /// The largest payload a message may have.
    pub fn max_message(&self) -> usize {
        unsafe { sys::ringcast_max_message(self.ptr()) }
    }

    pub fn is_lossy(&self) -> bool {
        unsafe { sys::ringcast_is_lossy(self.ptr()) }
    }

    pub fn is_fully_drained(&self) -> bool {
        unsafe { sys::ringcast_is_fully_drained(self.ptr()) }
    }

    pub fn active_consumer_count(&self) -> usize {
        unsafe { sys::ringcast_active_consumer_count(self.ptr()) }
    }

    /// A moment's view of the whole ring (one fcntl per active consumer).
    pub fn status(&self) -> Result<RingStatus> {
        let mut s = RingStatus::default();
        setup(unsafe { sys::ringcast_get_status(self.ptr(), &mut s) })?;
        Ok(s)
    }
}

/// Room claimed at the head of a ring ([`Ring::try_claim`]).
pub struct Claim<'a> {
    ring: &'a mut Ring,
    data: &'a mut [u8],
}

impl Claim<'_> {
    /// The claimed bytes, to write the message into.
    pub fn data(&mut self) -> &mut [u8] {
        &mut self.data[..]
    }

    /// Publishes the message with its first `length` bytes.
    pub fn commit(self, length: usize) {
        let claim = std::mem::ManuallyDrop::new(self);
        unsafe { sys::ringcast_commit(claim.ring.ptr(), length) };
    }

    /// Gives the room back unpublished (as dropping the claim does).
    pub fn abort(self) {}
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        unsafe { sys::ringcast_abort(self.ring.ptr()) };
    }
}

/// The next message, read without consuming it ([`Ring::try_view`]).
#[derive(Debug)]
pub struct View<'a> {
    pub data: &'a [u8],
    /// The bytes are in the ring itself (zero copy).
    pub in_place: bool,
}
