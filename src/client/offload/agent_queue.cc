// The client's half of offload-mode I/O: an EventQueue's reads and writes in
// flight at ros2-agent, and their completion in the queue's Poll/Wait.
#include "client/offload/agent_queue.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "client/event_queue_impl.h"
#include "client/handle_backends.h"

namespace ros2::client {

const OffloadLink* OffloadAccess::LinkOf(const Container& container) {
  return container.impl().offload_link();
}

std::unique_ptr<EventQueue> OffloadAccess::MakeQueue(std::shared_ptr<agent::HostSession> session) {
  return MakeEventQueue(std::make_unique<AgentQueue>(std::move(session)));
}

namespace {

AgentQueue* AgentOf(EventQueue& queue) {
  return queue.impl().backend().agent();
}

constexpr const char* kNeedsOffloadQueue =
    "dfs: an offload-mode file system needs an event queue of its offload-mode client";

}  // namespace

Status OffloadAccess::CompleteLater(EventQueue& queue, const Result<uint64_t>& done, IoCallback callback) {
  AgentQueue* agent = AgentOf(queue);
  if (agent == nullptr) return Status::InvalidArgument(kNeedsOffloadQueue);
  IoResult r;
  if (done.ok()) {
    r.size = *done;
  } else {
    r.status = done.status();
  }
  agent->Defer(queue.impl(), std::move(callback), r);
  return Status::Ok();
}

Status OffloadAccess::SubmitIo(EventQueue& queue, agent::IoRequest request, const agent::ArenaBuffer& bounce,
                               std::byte* user, IoCallback callback) {
  AgentQueue* agent = AgentOf(queue);
  if (agent == nullptr) return Status::InvalidArgument(kNeedsOffloadQueue);
  return agent->Submit(queue.impl(), request, bounce, user, std::move(callback));
}

AgentQueue::AgentQueue(std::shared_ptr<agent::HostSession> session) : queue_(std::make_shared<OffloadQueue>()) {
  queue_->session = std::move(session);
}

Status AgentQueue::Submit(EventQueue::Impl& eq, agent::IoRequest& request, const agent::ArenaBuffer& bounce,
                          std::byte* user, IoCallback callback) {
  OffloadQueue& q = *queue_;
  std::unique_ptr<OffloadIo> io = q.TakeIo();
  io->owner = queue_;
  io->callback = std::move(callback);
  io->read = request.kind == agent::RingOp::kRead;
  if (bounce) {
    io->bounce = bounce.data;
    io->bounce_offset = bounce.offset;
    io->bounce_size = bounce.size;
    io->user = user;
  }
  request.user_data = reinterpret_cast<uint64_t>(io.get());
  q.Link(io.get());  // before Submit: another queue may reap the completion at once
  if (Status st = q.session->Submit({&request, 1}); !st.ok()) {
    q.Unlink(io.get());
    q.GiveBack(std::move(io));
    return st;
  }
  ++eq.in_flight_;
  io.release();
  return Status::Ok();
}

void AgentQueue::Defer(EventQueue::Impl& q, IoCallback callback, const IoResult& result) {
  ++q.in_flight_;
  deferred_.emplace_back(std::move(callback), result);
}

size_t AgentQueue::RunDeferred(EventQueue::Impl& q) {
  size_t ran = 0;
  while (!deferred_.empty()) {
    auto [callback, result] = std::move(deferred_.front());
    deferred_.pop_front();
    q.Complete(0, callback, result);
    ++ran;
  }
  return ran;
}

void AgentQueue::Quiesce(EventQueue::Impl& q) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (q.in_flight_ > deferred_.size() && std::chrono::steady_clock::now() < end) {
    Progress(q, std::chrono::milliseconds(10));
  }
  RunDeferred(q);
}

size_t AgentQueue::Poll(EventQueue::Impl& q, std::span<Event> out) {
  Progress(q, std::chrono::milliseconds(0));
  RunDeferred(q);
  return q.Drain(out);
}

