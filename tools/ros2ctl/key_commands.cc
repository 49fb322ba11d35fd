// key create: a new container key file for encrypted containers (32 random
// bytes as 64 hex digits, mode 0600; docs/dfs.md, "Encrypted files").
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "ros2/dfs.h"

namespace ros2::ctl {

void AddKeyCommands(CLI::App& app, CtlContext& /*ctx*/, CommandRunner* selected) {
  CLI::App* key = app.add_subcommand("key", "Make key files for encrypted containers (encryption=aes-256-gcm)");
  key->require_subcommand(1);
  auto out = std::make_shared<std::string>();
  CLI::App* create = key->add_subcommand("create", "Write a new random key to FILE (mode 0600; never overwrites)");
  create->add_option("--out", *out, "The key file to create")->required();
  create->callback([out, selected] {
    *selected = [out]() -> Result<CommandOutput> {
      ROS2_RETURN_IF_ERROR(dfs::CreateKeyFile(*out));
      return CommandOutput{fmt::format("Key created in {} (keep private; mount with it, and name it at container "
                                       "create with -p encryption_key_id=NAME)\n",
                                       *out),
                           {{"key_file", *out}}};
    };
  });
}

}  // namespace ros2::ctl
