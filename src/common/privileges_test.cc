#include "common/privileges.h"

#include <linux/capability.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/config.h"
#include "common/daemon.h"

namespace ros2 {
namespace {

Result<ProcessConfig> Parse(std::string_view text) {
  ROS2_ASSIGN_OR_RETURN(YAML::Node root, ParseYaml(text, "test.yaml"));
  ProcessConfig config{.capabilities = EngineCapabilities()};
  ROS2_RETURN_IF_ERROR(ApplyProcessConfig(root, "test.yaml", &config));
  return config;
}

TEST(PrivilegesTest, CapabilityNamesParseWithOrWithoutThePrefix) {
  EXPECT_EQ(*ParseCapability("sys_ptrace"), CAP_SYS_PTRACE);
  EXPECT_EQ(*ParseCapability("CAP_IPC_OWNER"), CAP_IPC_OWNER);
  EXPECT_EQ(CapabilityName(CAP_DAC_OVERRIDE), "cap_dac_override");
  auto bad = ParseCapability("ptrace_everything");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("'ptrace_everything'"), std::string::npos) << bad.status().ToString();
  EXPECT_EQ(CapabilityMask({CAP_DAC_OVERRIDE, CAP_SYS_PTRACE}), (uint64_t{1} << 1) | (uint64_t{1} << 19));
}

TEST(PrivilegesTest, ProcessSectionSetsUserAndCapabilities) {
  auto defaults = Parse("targets: 2\n");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->user, "ros2");
  EXPECT_EQ(defaults->capabilities, EngineCapabilities());

  auto set = Parse("process: { user: svc, capabilities: [sys_ptrace] }\n");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->user, "svc");
  EXPECT_EQ(set->capabilities, std::vector<int>{CAP_SYS_PTRACE});

  auto none = Parse("process: { capabilities: [] }\n");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->capabilities.empty());
}

TEST(PrivilegesTest, BadProcessSectionsNameTheKey) {
  auto typo = Parse("process: { usr: svc }\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().ToString().find("unknown key 'usr'"), std::string::npos) << typo.status().ToString();
  auto cap = Parse("process: { capabilities: [sys_ptrace, nope] }\n");
  ASSERT_FALSE(cap.ok());
  EXPECT_NE(cap.status().ToString().find("process.capabilities[1]"), std::string::npos) << cap.status().ToString();
  auto scalar = Parse("process: { capabilities: sys_ptrace }\n");
  ASSERT_FALSE(scalar.ok());
  EXPECT_NE(scalar.status().ToString().find("expected a list"), std::string::npos) << scalar.status().ToString();
}

TEST(PrivilegesTest, MissingUserNamesItAndHowToCreateIt) {
  ProcessConfig config{.user = "ros2-test-no-such-user"};
  auto user = LookUpServiceUser(config, "ros2-engine");
  ASSERT_FALSE(user.ok());
  const std::string m = user.status().ToString();
  EXPECT_NE(m.find("'ros2-test-no-such-user'"), std::string::npos) << m;
  EXPECT_NE(m.find("useradd --system"), std::string::npos) << m;
  EXPECT_NE(m.find("process.user: root"), std::string::npos) << m;
}

// LeaveRoot (common/daemon.h) without a switch: process.user root keeps root,
// a user that does not exist stops before anything is handed over; in both,
// neither step runs. (The switch itself runs in every root-started engine
// of the integration tests.)
TEST(PrivilegesTest, LeaveRootWithoutASwitchRunsNeitherStep) {
  int steps = 0;
  auto step = [&](const ServiceUser&) {
    ++steps;
    return Status::Ok();
  };
  auto kept = LeaveRoot(ProcessConfig{.user = "root"}, "ros2-test", step, step);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(*kept, ::geteuid() == 0 ? "runs as root (process.user: root)" : "");
  auto missing = LeaveRoot(ProcessConfig{.user = "ros2-test-no-such-user"}, "ros2-test", step, step);
  if (::geteuid() == 0) {
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("ros2-test runs as root"), std::string::npos) << missing.status().ToString();
  } else {
    ASSERT_TRUE(missing.ok()) << missing.status().ToString();
    EXPECT_EQ(*missing, "");
  }
  EXPECT_EQ(steps, 0);
}

}  // namespace
}  // namespace ros2
