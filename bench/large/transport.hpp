// The transports of the large-message benchmark behind one small interface,
// so that the harness (large_bench.cpp) runs every one of them through the
// same producer and consumer processes.
//
// One cell is one producer process and `consumers` consumer processes of
// this binary. The producer makes a Sender (creating the ring, the socket,
// the queues or the publisher), each consumer makes a Receiver (attaching
// to it), and the harness sequences them (large_bench.cpp, "Cell protocol").
//
// Lossless everywhere: a full transport makes the sender wait, never drop.
//  * ringcast copy: try_push / try_recv, and push_wait / recv_wait when full
//    or empty (CellSpec::ring_wait: kSpinThenBlock, the ring's default wait,
//    unless --ringcast-wait says otherwise).
//  * ringcast view: try_claim + commit / try_view + release_view, zero copy
//    on the blocking ring; claim_wait when full, and the receiver waits in
//    recv_wait with an empty buffer (it returns buffer_too_small, consuming
//    nothing, once a message is there): the ring has no view_wait.
//  * iceoryx 2.0: UntypedPublisher loan/publish with WAIT_FOR_CONSUMER,
//    UntypedSubscriber take/release with BLOCK_PRODUCER. iceoryx has no
//    adaptive wait, so it runs twice: iceoryx-poll polls take() (its lowest
//    latency when the receiver has a CPU of its own), iceoryx-wait sleeps in
//    a WaitSet when take() finds nothing (for more processes than CPUs, or a
//    busy host). The targets compare with the better of the two per cell.
//  * zmq: XPUB with XPUB_NODROP on ipc:// (SNDHWM = RCVHWM = depth; a full
//    pipe returns EAGAIN and the sender retries), SUB per consumer,
//    zmq_msg_recv read in place.
//  * boost: Boost.Interprocess message_queue, one per consumer (it is not a
//    broadcast primitive: the sender sends each message N times), blocking
//    send and receive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "message.hpp"
#include "ringcast/broadcast_ring.hpp"

namespace ringcast::bench {

enum class Kind : std::uint8_t { kRingcastCopy, kRingcastView, kIceoryxPoll, kIceoryxWait, kZmq, kBoost };

// What every process of one cell agrees on (the harness passes it on the
// command line).
struct CellSpec {
  Kind kind = Kind::kRingcastCopy;
  std::size_t size = 0;                                   // bytes per message
  int consumers = 1;                                      // N
  std::uint64_t depth = 256;                              // messages a transport may hold per consumer
  std::string tag;                                        // unique prefix of the cell's shared names
  int index = 0;                                          // a consumer's index, 0..N-1
  IdleStrategy ring_wait = IdleStrategy::kSpinThenBlock;  // ringcast's waits, both sides
  Touch touch = Touch::kEnds;
};

// Producer side. Thread: the producer's main thread only.
class Sender {
 public:
  virtual ~Sender() = default;
  // Returns once every consumer is attached and nothing sent can be lost
  // (zmq: every subscription has reached the XPUB socket).
  virtual void wait_ready() {}
  // Sends message `h` of size() bytes, waiting while the transport is full.
  virtual void send(const MessageHeader& h) = 0;
  // Sends that found the transport full at first.
  std::uint64_t full_hits = 0;
};

// Consumer side: receives until the sink says the cell is over.
class MessageSink {
 public:
  virtual ~MessageSink() = default;
  // Called once per message, in order; the bytes are valid during the call.
  // Returns true after the cell's last message.
  virtual bool on_message(std::span<const std::byte> m) = 0;
};

class Receiver {
 public:
  virtual ~Receiver() = default;
  virtual void run(MessageSink& sink) = 0;
};

// Each throws std::runtime_error on a setup or transport error.
std::unique_ptr<Sender> make_ringcast_sender(const CellSpec& spec);
std::unique_ptr<Receiver> make_ringcast_receiver(const CellSpec& spec);
std::unique_ptr<Sender> make_zmq_sender(const CellSpec& spec);
std::unique_ptr<Receiver> make_zmq_receiver(const CellSpec& spec);
std::unique_ptr<Sender> make_boost_sender(const CellSpec& spec);
std::unique_ptr<Receiver> make_boost_receiver(const CellSpec& spec);
std::unique_ptr<Sender> make_iceoryx_sender(const CellSpec& spec);
std::unique_ptr<Receiver> make_iceoryx_receiver(const CellSpec& spec);

// Removes what a cell may have left behind if a process died (ring file,
// socket file, queues). The transports remove them themselves otherwise.
void remove_ringcast_names(const std::string& tag);
void remove_zmq_names(const std::string& tag);
void remove_boost_names(const std::string& tag, int consumers);

// The ring capacity (slots) a cell uses: `depth` messages of `size` bytes,
// rounded down to a power of two, but at least what the ring needs for one
// message of that size (two blocks).
[[nodiscard]] std::uint64_t ring_capacity(std::size_t size, std::uint64_t depth) noexcept;

}  // namespace ringcast::bench
