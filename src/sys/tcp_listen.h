// One TCP listener on a fixed port on every address: the NCCL node-pair rendezvous and the admin record
// handoff both derive their port from the job and step and try the next one when it is taken.
#pragma once

#include <cstdint>

namespace mrcheck {

// A listening socket (CLOEXEC, SO_REUSEADDR) on `port`, IPv6 with V6ONLY off so IPv4 peers reach it too,
// IPv4 alone where IPv6 is disabled. Returns the fd, or -1 with *err set (EADDRINUSE: try another port).
int tcp_listen_any(std::uint16_t port, int backlog, int* err);

}  // namespace mrcheck
