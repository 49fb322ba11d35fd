#include "common/mountinfo.h"

#include <gtest/gtest.h>

namespace ros2 {
namespace {

TEST(MountinfoTest, NamesTheTypeAtAMountPointAndNothingElsewhere) {
  EXPECT_EQ(MountedFsType("/proc"), std::optional<std::string>("proc"));
  EXPECT_EQ(MountedFsType("/proc/self"), std::nullopt);  // inside a mount, not a mount point
  EXPECT_EQ(MountedFsType("/no/such/mount/point"), std::nullopt);
}

}  // namespace
}  // namespace ros2
