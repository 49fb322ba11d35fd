// Uring: an owned io_uring instance (liburing), the VOS's path to the media.
//
// Created by the extent store, used only from the target thread. Submission is
// batched: GetSqe() queues, Submit()/SubmitAndWait() enter the kernel once for
// everything queued. An eventfd registered at creation becomes readable when
// completions are posted, so the target thread can sleep in epoll. The ring and
// the registered file are released on destruction.
#pragma once

#include <liburing.h>

#include <memory>

#include "common/status.h"

namespace ros2::vos {

class Uring {
 public:
  // `event_fd` (>= 0) is registered for completion notifications.
  static Result<std::unique_ptr<Uring>> Create(unsigned entries, int event_fd);
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  // Registers `fd` as fixed file 0; FixedFile() then says whether SQEs should use it.
  Status RegisterFile(int fd);
  bool fixed_file() const { return fixed_file_; }

  // A free SQE, submitting what is queued first when the ring is full; nullptr
  // when the kernel takes nothing.
  io_uring_sqe* GetSqe();
  // Enters the kernel for queued SQEs; returns their number or -errno.
  int Submit();
  // Submits and waits until at least `wait_nr` completions are available.
  int SubmitAndWait(unsigned wait_nr);
  // Runs fn(user_data, res) for every posted completion; returns how many.
  template <typename Fn>
  int Reap(Fn&& fn) {
    int n = 0;
    // Completions whose task work waits for this thread (COOP_TASKRUN).
    if (IO_URING_READ_ONCE(*ring_.sq.kflags) & IORING_SQ_TASKRUN) io_uring_get_events(&ring_);
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      unsigned head = 0;
      unsigned seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        fn(io_uring_cqe_get_data64(cqe), cqe->res);
        ++seen;
      }
      io_uring_cq_advance(&ring_, seen);
      n += static_cast<int>(seen);
      // More I/Os in flight than the completion ring holds: the kernel keeps
      // the rest on its overflow list and signals the event fd only once, so
      // they must be fetched now or they would never be seen.
      if (!io_uring_cq_has_overflow(&ring_) || io_uring_get_events(&ring_) < 0) break;
    }
    return n;
  }
  unsigned queued() const { return queued_; }
  // Submitting calls that handed the kernel SQEs, and how many (cumulative).
  uint64_t submits() const { return submits_; }
  uint64_t submitted() const { return submitted_; }

 private:
  Uring() = default;
  io_uring ring_{};
  bool initialized_ = false;
  bool fixed_file_ = false;
  unsigned queued_ = 0;
  void Count(int submitted) {
    if (submitted > 0) {
      ++submits_;
      submitted_ += static_cast<uint64_t>(submitted);
    }
  }
  uint64_t submits_ = 0;
  uint64_t submitted_ = 0;
};

}  // namespace ros2::vos
