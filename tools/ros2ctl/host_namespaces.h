// The namespaces of one simulated host of `ros2ctl cluster up --hosts N`
// (docs/cluster.md, "The host harness").
//
// A host is a network namespace made with `ip netns add` (host_network.h)
// plus an init process: pid 1 of a fresh PID namespace, in fresh IPC and mount
// namespaces, with its own /proc, /sys (the host's network devices) and an
// empty tmpfs on /dev/shm. Two processes of different hosts therefore differ
// in network, IPC and PID namespace, which is how UCX tells hosts apart
// (it would otherwise use shared memory between them); two processes of one
// host share all of them. The init reaps orphans; SIGTERM makes it stop
// every process of the host (SIGTERM, SIGKILL after a grace); when it dies
// the kernel kills whatever is left in its PID namespace.
//
// Processes are started inside a host by entering the init's namespaces
// (setns, then a fork so the child lands in the PID namespace). Free
// functions of ros2ctl's main thread; they fork, so call them before any
// other thread exists or with fork-safe state only (no locks held).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace ros2::ctl {

// Starts the init of a host inside the network namespace /run/netns/`netns`
// and waits until its mounts are made. Returns its pid (as this process sees
// it). The init leaves the caller's session and holds none of its files.
Result<pid_t> StartHostInit(const std::string& netns, const std::string& name);

// Whether `pid` is the init of host network namespace `netns` (it runs and
// its network namespace is /run/netns/`netns`): guards a pid read from a
// state file against reuse.
bool IsHostInit(pid_t pid, const std::string& netns);

// Stops the hosts of `inits` (pids that passed IsHostInit): SIGTERM to each
// init (which stops its host's processes), SIGKILL to those still there after
// `grace_ms`; returns once every one is gone. (An exiting init soon fails
// IsHostInit, its namespaces released: identity is checked before the
// signal, the wait is on the pid.)
void StopHostInits(const std::vector<pid_t>& inits, int grace_ms);

// SIGKILLs every process whose network namespace is /run/netns/`netns` (as
// `ip netns pids` lists them) and waits until they are gone.
void KillProcessesInNetns(const std::string& netns);

// Starts `argv` (argv[0] a path) inside the host of init `init_pid`, in a new
// session, stdin from /dev/null, stdout and stderr appended to `log_path`.
// Returns its pid as this process sees it. The process is reaped by the init.
Result<pid_t> SpawnInHost(pid_t init_pid, const std::vector<std::string>& argv, const std::string& log_path);

// Runs `argv` inside the host of init `init_pid` with this process's stdin,
// `stdout_fd` as stdout and stderr, and waits; returns its exit code (128 +
// signal when killed by one). argv[0] is looked up on PATH.
Result<int> RunInHost(pid_t init_pid, const std::vector<std::string>& argv, int stdout_fd);

}  // namespace ros2::ctl
