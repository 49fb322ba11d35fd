// The client's half of offload-mode I/O: an EventQueue's reads and writes in
// flight at ros2-agent, and their completion in the queue's Poll/Wait.
#include "client/offload/agent_queue.h"

#include <cstring>

#include <fmt/format.h>

#include "client/client_internal.h"
#include "client/event_queue_impl.h"
#include "client/handle_backends.h"

namespace ros2::client {

const OffloadLink* OffloadAccess::LinkOf(const Container& container) {
  return container.backend_->offload_link();
}

std::unique_ptr<EventQueue> OffloadAccess::MakeQueue(std::shared_ptr<agent::HostSession> session) {
  auto impl = std::make_unique<EventQueue::Impl>(nullptr);
  impl->offload_ = std::make_shared<OffloadQueue>();
  impl->offload_->session = std::move(session);
  return MakeEventQueue(std::move(impl));
}

Status OffloadAccess::CompleteLater(EventQueue& queue, const Result<uint64_t>& done, IoCallback callback) {
  EventQueue::Impl& eq = queue.impl();
  if (!eq.offload_) {
    return Status::InvalidArgument("dfs: an offload-mode file system needs an event queue of its offload-mode client");
  }
  IoResult r;
  if (done.ok()) {
    r.size = *done;
  } else {
    r.status = done.status();
  }
  eq.Defer(std::move(callback), r);
  return Status::Ok();
}

Status OffloadAccess::SubmitIo(EventQueue& queue, agent::IoRequest request, const agent::ArenaBuffer& bounce,
                               std::byte* user, IoCallback callback) {
  EventQueue::Impl& eq = queue.impl();
  if (!eq.offload_) {
    return Status::InvalidArgument("dfs: an offload-mode file system needs an event queue of its offload-mode client");
  }
  OffloadQueue& q = *eq.offload_;
  std::unique_ptr<OffloadIo> io = q.TakeIo();
  io->owner = eq.offload_;
  io->callback = std::move(callback);
  io->read = request.kind == agent::IoKind::kRead;
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

size_t EventQueue::Impl::ProgressOffload(std::chrono::microseconds wait) {
  if (!offload_) return 0;
  OffloadQueue& q = *offload_;
  size_t done = 0;
  auto finish = [&](OffloadIo* io, IoResult r) {
    if (io->read && io->bounce != nullptr && r.status.ok() && r.size > 0) {
      std::memcpy(io->user, io->bounce, r.size);
    }
    if (io->bounce != nullptr) q.session->Free(agent::ArenaBuffer{io->bounce, io->bounce_offset, io->bounce_size});
    IoCallback callback = std::move(io->callback);
    q.GiveBack(std::unique_ptr<OffloadIo>(io));
    Complete(0, callback, r);
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
