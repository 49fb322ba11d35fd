// pool, cont, tenant and acl: thin commands over the Management service.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "common/config.h"
#include "control/rights.h"
#include "format.h"

namespace ros2::ctl {

namespace {

struct PoolArgs {
  std::string pool;
  std::string size;
  uint32_t targets = 0;
  bool force = false;
};

struct ContArgs {
  std::string pool;
  std::string container;
  std::string oclass;
  std::string rd_fac;
  std::string checksum;
  std::string chunk_size;
  std::vector<std::string> properties;
};

struct TenantArgs {
  std::string name;
  std::string secret;
  std::string secret_out;
};

struct AclArgs {
  std::string pool;
  std::string container;
  std::string tenant;
  std::string rights;
};

Result<std::map<std::string, std::string>> ContainerProperties(const ContArgs& a) {
  std::map<std::string, std::string> props;
  for (const auto& kv : a.properties) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status::InvalidArgument(fmt::format("--property '{}': expected KEY=VALUE", kv));
    }
    props[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!a.oclass.empty()) props["oclass"] = a.oclass;
  if (!a.rd_fac.empty()) props["rd_fac"] = a.rd_fac;
  if (!a.checksum.empty()) props["checksum"] = a.checksum;
  if (!a.chunk_size.empty()) props["chunk_size"] = a.chunk_size;
  return props;
}

Status WriteSecretFile(const std::string& path, const std::string& secret) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return Status::IOError(fmt::format("cannot write the secret file {}", path));
  out << secret << "\n";
  out.close();
  if (!out) return Status::IOError(fmt::format("cannot write the secret file {}", path));
  if (::chmod(path.c_str(), 0600) != 0) return Status::FromErrno(errno, "chmod " + path);
  return Status::Ok();
}

CommandOutput AclOutput(const std::string& what, const google::protobuf::RepeatedPtrField<rpc::AclEntry>& acl) {
  return {fmt::format("ACL of {}:\n{}", what, AclToText(acl, "  ")), {{"object", what}, {"acl", AclToJson(acl)}}};
}

}  // namespace

void AddPoolCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  CLI::App* pool = app.add_subcommand("pool", "Create, list, query and destroy pools");
  pool->require_subcommand(1);
  auto a = std::make_shared<PoolArgs>();

  CLI::App* create = pool->add_subcommand("create", "Create a pool");
  create->add_option("label", a->pool, "Pool label (1-64 of [A-Za-z0-9._-])")->required();
  create->add_option("--size,-s", a->size, "Pool size, e.g. 1GiB, 512M")->required();
  create->add_option("--targets,-t", a->targets, "Number of targets (0: every target)");
  create->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      auto size = ParseSize(a->size);
      if (!size.ok())
        return Status::InvalidArgument(fmt::format("bad --size '{}': {}", a->size, size.status().message()));
      if (*size == 0)
        return Status::InvalidArgument(fmt::format("bad --size '{}': a pool needs a size above 0", a->size));
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto info, mgmt->CreatePool(a->pool, *size, a->targets));
      return CommandOutput{fmt::format("Created pool {} ({}), {} on {} targets\n", info.label(), info.uuid(),
                                       FormatSize(info.size_bytes()), info.target_count()),
                           PoolToJson(info)};
    };
  });

  CLI::App* list = pool->add_subcommand("list", "List pools");
  list->callback([&ctx, selected] {
    *selected = [&ctx]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto pools, mgmt->ListPools());
      nlohmann::json j = nlohmann::json::array();
      std::vector<std::vector<std::string>> rows;
      for (const auto& p : pools) {
        j.push_back(PoolToJson(p));
        rows.push_back({p.label(), p.uuid(), FormatSize(p.size_bytes()), std::to_string(p.target_count()),
                        FormatSize(p.used_bytes()), std::to_string(p.container_count())});
      }
      return CommandOutput{Table({"LABEL", "UUID", "SIZE", "TARGETS", "USED", "CONTAINERS"}, rows), {{"pools", j}}};
    };
  });

  CLI::App* query = pool->add_subcommand("query", "Show a pool: size, space used and free, ACL");
  query->add_option("pool", a->pool, "Pool label or UUID")->required();
  query->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto info, mgmt->QueryPool(a->pool));
      return CommandOutput{PoolToText(info), PoolToJson(info)};
    };
  });

  CLI::App* destroy = pool->add_subcommand("destroy", "Destroy a pool and its data");
  destroy->add_option("pool", a->pool, "Pool label or UUID")->required();
  destroy->add_flag("--force,-f", a->force, "Destroy even when containers remain");
  destroy->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_RETURN_IF_ERROR(mgmt->DestroyPool(a->pool, a->force));
      return CommandOutput{fmt::format("Destroyed pool {}\n", a->pool), {{"destroyed", a->pool}}};
    };
  });
  AddPoolRebuildCommands(pool, ctx, selected);
}

void AddContainerCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  CLI::App* cont = app.add_subcommand("cont", "Create, list, query and destroy containers");
  cont->require_subcommand(1);
  auto a = std::make_shared<ContArgs>();

  CLI::App* create = cont->add_subcommand("create", "Create a container in a pool");
  create->add_option("pool", a->pool, "Pool label or UUID")->required();
  create->add_option("label", a->container, "Container label")->required();
  create->add_option("--oclass", a->oclass, "Default object class: S1, SX, RP_2G1, RP_3G1, RP_2GX, RP_3GX");
  create->add_option("--rd-fac", a->rd_fac,
                     "Redundancy factor: engine losses the objects must survive, 0-2 (default 0)");
  create->add_option("--checksum", a->checksum, "End-to-end checksums: on|off (default on)");
  create->add_option("--chunk-size", a->chunk_size, "Chunk size, e.g. 1MiB");
  create->add_option("--property,-p", a->properties, "Other properties as KEY=VALUE (encryption, encryption_key_id, layout)");
  create->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto props, ContainerProperties(*a));
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto info, mgmt->CreateContainer(a->pool, a->container, props));
      return CommandOutput{fmt::format("Created container {} ({}) in pool {}\n", info.label(), info.uuid(), a->pool),
                           ContainerToJson(info)};
    };
  });

  CLI::App* list = cont->add_subcommand("list", "List the containers of a pool");
  list->add_option("pool", a->pool, "Pool label or UUID")->required();
  list->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto conts, mgmt->ListContainers(a->pool));
      nlohmann::json j = nlohmann::json::array();
      std::vector<std::vector<std::string>> rows;
      for (const auto& c : conts) {
        j.push_back(ContainerToJson(c));
        rows.push_back({c.label(), c.uuid(), c.properties().object_class(), c.properties().checksum() ? "on" : "off",
                        FormatSize(c.properties().chunk_size())});
      }
      return CommandOutput{Table({"LABEL", "UUID", "OCLASS", "CHECKSUM", "CHUNK"}, rows), {{"containers", j}}};
    };
  });

  CLI::App* query = cont->add_subcommand("query", "Show a container and its properties");
  query->add_option("pool", a->pool, "Pool label or UUID")->required();
  query->add_option("container", a->container, "Container label or UUID")->required();
  query->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto info, mgmt->QueryContainer(a->pool, a->container));
      return CommandOutput{ContainerToText(info), ContainerToJson(info)};
    };
  });

  CLI::App* destroy = cont->add_subcommand("destroy", "Destroy a container and its objects");
  destroy->add_option("pool", a->pool, "Pool label or UUID")->required();
  destroy->add_option("container", a->container, "Container label or UUID")->required();
  destroy->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_RETURN_IF_ERROR(mgmt->DestroyContainer(a->pool, a->container));
      return CommandOutput{fmt::format("Destroyed container {} in pool {}\n", a->container, a->pool),
                           {{"destroyed", a->container}, {"pool", a->pool}}};
    };
  });
}

void AddTenantCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  CLI::App* tenant = app.add_subcommand("tenant", "Add, list and delete tenants");
  tenant->require_subcommand(1);
  auto a = std::make_shared<TenantArgs>();

  CLI::App* add = tenant->add_subcommand("add", "Add a tenant; prints its secret (shown once)");
  add->add_option("name", a->name, "Tenant name")->required();
  add->add_option("--secret", a->secret, "The secret to use (default: generated)");
  add->add_option("--secret-out", a->secret_out, "Also write the secret to this file (mode 0600)");
  add->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(std::string secret, mgmt->CreateTenant(a->name, a->secret));
      if (!a->secret_out.empty()) ROS2_RETURN_IF_ERROR(WriteSecretFile(a->secret_out, secret));
      std::string human = fmt::format("Added tenant {}\nsecret: {}\n", a->name, secret);
      if (!a->secret_out.empty()) human += fmt::format("secret written to {}\n", a->secret_out);
      return CommandOutput{human, {{"tenant", a->name}, {"secret", secret}, {"secret_file", a->secret_out}}};
    };
  });

  CLI::App* list = tenant->add_subcommand("list", "List tenants");
  list->callback([&ctx, selected] {
    *selected = [&ctx]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto names, mgmt->ListTenants());
      std::string human;
      for (const auto& n : names) human += n + "\n";
      return CommandOutput{human, {{"tenants", names}}};
    };
  });

  CLI::App* del = tenant->add_subcommand("delete", "Delete a tenant");
  del->add_option("name", a->name, "Tenant name")->required();
  del->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_RETURN_IF_ERROR(mgmt->DeleteTenant(a->name));
      return CommandOutput{fmt::format("Deleted tenant {}\n", a->name), {{"deleted", a->name}}};
    };
  });
}

void AddAclCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  CLI::App* acl = app.add_subcommand("acl", "Show and change the ACL of a pool or container");
  acl->require_subcommand(1);
  auto a = std::make_shared<AclArgs>();

  CLI::App* get = acl->add_subcommand("get", "Show the ACL of a pool, or of a container when given");
  get->add_option("pool", a->pool, "Pool label or UUID")->required();
  get->add_option("container", a->container, "Container label or UUID");
  get->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      if (a->container.empty()) {
        ROS2_ASSIGN_OR_RETURN(auto info, mgmt->QueryPool(a->pool));
        return AclOutput("pool " + a->pool, info.acl());
      }
      ROS2_ASSIGN_OR_RETURN(auto info, mgmt->QueryContainer(a->pool, a->container));
      return AclOutput("container " + a->pool + "/" + a->container, info.acl());
    };
  });

  CLI::App* set = acl->add_subcommand("set", "Set a tenant's rights on a pool or container (none removes)");
  set->add_option("pool", a->pool, "Pool label or UUID")->required();
  set->add_option("container", a->container, "Container label or UUID");
  set->add_option("--tenant", a->tenant, "Tenant name")->required();
  set->add_option("--rights,-r", a->rights, "Letters of rwcda, words (read,write,...), all or none")->required();
  set->callback([&ctx, a, selected] {
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(control::Rights rights, control::ParseRights(a->rights));
      ROS2_ASSIGN_OR_RETURN(auto* mgmt, ctx.Management());
      ROS2_ASSIGN_OR_RETURN(auto acl_list, mgmt->SetAcl(a->pool, a->container, a->tenant, rights));
      google::protobuf::RepeatedPtrField<rpc::AclEntry> entries(acl_list.begin(), acl_list.end());
      std::string what = a->container.empty() ? "pool " + a->pool : "container " + a->pool + "/" + a->container;
      return AclOutput(what, entries);
    };
  });
}

}  // namespace ros2::ctl
