// cert ca|engine: the cluster CA and the engine certificates of TLS control
// endpoints (src/control/certificates.h). Files are written with mode 0600.
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "control/certificates.h"

namespace ros2::ctl {

namespace {
struct CertArgs {
  std::string dir;
  std::string ca_dir;
  std::string out;
  std::vector<std::string> names;
  int days = 825;
};
}  // namespace

void AddCertCommands(CLI::App& app, CtlContext& /*ctx*/, CommandRunner* selected) {
  CLI::App* cert = app.add_subcommand("cert", "Make the cluster CA and engine certificates for TLS control endpoints");
  cert->require_subcommand(1);
  auto a = std::make_shared<CertArgs>();

  CLI::App* ca = cert->add_subcommand("ca", "Create a cluster CA (DIR/ca.crt, DIR/ca.key; mode 0600)");
  ca->add_option("--dir", a->dir, "Directory for the CA files (created)")->required();
  ca->add_option("--days", a->days, "Validity in days")->capture_default_str();
  ca->callback([a, selected] {
    *selected = [a]() -> Result<CommandOutput> {
      ROS2_RETURN_IF_ERROR(control::CreateCertificateAuthority(a->dir, {.days = a->days}));
      const std::string crt = a->dir + "/" + control::kCaCertFile;
      return CommandOutput{
          fmt::format("Cluster CA created in {}\n  certificate (give to engines as control.tls_ca, to clients as "
                      "--tls-ca): {}\n  key (keep private): {}/{}\n",
                      a->dir, crt, a->dir, control::kCaKeyFile),
          {{"dir", a->dir}, {"ca_cert", crt}, {"ca_key", a->dir + "/" + control::kCaKeyFile}}};
    };
  });

  CLI::App* engine =
      cert->add_subcommand("engine", "Sign an engine certificate with the CA (OUT/engine.crt, OUT/engine.key)");
  engine->add_option("--ca-dir", a->ca_dir, "Directory of the CA (ca.crt, ca.key)")->required();
  engine->add_option("--out", a->out, "Directory for engine.crt and engine.key (created)")->required();
  engine->add_option("--name", a->names, "Host name or IP address clients dial (repeat for several)")->required();
  engine->add_option("--days", a->days, "Validity in days")->capture_default_str();
  engine->callback([a, selected] {
    *selected = [a]() -> Result<CommandOutput> {
      std::error_code ec;
      std::filesystem::create_directories(a->out, ec);
      if (ec) return Status::IOError(fmt::format("cert engine: create {}: {}", a->out, ec.message()));
      const std::string crt = a->out + "/" + control::kEngineCertFile;
      const std::string key = a->out + "/" + control::kEngineKeyFile;
      control::CertificateOptions o;
      o.names = a->names;
      o.days = a->days;
      ROS2_RETURN_IF_ERROR(control::IssueCertificate(a->ca_dir, o, crt, key));
      return CommandOutput{fmt::format("Engine certificate for {} signed by the CA in {}\n  control.tls_cert: {}\n"
                                       "  control.tls_key:  {}\n",
                                       fmt::join(a->names, ", "), a->ca_dir, crt, key),
                           {{"cert", crt}, {"key", key}, {"names", a->names}}};
    };
  });
}

}  // namespace ros2::ctl
