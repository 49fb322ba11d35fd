#include "bench/md_barrier.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace ros2::bench {

namespace {

Result<pthread_barrier_t*> MapBarrierFile(const std::string& path, bool create) {
  const int fd = ::open(path.c_str(), create ? (O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC) : (O_RDWR | O_CLOEXEC), 0600);
  if (fd < 0) return Status::FromErrno(errno, "md barrier: open " + path);
  if (create && ::ftruncate(fd, sizeof(pthread_barrier_t)) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, "md barrier: ftruncate " + path);
  }
  void* p = ::mmap(nullptr, sizeof(pthread_barrier_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file's pages
  if (p == MAP_FAILED) return Status::FromErrno(err, "md barrier: mmap " + path);
  return static_cast<pthread_barrier_t*>(p);
}

}  // namespace

Result<ProcessBarrier> ProcessBarrier::Create(const std::string& path, unsigned parties) {
  if (parties == 0) return Status::InvalidArgument("md barrier: zero parties");
  ROS2_ASSIGN_OR_RETURN(pthread_barrier_t * b, MapBarrierFile(path, true));
  pthread_barrierattr_t attr;
  ::pthread_barrierattr_init(&attr);
  ::pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  const int rc = ::pthread_barrier_init(b, &attr, parties);
  ::pthread_barrierattr_destroy(&attr);
  if (rc != 0) {
    ::munmap(b, sizeof(pthread_barrier_t));
    return Status::FromErrno(rc, "md barrier: pthread_barrier_init");
  }
  return ProcessBarrier(b, true);
}

Result<ProcessBarrier> ProcessBarrier::Attach(const std::string& path) {
  ROS2_ASSIGN_OR_RETURN(pthread_barrier_t * b, MapBarrierFile(path, false));
  return ProcessBarrier(b, false);
}

ProcessBarrier::ProcessBarrier(ProcessBarrier&& other) noexcept
    : barrier_(std::exchange(other.barrier_, nullptr)), owner_(other.owner_) {}

ProcessBarrier::~ProcessBarrier() {
  if (barrier_ == nullptr) return;
  // The creator destroys it once the jobs are gone (they never wait again).
  if (owner_) ::pthread_barrier_destroy(barrier_);
  ::munmap(barrier_, sizeof(pthread_barrier_t));
}

Status ProcessBarrier::Wait() {
  const int rc = ::pthread_barrier_wait(barrier_);
  if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) return Status::FromErrno(rc, "md barrier: wait");
  return Status::Ok();
}

}  // namespace ros2::bench
