// Offload mode's side of the client (docs/agent.md): the client's one session
// with ros2-agent, the labels a Pool / Container handle names, and the I/O an
// EventQueue has in flight at the agent. OffloadAccess is the one door the
// agent-backed DFS (src/dfs/offload) goes through to an EventQueue.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "client/event_queue_impl.h"
#include "client/offload/host_session.h"
#include "ros2/client.h"

namespace ros2::client {

// Offload mode (ClientOptions::agent_socket): the client's one session with
// ros2-agent, and the labels a Pool / Container handle names. The agent
// resolves them when the DFS mounts the container (docs/agent.md).
struct OffloadLink {
  std::shared_ptr<agent::HostSession> session;
  std::string pool;
  std::string container;
};

struct OffloadQueue;

// One asynchronous read or write of an offload-mode EventQueue at the agent
// (its user_data in the agent session is this record's address).
struct OffloadIo {
  std::shared_ptr<OffloadQueue> owner;
  IoCallback callback;
  bool read = false;
  std::byte* bounce = nullptr;  // an arena copy of a buffer outside the arena
  uint64_t bounce_offset = 0;
  uint64_t bounce_size = 0;
  std::byte* user = nullptr;  // where a bounced read lands
  OffloadIo* prev = nullptr;  // the owner's pending list
  OffloadIo* next = nullptr;
};

// The agent session is shared by every queue of the client: a queue that
// reaps another queue's completion leaves it in that queue's mailbox.
struct OffloadQueue {
  std::shared_ptr<agent::HostSession> session;
  std::mutex mu;
  std::vector<std::pair<OffloadIo*, IoResult>> mailbox;  // GUARDED_BY(mu)
  // Set after a push into the mailbox: the owner looks at it only then,
  // without taking mu on every poll.
  std::atomic<bool> mailbox_posted{false};
  // Submitted, not yet completed: an intrusive list, so tracking an I/O
  // allocates nothing. Only the owner's thread (the one its EventQueue is
  // bound to) submits and finishes its I/Os, so the list needs no lock.
  OffloadIo* pending = nullptr;
  size_t pending_count = 0;
  // The owner's reaping buffer (only its thread polls this queue).
  std::array<agent::IoCompletion, 16> reaped;
  // Finished records kept for the next I/O (the owner's thread only), so an
  // I/O allocates nothing once the queue has run at its depth.
  std::vector<std::unique_ptr<OffloadIo>> spare;
  static constexpr size_t kSpareKept = 256;

  std::unique_ptr<OffloadIo> TakeIo() {
    if (spare.empty()) return std::make_unique<OffloadIo>();
    std::unique_ptr<OffloadIo> io = std::move(spare.back());
    spare.pop_back();
    return io;
  }
  // Clears the record (its owner reference and callback too) and keeps it.
  void GiveBack(std::unique_ptr<OffloadIo> io) {
    if (spare.size() >= kSpareKept) return;
    *io = OffloadIo{};
    spare.push_back(std::move(io));
  }

  void Link(OffloadIo* io) {
    io->prev = nullptr;
    io->next = pending;
    if (pending != nullptr) pending->prev = io;
    pending = io;
    ++pending_count;
  }
  void Unlink(OffloadIo* io) {
    if (io->prev != nullptr) {
      io->prev->next = io->next;
    } else {
      pending = io->next;
    }
    if (io->next != nullptr) io->next->prev = io->prev;
    io->prev = io->next = nullptr;
    --pending_count;
  }
};

// An offload-mode queue's backend (event_queue_impl.h): its I/O in flight at
// the agent, and the operations that already ran, completed in its next
// Poll/Wait/WaitAny.
class AgentQueue final : public QueueBackend {
 public:
  explicit AgentQueue(std::shared_ptr<agent::HostSession> session);
  size_t Poll(EventQueue::Impl& q, std::span<Event> out) override;
  Result<size_t> Wait(EventQueue::Impl& q, std::span<Event> out, size_t min_events,
                      std::chrono::milliseconds timeout) override;
  size_t WaitAny(EventQueue::Impl& q, std::chrono::microseconds timeout) override;
  // The agent completes every entry or the session fails them all; bounded
  // in case the agent hangs (then what is left is never run: its callbacks
  // may reference what the caller is destroying).
  void Quiesce(EventQueue::Impl& q) override;
  AgentQueue* agent() override { return this; }

  // An operation that already ran: it completes (its callback runs, or its
  // event is queued) in the next Poll/Wait/WaitAny.
  void Defer(EventQueue::Impl& q, IoCallback callback, const IoResult& result);
  // Queues `request` at the agent as an operation of `q` (SubmitIo).
  Status Submit(EventQueue::Impl& q, agent::IoRequest& request, const agent::ArenaBuffer& bounce, std::byte* user,
                IoCallback callback);

 private:
  size_t RunDeferred(EventQueue::Impl& q);
  // Reaps the agent's completions (waiting up to `wait` for one when none is
  // ready) and completes this queue's; returns how many.
  size_t Progress(EventQueue::Impl& q, std::chrono::microseconds wait);

  std::shared_ptr<OffloadQueue> queue_;
  std::deque<std::pair<IoCallback, IoResult>> deferred_;
};

// What the agent-backed DFS needs of the client's handles.
struct OffloadAccess {
  // The agent session a container was opened through; null for a direct-mode container.
  static const OffloadLink* LinkOf(const Container& container);
  // An event queue whose reads and writes are in flight at the agent.
  static std::unique_ptr<EventQueue> MakeQueue(std::shared_ptr<agent::HostSession> session);
  // Completes `eq`'s operation with `done` (an operation that already ran)
  // in its next Poll/Wait/WaitAny. InvalidArgument for a direct-mode queue.
  static Status CompleteLater(EventQueue& eq, const Result<uint64_t>& done, IoCallback callback);
  // Queues `request` (its buffer in the arena: the caller's, or `bounce`, an
  // arena copy of `user`'s bytes) at the agent as an operation of `eq`; its
  // completion runs `callback` in eq's Poll/Wait. InvalidArgument for a
  // direct-mode queue; on any error nothing was queued.
  static Status SubmitIo(EventQueue& eq, agent::IoRequest request, const agent::ArenaBuffer& bounce, std::byte* user,
                         IoCallback callback);
};

}  // namespace ros2::client
