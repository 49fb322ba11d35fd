// The child of the VOS crash test: opens the store, runs the crash workload
// from a first epoch with several updates in flight, and reports on stdout
// "B <epoch>" before submitting each update and "A <epoch>" once it is
// acknowledged, until it has run `ops` updates or is killed.
// Usage: vos_crash_child <store path> <first epoch> <ops>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "vos/vos.h"
#include "vos/vos_crash_model.h"

namespace {

void Say(const std::string& line) {
  std::string s = line + "\n";
  if (::write(STDOUT_FILENO, s.data(), s.size()) != static_cast<ssize_t>(s.size())) std::_Exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ros2::vos;
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <store path> <first epoch> <ops>\n", argv[0]);
    return 2;
  }
  VosOptions options;
  options.path = argv[1];
  options.data_size = 256ull << 20;
  options.io_depth = 64;
  ros2::Epoch first = std::strtoull(argv[2], nullptr, 10);
  int ops = std::atoi(argv[3]);
  auto vos = Vos::Open(options);
  if (!vos.ok()) {
    std::fprintf(stderr, "open: %s\n", vos.status().ToString().c_str());
    return 1;
  }
  Say("R");
  std::map<ros2::Epoch, testing::CrashOp> in_flight;
  int failed = 0;
  for (int k = 0; k < ops; ++k) {
    ros2::Epoch e = first + static_cast<ros2::Epoch>(k);
    auto& op = in_flight.emplace(e, testing::MakeCrashOp(e)).first->second;
    Say("B " + std::to_string(e));
    (*vos)->SubmitUpdate(op.ToUpdate(e), [e, &in_flight, &failed](ros2::Status s) {
      if (s.ok()) {
        Say("A " + std::to_string(e));
      } else {
        std::fprintf(stderr, "update %llu: %s\n", static_cast<unsigned long long>(e), s.ToString().c_str());
        ++failed;
      }
      in_flight.erase(e);
    });
    while ((*vos)->in_flight() >= 8) (*vos)->Progress(true);
  }
  while ((*vos)->in_flight() > 0) (*vos)->Progress(true);
  Say("D");
  return failed == 0 ? 0 : 1;
}
