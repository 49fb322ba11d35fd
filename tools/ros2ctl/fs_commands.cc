// fs ls|put|get|cat|mkdir|rm|stat|mv POOL CONT ...: the POSIX namespace of a
// container (DFS) from the command line. See docs/ros2ctl.md.
#include "fs_commands.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "fs_listing.h"
#include "fs_namespace_ops.h"
#include "fs_session.h"
#include "fs_transfer.h"

namespace ros2::ctl {

namespace {

struct FsArgs {
  FsTarget target;
  std::string path;
  std::string path2;
  bool long_format = false;
  bool recursive = false;
  bool parents = false;
  bool force = false;
  bool progress = false;
  bool quiet = false;
  std::string mode = "755";
  int stdout_fd = -1;  // cat: the real stdout, saved before main() points fd 1 at stderr
};

using FsBody = std::function<Result<CommandOutput>(FsSession&, FsArgs&)>;

// Adds POOL CONT to a command and installs a runner that mounts the
// namespace, then runs `body`.
void AddFsCommand(CLI::App* cmd, CtlContext& ctx, CommandRunner* selected, const std::shared_ptr<FsArgs>& a,
                  FsBody body) {
  cmd->callback([&ctx, a, selected, body] {
    *selected = [&ctx, a, body]() -> Result<CommandOutput> {
      ROS2_ASSIGN_OR_RETURN(auto session, FsSession::Open(ctx, a->target));
      return body(*session, *a);
    };
  });
}

void AddPoolCont(CLI::App* cmd, FsArgs& a) {
  cmd->add_option("pool", a.target.pool, "Pool label or UUID")->required();
  cmd->add_option("cont", a.target.container, "Container label or UUID")->required();
}

ProgressMode ProgressOf(const FsArgs& a) {
  if (a.quiet) return ProgressMode::kOff;
  return a.progress ? ProgressMode::kAlways : ProgressMode::kAuto;
}

void AddTransferFlags(CLI::App* cmd, FsArgs& a) {
  cmd->add_flag("--recursive,-r", a.recursive, "Copy directory trees");
  auto* p = cmd->add_flag("--progress", a.progress, "Show the progress line even when stderr is not a terminal");
  cmd->add_flag("--quiet,-q", a.quiet, "No progress line")->excludes(p);
}

}  // namespace

void AddFsCommands(CLI::App& app, CtlContext& ctx, CommandRunner* selected) {
  CLI::App* fs = app.add_subcommand("fs", "Files and directories of a container's POSIX namespace (DFS)");
  fs->require_subcommand(1);
  auto a = std::make_shared<FsArgs>();
  fs->add_option("--transport", a->target.transport, "Client data-plane transport: tcp, shm or auto")
      ->check(CLI::IsMember({"tcp", "shm", "auto"}))
      ->capture_default_str();
  fs->add_option("--key-file", a->target.key_file, "Key file of an encrypted container (ros2ctl key create)");

  CLI::App* ls = fs->add_subcommand("ls", "List a directory (or show one entry)");
  AddPoolCont(ls, *a);
  ls->add_option("path", a->path, "Path in the container (default /)");
  ls->add_flag("-l,--long", a->long_format, "Mode, owner, size, modification time; symlink targets");
  AddFsCommand(ls, ctx, selected, a, [](FsSession& s, FsArgs& a) -> Result<CommandOutput> {
    ROS2_ASSIGN_OR_RETURN(std::string path, NormalizeRemotePath(a.path.empty() ? "/" : a.path));
    return ListPath(s, path, a.long_format);
  });

  CLI::App* put = fs->add_subcommand("put", "Copy a local file, symlink or (-r) directory tree into the container");
  AddPoolCont(put, *a);
  put->add_option("local", a->path, "Local source")->required();
  put->add_option("remote", a->path2, "Destination path (an existing directory receives the source by name)")
      ->required();
  AddTransferFlags(put, *a);
  AddFsCommand(put, ctx, selected, a, [](FsSession& s, FsArgs& a) -> Result<CommandOutput> {
    ROS2_ASSIGN_OR_RETURN(auto sum, PutPath(s, a.path, a.path2, {a.recursive, ProgressOf(a)}));
    return CommandOutput{sum.ToText("put"), sum.ToJson()};
  });

  CLI::App* get = fs->add_subcommand("get", "Copy a file, symlink or (-r) directory tree out of the container");
  AddPoolCont(get, *a);
  get->add_option("remote", a->path, "Source path in the container")->required();
  get->add_option("local", a->path2, "Local destination (an existing directory receives the source by name)")
      ->required();
  AddTransferFlags(get, *a);
  AddFsCommand(get, ctx, selected, a, [](FsSession& s, FsArgs& a) -> Result<CommandOutput> {
    ROS2_ASSIGN_OR_RETURN(auto sum, GetPath(s, a.path, a.path2, {a.recursive, ProgressOf(a)}));
    return CommandOutput{sum.ToText("get"), sum.ToJson()};
  });

  CLI::App* cat = fs->add_subcommand("cat", "Write a file's bytes to stdout");
  AddPoolCont(cat, *a);
  cat->add_option("path", a->path, "File path in the container")->required();
  cat->callback([&ctx, a, selected] {
    // main() sends fd 1 to stderr while a command runs; the bytes go to the
    // real stdout, saved here while parsing.
    a->stdout_fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);  // not inherited by spawned processes
    *selected = [&ctx, a]() -> Result<CommandOutput> {
      struct FdCloser {
        int fd;
        ~FdCloser() {
          if (fd >= 0) ::close(fd);
        }
      } closer{a->stdout_fd};
      if (ctx.options().json) return Status::InvalidArgument("fs cat writes the file's bytes; --json does not apply");
      if (a->stdout_fd < 0) return Status::FromErrno(errno, "fs cat: dup of stdout");
      ROS2_ASSIGN_OR_RETURN(auto session, FsSession::Open(ctx, a->target));
      ROS2_ASSIGN_OR_RETURN(std::string path, NormalizeRemotePath(a->path));
      return CatPath(*session, path, a->stdout_fd);
    };
  });

