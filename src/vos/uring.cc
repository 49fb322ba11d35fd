#include "vos/uring.h"

#include <fmt/format.h>

namespace ros2::vos {

Result<std::unique_ptr<Uring>> Uring::Create(unsigned entries, int event_fd) {
  std::unique_ptr<Uring> u(new Uring());
  int rc = io_uring_queue_init(entries, &u->ring_, 0);
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
  return rc;
}

int Uring::SubmitAndWait(unsigned wait_nr) {
  int rc = io_uring_submit_and_wait(&ring_, wait_nr);
  if (rc >= 0) queued_ = 0;
  return rc;
}

}  // namespace ros2::vos
