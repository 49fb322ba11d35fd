// The "control" YAML section: defaults, values, and errors naming the key.
#include "control/control_config.h"

#include <gtest/gtest.h>

#include "common/config.h"

namespace ros2::control {
namespace {

TEST(ControlConfigTest, DefaultsAndValues) {
  ControlConfig cfg;
  ASSERT_TRUE(ApplyControlConfig(YAML::Node(), "engine.yaml: control", &cfg).ok());
  EXPECT_EQ(cfg.capability_lifetime, std::chrono::seconds(3600));
  EXPECT_TRUE(cfg.listen.address.empty());
  auto node = ParseYaml(
      "address: unix:/tmp/x.sock\ntls_cert: /c.pem\ntls_key: /k.pem\ncapability_lifetime: 5m\n"
      "pbkdf2_iterations: 20000\n",
      "test");
  ASSERT_TRUE(node.ok());
  ASSERT_TRUE(ApplyControlConfig(*node, "engine.yaml: control", &cfg).ok());
  EXPECT_EQ(cfg.listen.address, "unix:/tmp/x.sock");
  EXPECT_EQ(cfg.listen.tls_cert_path, "/c.pem");
  EXPECT_EQ(cfg.listen.tls_key_path, "/k.pem");
  EXPECT_EQ(cfg.capability_lifetime, std::chrono::seconds(300));
  EXPECT_EQ(cfg.pbkdf2_iterations, 20000u);
}

TEST(ControlConfigTest, ErrorsNameTheKey) {
  auto check = [](const char* yaml, const char* needle) {
    ControlConfig cfg;
    auto node = ParseYaml(yaml, "test");
    ASSERT_TRUE(node.ok());
    Status st = ApplyControlConfig(*node, "engine.yaml: control", &cfg);
    ASSERT_FALSE(st.ok()) << yaml;
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.ToString();
  };
  check("colour: blue\n", "unknown key 'colour'");
  check("tls_cert: /c.pem\n", "both tls_cert and tls_key");
  check("capability_lifetime: soon\n", "capability_lifetime");
  check("pbkdf2_iterations: 5\n", "pbkdf2_iterations");
}

}  // namespace
}  // namespace ros2::control