  CLI::App* mkdir = fs->add_subcommand("mkdir", "Create a directory");
  AddPoolCont(mkdir, *a);
  mkdir->add_option("path", a->path, "Directory path in the container")->required();
  mkdir->add_flag("-p,--parents", a->parents, "Create missing parents; no error when it exists");
  mkdir->add_option("-m,--mode", a->mode, "Permission bits in octal")->capture_default_str();
  AddFsCommand(mkdir, ctx, selected, a, [](FsSession& s, FsArgs& a) -> Result<CommandOutput> {
    char* end = nullptr;
    const unsigned long mode = std::strtoul(a.mode.c_str(), &end, 8);
    if (a.mode.empty() || *end != '\0' || mode > 07777) {
      return Status::InvalidArgument(
          fmt::format("bad --mode '{}': expected octal permission bits such as 755", a.mode));
    }
    ROS2_ASSIGN_OR_RETURN(std::string path, NormalizeRemotePath(a.path));
    return MakeDirectory(s, path, a.parents, static_cast<mode_t>(mode));
  });

  CLI::App* rm = fs->add_subcommand("rm", "Remove a file, symlink, empty directory or (-r) directory tree");
  AddPoolCont(rm, *a);
  rm->add_option("path", a->path, "Path in the container")->required();
  rm->add_flag("-r,--recursive", a->recursive, "Remove a directory and everything below it");
  rm->add_flag("-f,--force", a->force, "No error when the path does not exist");
  AddFsCommand(rm, ctx, selected, a, [](FsSession& s, FsArgs& a) -> Result<CommandOutput> {
    ROS2_ASSIGN_OR_RETURN(std::string path, NormalizeRemotePath(a.path));
    return RemovePath(s, path, a.recursive, a.force);
  });

  CLI::App* stat = fs->add_subcommand("stat", "Show an entry's attributes (a symlink itself)");
  AddPoolCont(stat, *a);
  stat->add_option("path", a->path, "Path in the container")->required();
  AddFsCommand(stat, ctx, selected, a, [](FsSession& s, FsArgs& a) -> Result<CommandOutput> {
    ROS2_ASSIGN_OR_RETURN(std::string path, NormalizeRemotePath(a.path));
    return StatPath(s, path);
  });

  CLI::App* mv = fs->add_subcommand("mv", "Rename or move an entry (into DST when DST is a directory)");
  AddPoolCont(mv, *a);
  mv->add_option("src", a->path, "Source path")->required();
  mv->add_option("dst", a->path2, "Destination path")->required();
  AddFsCommand(mv, ctx, selected, a, [](FsSession& s, FsArgs& a) -> Result<CommandOutput> {
    ROS2_ASSIGN_OR_RETURN(std::string src, NormalizeRemotePath(a.path));
    ROS2_ASSIGN_OR_RETURN(std::string dst, NormalizeRemotePath(a.path2));
    return MovePath(s, src, dst);
  });
}

}  // namespace ros2::ctl
