#pragma once
// SIGINT and SIGTERM for the whole process, handled in one place (serve, bench, and the commands that
// write outputs). The handler only writes the signal's number to a pipe: allocating or locking in a
// handler deadlocks when the signal lands while a thread holds malloc's lock. A watcher thread reads
// the pipe and runs the actions registered with OnStopSignal, on an ordinary thread where they may
// allocate, lock and remove files. With no action registered, a stop signal does what it did before
// the handler was installed (it ends the process, or is ignored if it was ignored).
#include <functional>

namespace mo::signals {

// Runs action(sig) on the watcher thread for each SIGINT or SIGTERM while this object lives, in the
// order the objects were made. The first one installs the handler, for the life of the process.
// An action must not make or destroy an OnStopSignal (the destructor waits for a running action).
class OnStopSignal {
 public:
  explicit OnStopSignal(std::function<void(int sig)> action);
  ~OnStopSignal();
  OnStopSignal(const OnStopSignal&) = delete;
  OnStopSignal& operator=(const OnStopSignal&) = delete;

 private:
  int id_;
};

// Ends the process as `sig` would with no handler (the parent sees "killed by sig"): for an action
// that has cleaned up, or a second Ctrl-C that means "stop now".
[[noreturn]] void die_of(int sig);

// A write to a socket whose peer has gone fails with EPIPE instead of killing the process (servers).
void ignore_broken_pipe();

}  // namespace mo::signals
