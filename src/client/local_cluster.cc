// Client options from a `ros2ctl cluster up` directory (local_cluster.h).
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "client/local_cluster.h"

namespace ros2::local_cluster {

Status CompleteClientOptions(client::ClientOptions& options, std::string_view data_dir) {
  const bool wants_secret = options.secret.empty() && options.secret_file.empty() && options.tenant == "admin";
  if (!data_dir.empty() && (options.control.empty() || wants_secret)) {
    const std::string path = (std::filesystem::path(data_dir) / "cluster.json").string();
    std::ifstream in(path);
    if (!in) {
      return Status::NotFound(fmt::format(
          "no local cluster in {} ({} is missing; start one with `ros2ctl cluster up --data-dir {}`)", data_dir,
          path, data_dir));
    }
    const nlohmann::json cluster = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (cluster.is_discarded() || !cluster.is_object()) {
      return Status::Corruption(fmt::format("{} is not valid JSON", path));
    }
    if (options.control.empty()) {
      if (!cluster.contains("control") || !cluster["control"].is_string()) {
        return Status::Corruption(fmt::format("{} has no control endpoint", path));
      }
      options.control = cluster["control"].get<std::string>();
    }
    if (wants_secret && cluster.contains("admin_secret_file") && cluster["admin_secret_file"].is_string()) {
      options.secret_file = cluster["admin_secret_file"].get<std::string>();
    }
  }
  if (!options.control.empty() && options.control.front() == '/') options.control = "unix:" + options.control;
  return Status::Ok();
}

}  // namespace ros2::local_cluster
