// A domU that answers every event with one (event-channel ping-pong partner). It registers,
// offers dom0 an unbound port, sends "<domid> <port>" on its control socket, echoes
// `rounds` events (or stops after 10 s without one), sends "seen <n>", waits for any line
// and exits 0.
#pragma once

#include <string>

namespace unetback::test {

int echo_main(int ctrl, const std::string& world_dir, int rounds);

}  // namespace unetback::test
