#pragma once
// The sandbox side of the start sequence: what the cloned child does between
// clone and exec, in this order (each step needs the one before):
//
//   0. die with the worker (PR_SET_PDEATHSIG) and close every descriptor the
//      clone copied from it but the child's own: its end of the sync socket,
//      the init binary, the channel and the output fds. Until then the child
//      holds the worker's files (the data directory's lock, the stores,
//      listening sockets, the worker's end of this very socket); a killed
//      worker then leaves a child that blocks the next one from starting.
//      With the worker's end closed, its death reads as end-of-file on the
//      sync socket (a SOCK_SEQPACKET pair), even if it died before the
//      death signal was asked for;
//   1. wait for the worker's "go" (maps written, cgroups joined, veth moved
//      in), receiving the id-mapped rootfs mount and the boot_id file mount
//      with it;
//   2. drop the worker's supplementary groups;
//   3. a new cgroup namespace, rooted at the sandbox's own cgroup;
//   4. hostname = sandbox id;
//   5. the host part of the mount plan (private propagation, attach the
//      rootfs, chdir into it) while still the worker's host uid, so that the
//      rootfs path is reachable through root-only directories;
//   6. become root of the user namespace (setresgid/setresuid 0): from here
//      on the child is the sandbox's unprivileged host uid;
//   7. the rest of the mount plan (mount_ns.hpp), ending in pivot_root;
//   8. fds: channel -> 3, stdout/stderr, stdin /dev/null, everything else
//      close-on-exec;
//   9. capabilities down to Docker's set (caps.hpp);
//  10. no_new_privs;
//  11. the seccomp filter (seccomp_filter.hpp): last, since it forbids mount.
//      Without no_new_privs (child_plan::no_new_privs false) steps 9-11 are
//      the filter first, while CAP_SYS_ADMIN still lets it in, then the caps;
//  12. execve the init. The death signal is cleared first: a started init
//      outlives its worker (a restarted worker adopts it).
//
// The child shares the memory of a multi-threaded worker until it execs: it
// makes only system calls, on data prepared before clone, with every signal
// blocked (handlers reset to default and the mask restored just before exec). A failure is reported
// to the worker as a child_failure over the sync socket; exec closes the socket, which the worker
// reads as success.

#include <linux/filter.h>
#include <signal.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "worker/runtime/mount_ns.hpp"

namespace airlock::worker {

/// Steps that can fail in the child, in order.
enum class child_step : uint32_t {
  receive_go = 1,
  setgroups,
  unshare_cgroup,
  sethostname,
  mount,
  setresgid,
  setresuid,
  file_descriptors,
  capabilities,
  no_new_privs,
  seccomp,
  exec,
};

/// The report a failing child writes before it exits.
struct child_failure {
  uint32_t step = 0;   ///< a child_step
  int32_t error = 0;   ///< errno
  uint64_t detail = 0; ///< the failing mount op's index
};

/// Everything the child needs, prepared by the worker before clone.
struct child_plan {
  int sync_fd = -1; ///< the child's end of the sync socket
  const char* hostname = nullptr;
  size_t hostname_length = 0;
  const std::vector<mount_op>* mounts = nullptr;
  size_t mount_host_steps = 0; ///< mount_plan::host_steps()
  int channel_fd = -1;         ///< -> fd 3; -1: none
  int stdout_fd = -1;          ///< -> fd 1; -1: /dev/null
  int stderr_fd = -1;          ///< -> fd 2; -1: /dev/null
  uint64_t capabilities = 0;
  sock_fprog seccomp{};
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  /// The mask the init execs with; the child runs with every signal blocked
  /// until then. Filled in by the clone.
  sigset_t signal_mask{};
  /// When set, the init is this executable on the host (execveat), and
  /// argv[0] only its name; else argv[0] is resolved inside the new root.
  int exec_fd = -1;
  /// Set no_new_privs (then caps are dropped before the filter goes in);
  /// false lets set-uid programs inside work (the filter goes in first).
  bool no_new_privs = true;
};

/// Runs steps 1-12; never returns (exec or _exit).
[[noreturn]] void run_child(const child_plan& plan) noexcept;

/// "mount proc on /proc: Operation not permitted": for the worker's error.
std::string describe_child_failure(const child_failure& failure, const mount_plan& mounts);

} // namespace airlock::worker