Result<size_t> AgentQueue::Wait(EventQueue::Impl& q, std::span<Event> out, size_t min_events,
                                std::chrono::milliseconds timeout) {
  RunDeferred(q);
  const size_t reachable = std::min(min_events, std::min(out.size(), q.ready_.size() + q.in_flight_));
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (q.ready_.size() < reachable && q.in_flight_ > 0) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    Progress(q, std::min<std::chrono::microseconds>(std::chrono::duration_cast<std::chrono::microseconds>(end - now),
                                                    std::chrono::milliseconds(10)));
    RunDeferred(q);
  }
  if (q.ready_.size() < reachable && q.in_flight_ > 0) return q.WaitTimedOut(reachable, timeout);
  return q.Drain(out);
}

size_t AgentQueue::WaitAny(EventQueue::Impl& q, std::chrono::microseconds timeout) {
  const uint64_t before = q.completions_;
  const auto end = std::chrono::steady_clock::now() + timeout;
  RunDeferred(q);
  while (q.completions_ == before && q.in_flight_ > 0) {
    // To the microsecond: a wait rounded down to whole milliseconds would
    // poll without sleeping through the last one.
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    Progress(q, std::min<std::chrono::microseconds>(left, std::chrono::milliseconds(10)));
    RunDeferred(q);
  }
  return static_cast<size_t>(q.completions_ - before);
}

size_t AgentQueue::Progress(EventQueue::Impl& eq, std::chrono::microseconds wait) {
  OffloadQueue& q = *queue_;
  size_t done = 0;
  auto finish = [&](OffloadIo* io, IoResult r) {
    if (io->read && io->bounce != nullptr && r.status.ok() && r.size > 0) {
      std::memcpy(io->user, io->bounce, r.size);
    }
    if (io->bounce != nullptr) q.session->Free(agent::ArenaBuffer{io->bounce, io->bounce_offset, io->bounce_size});
    IoCallback callback = std::move(io->callback);
    q.GiveBack(std::unique_ptr<OffloadIo>(io));
    eq.Complete(0, callback, r);
    ++done;
  };
  std::vector<std::pair<OffloadIo*, IoResult>> mine;
  if (q.mailbox_posted.exchange(false, std::memory_order_acq_rel)) {
    std::lock_guard<std::mutex> lock(q.mu);
    mine.swap(q.mailbox);
  }
  for (auto& [io, r] : mine) {
    q.Unlink(io);
    finish(io, r);
  }
  if (done > 0 || q.pending_count == 0) wait = std::chrono::microseconds(0);
  // A few at a time; the caller polls again.
  auto& out = q.reaped;
  auto n = q.session->Reap(out, wait.count() > 0 ? 1 : 0, wait);
  if (!n.ok()) {
    if (n.status().code() == Status::Code::kTimedOut) return done;
    // The session is gone: nothing still pending will complete.
    std::vector<OffloadIo*> lost;
    mine.clear();
    {
      std::lock_guard<std::mutex> lock(q.mu);
      mine.swap(q.mailbox);
    }
    for (auto& [io, r] : mine) q.Unlink(io);
    while (q.pending != nullptr) {
      lost.push_back(q.pending);
      q.Unlink(q.pending);
    }
    for (auto& [io, r] : mine) finish(io, r);
    for (OffloadIo* io : lost) {
      IoResult r;
      r.status = n.status();
      finish(io, r);
    }
    return done;
  }
  for (size_t i = 0; i < *n; ++i) {
    auto* io = reinterpret_cast<OffloadIo*>(out[i].user_data);
    IoResult r;
    r.status = out[i].status;
    r.size = out[i].size;
    if (io->owner.get() == &q) {
      q.Unlink(io);
      finish(io, r);
    } else {
      std::lock_guard<std::mutex> lock(io->owner->mu);
      io->owner->mailbox.emplace_back(io, r);
      io->owner->mailbox_posted.store(true, std::memory_order_release);
    }
  }
  return done;
}

}  // namespace ros2::client
