#include "vos/uring.h"

#include <cerrno>

#include <fmt/format.h>

namespace ros2::vos {

Result<std::unique_ptr<Uring>> Uring::Create(unsigned entries, int event_fd) {
  std::unique_ptr<Uring> u(new Uring());
  // Completions are posted by task work on the owner thread. Without
  // COOP_TASKRUN the kernel interrupts the thread with an IPI for it whenever
  // it is running (it is, spinning between requests); with it the work waits
  // for the thread's next system call, and TASKRUN_FLAG lets Reap see that
  // some is pending. A sleeping thread is still woken. Kernels before 5.19
  // refuse the flags: they get a plain ring.
  io_uring_params params{};
  params.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
  int rc = io_uring_queue_init_params(entries, &u->ring_, &params);
  if (rc == -EINVAL) {
    params = io_uring_params{};
    rc = io_uring_queue_init_params(entries, &u->ring_, &params);
  }
  if (rc < 0) return Status::FromErrno(-rc, fmt::format("vos: io_uring_queue_init({})", entries));
  u->initialized_ = true;
  if (event_fd >= 0) {
    rc = io_uring_register_eventfd(&u->ring_, event_fd);
    if (rc < 0) return Status::FromErrno(-rc, "vos: io_uring_register_eventfd");
  }
  return u;
}

Uring::~Uring() {
  if (initialized_) io_uring_queue_exit(&ring_);
}

Status Uring::RegisterFile(int fd) {
  int rc = io_uring_register_files(&ring_, &fd, 1);
  if (rc < 0) return Status::FromErrno(-rc, "vos: io_uring_register_files");
  fixed_file_ = true;
  return Status::Ok();
}

io_uring_sqe* Uring::GetSqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    Submit();
    sqe = io_uring_get_sqe(&ring_);
  }
  if (sqe != nullptr) ++queued_;
  return sqe;
}

int Uring::Submit() {
  int rc = io_uring_submit(&ring_);
  if (rc >= 0) queued_ = 0;
  Count(rc);
  return rc;
}

int Uring::SubmitAndWait(unsigned wait_nr) {
  int rc = io_uring_submit_and_wait(&ring_, wait_nr);
  if (rc >= 0) queued_ = 0;
  Count(rc);
  return rc;
}

}  // namespace ros2::vos
